"""Tables of studio operations (agents contract §4).

Split out of ``gateway.store.schema`` (one module per feature area); the tables live on the same
``metadata``, and ``gateway.store.schema`` re-exports them so callers keep one import.
"""

from __future__ import annotations

from sqlalchemy import (
    BigInteger,
    Column,
    ForeignKey,
    Index,
    Integer,
    String,
    Table,
    Text,
    UniqueConstraint,
    text,
)

from gateway.store.schema import ZERO, _id, _timestamps, metadata
from gateway.store.types import JSONText, UTCDateTime

# --- studio operations (agents contract §4) -------------------------------------------------
# A studio (§4.1) is a user's team of chat agents; its operations record ("personal company",
# §4.3) and everything under it hang off ``studio_companies``.  Money is nano-units; the
# contract's JSON-text fields (§4.3) are ``Text`` columns holding canonical JSON text, because
# they are returned as strings, not parsed values.

studios = Table(
    "studios", metadata,
    Column("user_id", Integer, ForeignKey("users.id", ondelete="CASCADE"), primary_key=True),
    # caller-chosen ``^[A-Za-z0-9_-]{1,80}$`` or ``agp-...``; unique per user (§4.1)
    Column("id", String(80), primary_key=True),
    Column("name", String(200), nullable=False),
    Column("description", Text, nullable=False, server_default=""),
    # the members, in order: [{id, name, type, prompt, chat_agent_id, ...}]
    Column("agents", JSONText, nullable=False, server_default="[]"),
    *_timestamps(),
)

studio_companies = Table(
    "studio_companies", metadata,
    _id(),
    Column("owner_user_id", Integer, ForeignKey("users.id", ondelete="CASCADE"), nullable=False),
    Column("agent_group_id", String(80), nullable=False),
    Column("name", String(160), nullable=False),
    # draft | bootstrap | operating | attention_required | paused | safe_mode | archived (§4.4)
    Column("state", String(24), nullable=False, server_default="operating"),
    Column("timezone", String(80), nullable=False, server_default="UTC"),
    Column("autonomy_level", String(4), nullable=False, server_default="r0"),
    Column("daily_budget_nanos", BigInteger, nullable=False, server_default=ZERO),
    Column("monthly_budget_nanos", BigInteger, nullable=False, server_default=ZERO),
    Column("balance_floor_nanos", BigInteger, nullable=False, server_default=ZERO),
    Column("charter_revision_id", Integer, nullable=True),
    Column("connector_device_id", String(80), nullable=False, server_default=""),
    Column("connector_workspace_path", Text, nullable=False, server_default=""),
    Column("connector_command_prefixes", Text, nullable=False, server_default="[]"),
    Column("cloud_sandbox_id", String(80), nullable=False, server_default=""),
    Column("max_concurrent_tasks", Integer, nullable=False, server_default=text("1")),
    Column("paused_at", UTCDateTime, nullable=True),
    *_timestamps(),
    UniqueConstraint("owner_user_id", "agent_group_id",
                     name="uq_studio_companies_owner_studio"),
)

studio_charters = Table(
    "studio_charters", metadata,
    _id(),
    Column("personal_company_id", Integer,
           ForeignKey("studio_companies.id", ondelete="CASCADE"), nullable=False),
    Column("revision", Integer, nullable=False),
    Column("mission", Text, nullable=False),
    Column("goals", Text, nullable=False, server_default="[]"),
    Column("data_boundaries", Text, nullable=False, server_default="[]"),
    Column("prohibited_actions", Text, nullable=False, server_default="[]"),
    Column("approval_policy", Text, nullable=False),
    Column("created_by_user_id", Integer, nullable=False),
    Column("created_at", UTCDateTime, nullable=False),
    UniqueConstraint("personal_company_id", "revision", name="uq_studio_charters_revision"),
)

studio_objectives = Table(
    "studio_objectives", metadata,
    _id(),
    Column("personal_company_id", Integer,
           ForeignKey("studio_companies.id", ondelete="CASCADE"), nullable=False),
    Column("owner_user_id", Integer, nullable=False),
    Column("title", String(200), nullable=False),
    Column("description", Text, nullable=False, server_default=""),
    # active | paused | completed | archived
    Column("status", String(16), nullable=False, server_default="active"),
    Column("priority", Integer, nullable=False, server_default=ZERO),
    Column("target_date", UTCDateTime, nullable=True),
    *_timestamps(),
)

