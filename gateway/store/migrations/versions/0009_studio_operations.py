"""Studio operations records (agents contract §4): studios, the operations record, charter
revisions, objectives, work items, attempts, artifacts, handoffs, approvals, the budget ledger,
signals/outbox, the team (role templates, recruitment plans, employees and their versions,
capability evidence), audit events and the control loop's lease.

Revision ID: 0009
Revises: 0006
"""

from typing import Any

import sqlalchemy as sa
from alembic import op

import gateway.store.types

revision = "0009"
down_revision = "0006"
branch_labels = None
depends_on = None

UTC = gateway.store.types.UTCDateTime
JSON = gateway.store.types.JSONText
BIG_ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def _timestamps() -> list[sa.Column]:
    return [sa.Column("created_at", UTC(), nullable=False),
            sa.Column("updated_at", UTC(), nullable=False)]


def _created() -> sa.Column:
    return sa.Column("created_at", UTC(), nullable=False)


def _id() -> sa.Column:
    return sa.Column("id", sa.Integer(), autoincrement=True, nullable=False)


def _big_id() -> sa.Column:
    return sa.Column("id", BIG_ID, autoincrement=True, nullable=False)


def _text(name: str, default: str | None = "") -> sa.Column:
    if default is None:
        return sa.Column(name, sa.Text(), nullable=False)
    return sa.Column(name, sa.Text(), server_default=default, nullable=False)


def _string(name: str, length: int, default: str | None = "") -> sa.Column:
    if default is None:
        return sa.Column(name, sa.String(length=length), nullable=False)
    return sa.Column(name, sa.String(length=length), server_default=default, nullable=False)


def _int(name: str, default: str = "0") -> sa.Column:
    return sa.Column(name, sa.Integer(), server_default=sa.text(default), nullable=False)


def _nanos(name: str) -> sa.Column:
    return sa.Column(name, sa.BigInteger(), server_default=sa.text("0"), nullable=False)


def _maybe_int(name: str) -> sa.Column:
    return sa.Column(name, sa.Integer(), nullable=True)


def _maybe_time(name: str) -> sa.Column:
    return sa.Column(name, UTC(), nullable=True)


def _company_fk(table: str) -> list[Any]:
    return [sa.Column("personal_company_id", sa.Integer(), nullable=False),
            sa.ForeignKeyConstraint(
                ["personal_company_id"], ["studio_companies.id"], ondelete="CASCADE",
                name=op.f(f"fk_{table}_personal_company_id_studio_companies"))]


def _item_fk(table: str) -> list[Any]:
    return [sa.Column("work_item_id", sa.Integer(), nullable=False),
            sa.ForeignKeyConstraint(
                ["work_item_id"], ["studio_work_items.id"], ondelete="CASCADE",
                name=op.f(f"fk_{table}_work_item_id_studio_work_items"))]


def _employee_fk(table: str) -> list[Any]:
    return [sa.Column("employee_id", sa.Integer(), nullable=False),
            sa.ForeignKeyConstraint(
                ["employee_id"], ["studio_employees.id"], ondelete="CASCADE",
                name=op.f(f"fk_{table}_employee_id_studio_employees"))]


def _pk(table: str, *columns: str) -> sa.PrimaryKeyConstraint:
    return sa.PrimaryKeyConstraint(*(columns or ("id",)), name=op.f(f"pk_{table}"))


