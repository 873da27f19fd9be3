"""Tables of assistant chat: per-user settings, agents, skills, sessions, messages, runs
and run events (agents contract §1).

Split out of ``gateway.store.schema`` (one module per feature area); the tables live on the same
``metadata``, and ``gateway.store.schema`` re-exports them so callers keep one import.
"""

from __future__ import annotations

from sqlalchemy import (
    BigInteger,
    Boolean,
    Column,
    ForeignKey,
    Index,
    Integer,
    String,
    Table,
    Text,
    UniqueConstraint,
)

from gateway.store.schema_base import FALSE, TRUE, ZERO, _id, _timestamps, metadata
from gateway.store.types import JSONText, UTCDateTime

# --- assistant chat (agents contract §1) ----------------------------------------------------
# The admin settings are ``advanced_chat_<field>`` rows of ``settings`` (§1.1); what follows is
# per user.  String ids are the contract's ``<prefix>-<base32>`` ids (§0.1).

assistant_user_settings = Table(
    "assistant_user_settings", metadata,
    Column("user_id", Integer, ForeignKey("users.id", ondelete="CASCADE"), primary_key=True),
    Column("title_model_name", String(100), nullable=False, server_default=""),
    Column("title_user_channel_id", Integer, nullable=False, server_default=ZERO),
    # recent | all
    Column("title_generation_scope", String(16), nullable=False, server_default="recent"),
    Column("connector_approval_agent_id", String(32), nullable=False, server_default=""),
    # the user's custom MCP server items (§1.3), replaced as a whole list
    Column("custom_mcp_servers", JSONText, nullable=False, server_default="[]"),
    *_timestamps(),
)

assistant_agents = Table(
    "assistant_agents", metadata,
    _id(),
    Column("user_id", Integer, ForeignKey("users.id", ondelete="CASCADE"), nullable=False),
    # the user's always-present agent, answered as id "default" (§1.4)
    Column("is_default", Boolean, nullable=False, server_default=FALSE),
    Column("name", String(100), nullable=False),
    Column("description", Text, nullable=False, server_default=""),
    Column("prompt", Text, nullable=False, server_default=""),
    Column("default_model", String(100), nullable=False, server_default=""),
    Column("user_channel_id", Integer, nullable=False, server_default=ZERO),
    Column("stream", Boolean, nullable=False, server_default=FALSE),
    Column("enabled", Boolean, nullable=False, server_default=TRUE),
    Column("visibility", String(16), nullable=False, server_default="personal"),
    Column("skill_ids", JSONText, nullable=False, server_default="[]"),
    Column("mcp_server_ids", JSONText, nullable=False, server_default="[]"),
    Column("knowledge_base_ids", JSONText, nullable=False, server_default="[]"),
    Column("preset_messages", JSONText, nullable=False, server_default="[]"),
    # allowed tool groups ([P-4]); empty = all
    Column("tools", JSONText, nullable=False, server_default="[]"),
    *_timestamps(),
    UniqueConstraint("user_id", "name", name="uq_assistant_agents_user_name"),
)

assistant_skills = Table(
    "assistant_skills", metadata,
    _id(),
    Column("user_id", Integer, ForeignKey("users.id", ondelete="CASCADE"), nullable=False),
    Column("name", String(100), nullable=False),
    Column("description", Text, nullable=False, server_default=""),
    Column("prompt", Text, nullable=False, server_default=""),
    Column("content", Text, nullable=False, server_default=""),
    Column("enabled", Boolean, nullable=False, server_default=TRUE),
    Column("mcp_server_ids", JSONText, nullable=False, server_default="[]"),
    *_timestamps(),
    UniqueConstraint("user_id", "name", name="uq_assistant_skills_user_name"),
)