studio_work_items = Table(
    "studio_work_items", metadata,
    _id(),
    Column("personal_company_id", Integer,
           ForeignKey("studio_companies.id", ondelete="CASCADE"), nullable=False),
    Column("owner_user_id", Integer, nullable=False),
    Column("objective_id", Integer, ForeignKey("studio_objectives.id", ondelete="SET NULL"),
           nullable=True),
    Column("title", String(200), nullable=False),
    Column("description", Text, nullable=False, server_default=""),
    Column("definition_of_done", Text, nullable=False, server_default=""),
    # §4.10 statuses
    Column("status", String(24), nullable=False, server_default="queued"),
    Column("priority", Integer, nullable=False, server_default=ZERO),
    Column("risk_level", String(4), nullable=False, server_default="r0"),
    Column("idempotency_key", String(100), nullable=False),
    Column("input_snapshot", Text, nullable=False, server_default="{}"),
    Column("allowed_tools", Text, nullable=False, server_default="[]"),
    Column("assigned_employee_id", Integer, nullable=True),
    Column("reviewer_employee_id", Integer, nullable=True),
    # the charter revision in force when the item was created
    Column("charter_revision_id", Integer, nullable=True),
    Column("estimated_cost_nanos", BigInteger, nullable=False, server_default=ZERO),
    Column("reserved_cost_nanos", BigInteger, nullable=False, server_default=ZERO),
    Column("consumed_cost_nanos", BigInteger, nullable=False, server_default=ZERO),
    Column("due_at", UTCDateTime, nullable=True),
    *_timestamps(),
    UniqueConstraint("personal_company_id", "idempotency_key",
                     name="uq_studio_work_items_idempotency_key"),
)
Index("ix_studio_work_items_status", studio_work_items.c.personal_company_id,
      studio_work_items.c.status)

studio_work_attempts = Table(
    "studio_work_attempts", metadata,
    _id(),
    Column("work_item_id", Integer, ForeignKey("studio_work_items.id", ondelete="CASCADE"),
           nullable=False),
    # denormalized so a studio's executing attempts are one indexed read (pause, slots)
    Column("personal_company_id", Integer, nullable=False),
    Column("attempt_number", Integer, nullable=False),
    Column("advanced_chat_run_id", String(32), nullable=False, server_default=""),
    # execution | review
    Column("kind", String(16), nullable=False),
    # executing | awaiting_review | verified | blocked | retryable_failure | dead_letter |
    # cancelled
    Column("status", String(24), nullable=False, server_default="executing"),
    # never exposed; guards lease renewal/recovery against a stale holder
    Column("lease_token", String(64), nullable=False, server_default=""),
    Column("lease_expires_at", UTCDateTime, nullable=True),
    Column("started_at", UTCDateTime, nullable=True),
    Column("finished_at", UTCDateTime, nullable=True),
    Column("input_snapshot", Text, nullable=False, server_default="{}"),
    Column("result_summary", Text, nullable=False, server_default=""),
    Column("cost_nanos", BigInteger, nullable=False, server_default=ZERO),
    *_timestamps(),
    UniqueConstraint("work_item_id", "attempt_number", name="uq_studio_work_attempts_number"),
)
Index("ix_studio_work_attempts_status", studio_work_attempts.c.personal_company_id,
      studio_work_attempts.c.status)
Index("ix_studio_work_attempts_run", studio_work_attempts.c.advanced_chat_run_id)

studio_artifacts = Table(
    "studio_artifacts", metadata,
    _id(),
    Column("work_item_id", Integer, ForeignKey("studio_work_items.id", ondelete="CASCADE"),
           nullable=False),
    Column("work_attempt_id", Integer, nullable=True),
    Column("kind", String(40), nullable=False),
    Column("uri", Text, nullable=False, server_default=""),
    Column("content_hash", String(64), nullable=False, server_default=""),
    Column("source", String(40), nullable=False, server_default=""),
    # pending | verified
    Column("acceptance_state", String(16), nullable=False, server_default="pending"),
    Column("created_at", UTCDateTime, nullable=False),
)

studio_employees = Table(
    "studio_employees", metadata,
    _id(),
    Column("personal_company_id", Integer,
           ForeignKey("studio_companies.id", ondelete="CASCADE"), nullable=False),
    Column("employee_key", String(80), nullable=False),
    Column("advanced_chat_agent_id", String(32), nullable=False, server_default=""),
    Column("name", String(200), nullable=False),
    Column("role", String(80), nullable=False, server_default="candidate"),
    # probation | active | suspended | retired
    Column("status", String(16), nullable=False, server_default="probation"),
    Column("version", Integer, nullable=False, server_default=text("1")),
    Column("allowed_tools", Text, nullable=False, server_default="[]"),
    Column("data_scope", Text, nullable=False, server_default="{}"),
    Column("max_risk_level", String(4), nullable=False, server_default="r0"),
    Column("max_concurrency", Integer, nullable=False, server_default=text("1")),
    *_timestamps(),
    UniqueConstraint("personal_company_id", "employee_key", name="uq_studio_employees_key"),
)