def upgrade() -> None:
    op.create_table(
        "studios",
        sa.Column("user_id", sa.Integer(), nullable=False),
        _string("id", 80, None),
        _string("name", 200, None),
        _text("description"),
        sa.Column("agents", JSON(), server_default="[]", nullable=False),
        *_timestamps(),
        sa.ForeignKeyConstraint(["user_id"], ["users.id"], ondelete="CASCADE",
                                name=op.f("fk_studios_user_id_users")),
        _pk("studios", "user_id", "id"),
    )
    op.create_table(
        "studio_companies",
        _id(),
        sa.Column("owner_user_id", sa.Integer(), nullable=False),
        _string("agent_group_id", 80, None),
        _string("name", 160, None),
        _string("state", 24, "operating"),
        _string("timezone", 80, "UTC"),
        _string("autonomy_level", 4, "r0"),
        _nanos("daily_budget_nanos"),
        _nanos("monthly_budget_nanos"),
        _nanos("balance_floor_nanos"),
        _maybe_int("charter_revision_id"),
        _string("connector_device_id", 80),
        _text("connector_workspace_path"),
        _text("connector_command_prefixes", "[]"),
        _string("cloud_sandbox_id", 80),
        _int("max_concurrent_tasks", "1"),
        _maybe_time("paused_at"),
        *_timestamps(),
        sa.ForeignKeyConstraint(["owner_user_id"], ["users.id"], ondelete="CASCADE",
                                name=op.f("fk_studio_companies_owner_user_id_users")),
        _pk("studio_companies"),
        sa.UniqueConstraint("owner_user_id", "agent_group_id",
                            name="uq_studio_companies_owner_studio"),
    )
    op.create_table(
        "studio_charters",
        _id(),
        *_company_fk("studio_charters"),
        sa.Column("revision", sa.Integer(), nullable=False),
        _text("mission", None),
        _text("goals", "[]"),
        _text("data_boundaries", "[]"),
        _text("prohibited_actions", "[]"),
        _text("approval_policy", None),
        sa.Column("created_by_user_id", sa.Integer(), nullable=False),
        _created(),
        _pk("studio_charters"),
        sa.UniqueConstraint("personal_company_id", "revision",
                            name="uq_studio_charters_revision"),
    )
    op.create_table(
        "studio_objectives",
        _id(),
        *_company_fk("studio_objectives"),
        sa.Column("owner_user_id", sa.Integer(), nullable=False),
        _string("title", 200, None),
        _text("description"),
        _string("status", 16, "active"),
        _int("priority"),
        _maybe_time("target_date"),
        *_timestamps(),
        _pk("studio_objectives"),
    )
    op.create_table(
        "studio_work_items",
        _id(),
        *_company_fk("studio_work_items"),
        sa.Column("owner_user_id", sa.Integer(), nullable=False),
        _maybe_int("objective_id"),
        _string("title", 200, None),
        _text("description"),
        _text("definition_of_done"),
        _string("status", 24, "queued"),
        _int("priority"),
        _string("risk_level", 4, "r0"),
        _string("idempotency_key", 100, None),
        _text("input_snapshot", "{}"),
        _text("allowed_tools", "[]"),
        _maybe_int("assigned_employee_id"),
        _maybe_int("reviewer_employee_id"),
        _maybe_int("charter_revision_id"),
        _nanos("estimated_cost_nanos"),
        _nanos("reserved_cost_nanos"),
        _nanos("consumed_cost_nanos"),
        _maybe_time("due_at"),
        *_timestamps(),
        sa.ForeignKeyConstraint(["objective_id"], ["studio_objectives.id"], ondelete="SET NULL",
                                name=op.f("fk_studio_work_items_objective_id_studio_objectives")),
        _pk("studio_work_items"),
        sa.UniqueConstraint("personal_company_id", "idempotency_key",
                            name="uq_studio_work_items_idempotency_key"),
    )
    op.create_index("ix_studio_work_items_status", "studio_work_items",
                    ["personal_company_id", "status"])
    op.create_table(
        "studio_work_attempts",
        _id(),
        *_item_fk("studio_work_attempts"),
        sa.Column("personal_company_id", sa.Integer(), nullable=False),
        sa.Column("attempt_number", sa.Integer(), nullable=False),
        _string("advanced_chat_run_id", 32),
        _string("kind", 16, None),
        _string("status", 24, "executing"),
        _string("lease_token", 64),
        _maybe_time("lease_expires_at"),
        _maybe_time("started_at"),
        _maybe_time("finished_at"),
        _text("input_snapshot", "{}"),
        _text("result_summary"),
        _nanos("cost_nanos"),
        *_timestamps(),
        _pk("studio_work_attempts"),
        sa.UniqueConstraint("work_item_id", "attempt_number",
                            name="uq_studio_work_attempts_number"),
    )
    op.create_index("ix_studio_work_attempts_status", "studio_work_attempts",
                    ["personal_company_id", "status"])
    op.create_index("ix_studio_work_attempts_run", "studio_work_attempts",
                    ["advanced_chat_run_id"])
    op.create_table(
        "studio_artifacts",
        _id(),
        *_item_fk("studio_artifacts"),
        _maybe_int("work_attempt_id"),
        _string("kind", 40, None),
        _text("uri"),
        _string("content_hash", 64),
        _string("source", 40),
        _string("acceptance_state", 16, "pending"),
        _created(),
        _pk("studio_artifacts"),
    )
    op.create_table(
        "studio_employees",
        _id(),
        *_company_fk("studio_employees"),
        _string("employee_key", 80, None),
        _string("advanced_chat_agent_id", 32),
        _string("name", 200, None),
        _string("role", 80, "candidate"),
        _string("status", 16, "probation"),
        _int("version", "1"),
        _text("allowed_tools", "[]"),
        _text("data_scope", "{}"),
        _string("max_risk_level", 4, "r0"),
        _int("max_concurrency", "1"),
        *_timestamps(),
        _pk("studio_employees"),
        sa.UniqueConstraint("personal_company_id", "employee_key",
                            name="uq_studio_employees_key"),
    )
    op.create_table(
        "studio_employee_versions",
        _id(),
        *_employee_fk("studio_employee_versions"),
        sa.Column("version", sa.Integer(), nullable=False),
        _string("prompt_profile", 120),
        _text("model_policy", "{}"),
        _text("tool_grants", "[]"),
        _text("data_scope", "{}"),
        _text("skill_scope", "[]"),
        _text("runtime_policy", "{}"),
        _created(),
        _pk("studio_employee_versions"),
        sa.UniqueConstraint("employee_id", "version",
                            name="uq_studio_employee_versions_version"),
    )
    op.create_table(
        "studio_capability_evidence",
        _id(),
        *_employee_fk("studio_capability_evidence"),
        sa.Column("employee_version", sa.Integer(), nullable=False),
        _string("capability", 200, None),
        _text("evidence_uri", None),
        _text("evaluation_summary"),
        _string("score", 24, None),
        _string("confidence", 24, None),
        _maybe_time("valid_until"),
        _created(),
        _pk("studio_capability_evidence"),
    )
    op.create_table(
        "studio_handoffs",
        _id(),
        *_item_fk("studio_handoffs"),
        _maybe_int("work_attempt_id"),
        _maybe_int("from_employee_id"),
        _maybe_int("to_employee_id"),
        _string("status", 16, "pending"),
        _text("completion_summary", None),
        _text("evidence", "[]"),
        _text("risks", "[]"),
        _text("next_steps", None),
        _text("decision_note"),
        _maybe_time("accepted_at"),
        *_timestamps(),
        _pk("studio_handoffs"),
    )
    op.create_table(
        "studio_approvals",
        _id(),
        *_company_fk("studio_approvals"),
        *_item_fk("studio_approvals"),
        _string("risk_level", 4, None),
        _string("status", 16, "pending"),
        _text("requested_action"),
        _string("parameters_hash", 64),
        _text("decision_reason"),
        _maybe_int("decided_by_user_id"),
        _maybe_time("decided_at"),
        _maybe_time("expires_at"),
        *_timestamps(),
        _pk("studio_approvals"),
        sa.UniqueConstraint("work_item_id", name=op.f("uq_studio_approvals_work_item_id")),
    )
    op.create_table(
        "studio_role_templates",
        _id(),
        *_company_fk("studio_role_templates"),
        _string("template_key", 80, None),
        _string("name", 160, None),
        _text("responsibilities"),
        _text("definition_of_done", None),
        _text("required_skills", "[]"),
        _text("allowed_tools", "[]"),
        _string("max_risk_level", 4, "r0"),
        _int("max_concurrency", "1"),
        *_timestamps(),
        _pk("studio_role_templates"),
        sa.UniqueConstraint("personal_company_id", "template_key",
                            name="uq_studio_role_templates_key"),
    )
    op.create_table(
        "studio_recruitment_plans",
        _id(),
        *_company_fk("studio_recruitment_plans"),
        _maybe_int("role_template_id"),
        _string("title", 200, None),
        _text("capability_gap", None),
        _text("expected_benefit"),
        _string("max_risk_level", 4, "r0"),
        _text("proposed_tools", "[]"),
        _string("status", 16, "proposed"),
        _text("decision_reason"),
        _maybe_int("employee_id"),
        _maybe_time("decided_at"),
        *_timestamps(),
        _pk("studio_recruitment_plans"),
    )
    op.create_table(
        "studio_budget_ledger",
        _big_id(),
        *_company_fk("studio_budget_ledger"),
        _maybe_int("work_item_id"),
        _string("entry_type", 16, None),
        sa.Column("amount_nanos", sa.BigInteger(), nullable=False),
        _string("reference", 80),
        _created(),
        _pk("studio_budget_ledger"),
    )
    op.create_index("ix_studio_budget_ledger_company", "studio_budget_ledger",
                    ["personal_company_id", "created_at"])
    op.create_table(
        "studio_signals",
        _big_id(),
        *_company_fk("studio_signals"),
        _maybe_int("work_item_id"),
        _string("kind", 60, None),
        _string("status", 16, "inbox"),
        _text("payload", "{}"),
        _maybe_time("triaged_at"),
        _created(),
        _pk("studio_signals"),
    )
    op.create_index("ix_studio_signals_status", "studio_signals",
                    ["personal_company_id", "status"])
    op.create_table(
        "studio_outbox",
        _big_id(),
        *_company_fk("studio_outbox"),
        _string("event_key", 120, None),
        _string("event_type", 60, None),
        _text("payload", "{}"),
        _created(),
        _pk("studio_outbox"),
        sa.UniqueConstraint("personal_company_id", "event_key", name="uq_studio_outbox_key"),
    )
    op.create_table(
        "studio_audit_events",
        _big_id(),
        *_company_fk("studio_audit_events"),
        _maybe_int("work_item_id"),
        _string("actor_type", 16, None),
        _string("actor_id", 80),
        _string("event_type", 60, None),
        _text("payload", "{}"),
        _created(),
        _pk("studio_audit_events"),
    )
    op.create_index("ix_studio_audit_events_item", "studio_audit_events",
                    ["personal_company_id", "work_item_id"])
    op.create_table(
        "studio_scheduler_leases",
        _string("name", 40, None),
        _string("holder", 100),
        _maybe_time("expires_at"),
        _pk("studio_scheduler_leases", "name"),
    )