assistant_sessions = Table(
    "assistant_sessions", metadata,
    # client-chosen (<= 80 chars) or ``acs-...``; unique across users (409 when taken, §1.6)
    Column("id", String(80), primary_key=True),
    Column("user_id", Integer, ForeignKey("users.id", ondelete="CASCADE"), nullable=False),
    Column("title", String(200), nullable=False, server_default=""),
    # chat | assistant | agent_group
    Column("run_mode", String(16), nullable=False, server_default="chat"),
    Column("agent_id", String(32), nullable=False, server_default=""),
    Column("agent_group_id", String(80), nullable=False, server_default=""),
    Column("skill_ids", JSONText, nullable=False, server_default="[]"),
    Column("mcp_server_ids", JSONText, nullable=False, server_default="[]"),
    Column("knowledge_base_ids", JSONText, nullable=False, server_default="[]"),
    Column("connector_device_id", String(80), nullable=False, server_default=""),
    Column("connector_workspace_path", Text, nullable=False, server_default=""),
    Column("cloud_sandbox_id", String(80), nullable=False, server_default=""),
    # manual | full_access | assistant
    Column("connector_approval_mode", String(16), nullable=False, server_default="manual"),
    Column("connector_command_prefixes", JSONText, nullable=False, server_default="[]"),
    Column("model_name", String(100), nullable=False, server_default=""),
    Column("user_channel_id", Integer, nullable=False, server_default=ZERO),
    Column("max_tokens", Integer, nullable=False, server_default=ZERO),
    # a sampling knob (0..2), not money; kept as JSON so 0.7 round-trips as written
    Column("temperature", JSONText, nullable=True),
    Column("reasoning_effort", String(16), nullable=False, server_default=""),
    Column("auto_compress_context", Boolean, nullable=False, server_default=FALSE),
    Column("disabled_tool_groups", JSONText, nullable=False, server_default="[]"),
    Column("folder_id", String(80), nullable=False, server_default=""),
    Column("metadata", JSONText, nullable=False, server_default="{}"),
    # internal studio work sessions are read-only through the chat routes (§1.6, §4.16)
    Column("internal", Boolean, nullable=False, server_default=FALSE),
    *_timestamps(),
)
Index("ix_assistant_sessions_user", assistant_sessions.c.user_id,
      assistant_sessions.c.updated_at)

assistant_messages = Table(
    "assistant_messages", metadata,
    Column("session_id", String(80), ForeignKey("assistant_sessions.id", ondelete="CASCADE"),
           primary_key=True),
    # a client id kept as given when valid, else ``acm-...``; unique within its session
    Column("id", String(80), primary_key=True),
    Column("position", Integer, nullable=False),
    # user | assistant
    Column("role", String(16), nullable=False),
    Column("content", Text, nullable=False, server_default=""),
    Column("content_parts", JSONText, nullable=False, server_default="[]"),
    Column("tool_calls", JSONText, nullable=False, server_default="[]"),
    *_timestamps(),
)
Index("ix_assistant_messages_position", assistant_messages.c.session_id,
      assistant_messages.c.position)

assistant_runs = Table(
    "assistant_runs", metadata,
    Column("id", String(32), primary_key=True),
    Column("user_id", Integer, ForeignKey("users.id", ondelete="CASCADE"), nullable=False),
    Column("session_id", String(80), ForeignKey("assistant_sessions.id", ondelete="CASCADE"),
           nullable=False),
    Column("assistant_message_id", String(80), nullable=False),
    # assistant | agent_group
    Column("mode", String(16), nullable=False),
    # queued | running | completed | failed | cancelled (guarded transitions, §1.9)
    Column("status", String(16), nullable=False, server_default="queued"),
    Column("status_message", String(64), nullable=False, server_default=""),
    Column("current_round", Integer, nullable=False, server_default=ZERO),
    Column("error_message", Text, nullable=False, server_default=""),
    Column("cost_nanos", BigInteger, nullable=False, server_default=ZERO),
    Column("tool_calls", Integer, nullable=False, server_default=ZERO),
    Column("tool_call_details", JSONText, nullable=False, server_default="[]"),
    # everything the background worker needs to run it on any node (prepared request)
    Column("request", JSONText, nullable=False, server_default="{}"),
    # the node working it and until when its lease holds (a dead node's run fails, §1.9)
    Column("node_name", String(100), nullable=False, server_default=""),
    Column("lease_expires_at", UTCDateTime, nullable=True),
    Column("deadline_at", UTCDateTime, nullable=True),
    Column("started_at", UTCDateTime, nullable=True),
    Column("finished_at", UTCDateTime, nullable=True),
    *_timestamps(),
)
Index("ix_assistant_runs_session", assistant_runs.c.session_id, assistant_runs.c.status)
Index("ix_assistant_runs_user", assistant_runs.c.user_id, assistant_runs.c.status)

assistant_run_events = Table(
    "assistant_run_events", metadata,
    Column("id", BigInteger().with_variant(Integer, "sqlite"), primary_key=True,
           autoincrement=True),
    Column("run_id", String(32), ForeignKey("assistant_runs.id", ondelete="CASCADE"),
           nullable=False),
    Column("session_id", String(80), nullable=False),
    # 1, 2, 3 ... per run
    Column("seq", Integer, nullable=False),
    Column("event", String(32), nullable=False),
    Column("payload", JSONText, nullable=False, server_default="{}"),
    Column("created_at", UTCDateTime, nullable=False),
    UniqueConstraint("run_id", "seq", name="uq_assistant_run_events_run_seq"),
)