studio_employee_versions = Table(
    "studio_employee_versions", metadata,
    _id(),
    Column("employee_id", Integer, ForeignKey("studio_employees.id", ondelete="CASCADE"),
           nullable=False),
    Column("version", Integer, nullable=False),
    Column("prompt_profile", String(120), nullable=False, server_default=""),
    Column("model_policy", Text, nullable=False, server_default="{}"),
    Column("tool_grants", Text, nullable=False, server_default="[]"),
    Column("data_scope", Text, nullable=False, server_default="{}"),
    Column("skill_scope", Text, nullable=False, server_default="[]"),
    # connector device / workspace / prefixes / cloud sandbox of a runtime binding
    Column("runtime_policy", Text, nullable=False, server_default="{}"),
    Column("created_at", UTCDateTime, nullable=False),
    UniqueConstraint("employee_id", "version", name="uq_studio_employee_versions_version"),
)

studio_capability_evidence = Table(
    "studio_capability_evidence", metadata,
    _id(),
    Column("employee_id", Integer, ForeignKey("studio_employees.id", ondelete="CASCADE"),
           nullable=False),
    Column("employee_version", Integer, nullable=False),
    Column("capability", String(200), nullable=False),
    Column("evidence_uri", Text, nullable=False),
    Column("evaluation_summary", Text, nullable=False, server_default=""),
    # 0..1, kept as minimal decimal text so it round-trips exactly
    Column("score", String(24), nullable=False),
    Column("confidence", String(24), nullable=False),
    Column("valid_until", UTCDateTime, nullable=True),
    Column("created_at", UTCDateTime, nullable=False),
)

studio_handoffs = Table(
    "studio_handoffs", metadata,
    _id(),
    Column("work_item_id", Integer, ForeignKey("studio_work_items.id", ondelete="CASCADE"),
           nullable=False),
    Column("work_attempt_id", Integer, nullable=True),
    Column("from_employee_id", Integer, nullable=True),
    Column("to_employee_id", Integer, nullable=True),
    # pending | accepted | rejected | needs_revision
    Column("status", String(16), nullable=False, server_default="pending"),
    Column("completion_summary", Text, nullable=False),
    Column("evidence", Text, nullable=False, server_default="[]"),
    Column("risks", Text, nullable=False, server_default="[]"),
    Column("next_steps", Text, nullable=False),
    Column("decision_note", Text, nullable=False, server_default=""),
    Column("accepted_at", UTCDateTime, nullable=True),
    *_timestamps(),
)

studio_approvals = Table(
    "studio_approvals", metadata,
    _id(),
    Column("personal_company_id", Integer,
           ForeignKey("studio_companies.id", ondelete="CASCADE"), nullable=False),
    # one approval per work item (§4.12)
    Column("work_item_id", Integer, ForeignKey("studio_work_items.id", ondelete="CASCADE"),
           nullable=False, unique=True),
    Column("risk_level", String(4), nullable=False),
    # pending | approved | rejected | expired
    Column("status", String(16), nullable=False, server_default="pending"),
    Column("requested_action", Text, nullable=False, server_default=""),
    Column("parameters_hash", String(64), nullable=False, server_default=""),
    Column("decision_reason", Text, nullable=False, server_default=""),
    Column("decided_by_user_id", Integer, nullable=True),
    Column("decided_at", UTCDateTime, nullable=True),
    Column("expires_at", UTCDateTime, nullable=True),
    *_timestamps(),
)

studio_role_templates = Table(
    "studio_role_templates", metadata,
    _id(),
    Column("personal_company_id", Integer,
           ForeignKey("studio_companies.id", ondelete="CASCADE"), nullable=False),
    Column("template_key", String(80), nullable=False),
    Column("name", String(160), nullable=False),
    Column("responsibilities", Text, nullable=False, server_default=""),
    Column("definition_of_done", Text, nullable=False),
    Column("required_skills", Text, nullable=False, server_default="[]"),
    Column("allowed_tools", Text, nullable=False, server_default="[]"),
    Column("max_risk_level", String(4), nullable=False, server_default="r0"),
    Column("max_concurrency", Integer, nullable=False, server_default=text("1")),
    *_timestamps(),
    UniqueConstraint("personal_company_id", "template_key", name="uq_studio_role_templates_key"),
)