def downgrade() -> None:
    op.drop_table("studio_scheduler_leases")
    op.drop_index("ix_studio_audit_events_item", table_name="studio_audit_events")
    op.drop_table("studio_audit_events")
    op.drop_table("studio_outbox")
    op.drop_index("ix_studio_signals_status", table_name="studio_signals")
    op.drop_table("studio_signals")
    op.drop_index("ix_studio_budget_ledger_company", table_name="studio_budget_ledger")
    op.drop_table("studio_budget_ledger")
    op.drop_table("studio_recruitment_plans")
    op.drop_table("studio_role_templates")
    op.drop_table("studio_approvals")
    op.drop_table("studio_handoffs")
    op.drop_table("studio_capability_evidence")
    op.drop_table("studio_employee_versions")
    op.drop_table("studio_employees")
    op.drop_table("studio_artifacts")
    op.drop_index("ix_studio_work_attempts_run", table_name="studio_work_attempts")
    op.drop_index("ix_studio_work_attempts_status", table_name="studio_work_attempts")
    op.drop_table("studio_work_attempts")
    op.drop_index("ix_studio_work_items_status", table_name="studio_work_items")
    op.drop_table("studio_work_items")
    op.drop_table("studio_objectives")
    op.drop_table("studio_charters")
    op.drop_table("studio_companies")
    op.drop_table("studios")