studio_recruitment_plans = Table(
    "studio_recruitment_plans", metadata,
    _id(),
    Column("personal_company_id", Integer,
           ForeignKey("studio_companies.id", ondelete="CASCADE"), nullable=False),
    Column("role_template_id", Integer, nullable=True),
    Column("title", String(200), nullable=False),
    Column("capability_gap", Text, nullable=False),
    Column("expected_benefit", Text, nullable=False, server_default=""),
    Column("max_risk_level", String(4), nullable=False, server_default="r0"),
    Column("proposed_tools", Text, nullable=False, server_default="[]"),
    # proposed | approved | rejected | hired
    Column("status", String(16), nullable=False, server_default="proposed"),
    Column("decision_reason", Text, nullable=False, server_default=""),
    Column("employee_id", Integer, nullable=True),
    Column("decided_at", UTCDateTime, nullable=True),
    *_timestamps(),
)

studio_budget_ledger = Table(
    "studio_budget_ledger", metadata,
    Column("id", BigInteger().with_variant(Integer, "sqlite"), primary_key=True,
           autoincrement=True),
    Column("personal_company_id", Integer,
           ForeignKey("studio_companies.id", ondelete="CASCADE"), nullable=False),
    Column("work_item_id", Integer, nullable=True),
    # reservation (+) | release (-) | consumption (+), append-only (§4.11)
    Column("entry_type", String(16), nullable=False),
    Column("amount_nanos", BigInteger, nullable=False),
    Column("reference", String(80), nullable=False, server_default=""),
    Column("created_at", UTCDateTime, nullable=False),
)
Index("ix_studio_budget_ledger_company", studio_budget_ledger.c.personal_company_id,
      studio_budget_ledger.c.created_at)

studio_signals = Table(
    "studio_signals", metadata,
    Column("id", BigInteger().with_variant(Integer, "sqlite"), primary_key=True,
           autoincrement=True),
    Column("personal_company_id", Integer,
           ForeignKey("studio_companies.id", ondelete="CASCADE"), nullable=False),
    Column("work_item_id", Integer, nullable=True),
    Column("kind", String(60), nullable=False),
    # inbox | triaged
    Column("status", String(16), nullable=False, server_default="inbox"),
    Column("payload", Text, nullable=False, server_default="{}"),
    Column("triaged_at", UTCDateTime, nullable=True),
    Column("created_at", UTCDateTime, nullable=False),
)
Index("ix_studio_signals_status", studio_signals.c.personal_company_id, studio_signals.c.status)

studio_outbox = Table(
    "studio_outbox", metadata,
    Column("id", BigInteger().with_variant(Integer, "sqlite"), primary_key=True,
           autoincrement=True),
    Column("personal_company_id", Integer,
           ForeignKey("studio_companies.id", ondelete="CASCADE"), nullable=False),
    Column("event_key", String(120), nullable=False),
    Column("event_type", String(60), nullable=False),
    Column("payload", Text, nullable=False, server_default="{}"),
    Column("created_at", UTCDateTime, nullable=False),
    UniqueConstraint("personal_company_id", "event_key", name="uq_studio_outbox_key"),
)

studio_audit_events = Table(
    "studio_audit_events", metadata,
    Column("id", BigInteger().with_variant(Integer, "sqlite"), primary_key=True,
           autoincrement=True),
    Column("personal_company_id", Integer,
           ForeignKey("studio_companies.id", ondelete="CASCADE"), nullable=False),
    Column("work_item_id", Integer, nullable=True),
    # owner | system | chief | worker | reviewer
    Column("actor_type", String(16), nullable=False),
    Column("actor_id", String(80), nullable=False, server_default=""),
    Column("event_type", String(60), nullable=False),
    Column("payload", Text, nullable=False, server_default="{}"),
    Column("created_at", UTCDateTime, nullable=False),
)
Index("ix_studio_audit_events_item", studio_audit_events.c.personal_company_id,
      studio_audit_events.c.work_item_id)

# one row per cluster-wide job lease (the studio control loop, §4.8): who holds it until when
studio_scheduler_leases = Table(
    "studio_scheduler_leases", metadata,
    Column("name", String(40), primary_key=True),
    Column("holder", String(100), nullable=False, server_default=""),
    Column("expires_at", UTCDateTime, nullable=True),
)
