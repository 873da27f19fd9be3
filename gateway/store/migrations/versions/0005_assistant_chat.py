"""Assistant chat records (agents contract §1): per-user settings, agents, skills, sessions,
messages, runs and run events.

Revision ID: 0005
Revises: 0003
"""

import sqlalchemy as sa
from alembic import op

import gateway.store.types

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None

UTC = gateway.store.types.UTCDateTime
JSON = gateway.store.types.JSONText


def _timestamps() -> list[sa.Column]:
    return [sa.Column("created_at", UTC(), nullable=False),
            sa.Column("updated_at", UTC(), nullable=False)]



def _list(name: str) -> sa.Column:
    return sa.Column(name, JSON(), server_default="[]", nullable=False)


def _text(name: str) -> sa.Column:
    return sa.Column(name, sa.Text(), server_default="", nullable=False)


def _string(name: str, length: int, default: str = "") -> sa.Column:
    return sa.Column(name, sa.String(length=length), server_default=default, nullable=False)


def _flag(name: str, default: bool) -> sa.Column:
    return sa.Column(name, sa.Boolean(), server_default=sa.text("true" if default else "false"),
                     nullable=False)


def _number(name: str) -> sa.Column:
    return sa.Column(name, sa.Integer(), server_default=sa.text("0"), nullable=False)


def upgrade() -> None:
    op.create_table(
        "assistant_user_settings",
        sa.Column("user_id", sa.Integer(), nullable=False),
        _string("title_model_name", 100),
        _number("title_user_channel_id"),
        _string("title_generation_scope", 16, "recent"),
        _string("connector_approval_agent_id", 32),
        _list("custom_mcp_servers"),
        *_timestamps(),
        sa.ForeignKeyConstraint(["user_id"], ["users.id"], ondelete="CASCADE",
                                name=op.f("fk_assistant_user_settings_user_id_users")),
        sa.PrimaryKeyConstraint("user_id", name=op.f("pk_assistant_user_settings")),
    )
    op.create_table(
        "assistant_agents",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("user_id", sa.Integer(), nullable=False),
        _flag("is_default", False),
        sa.Column("name", sa.String(length=100), nullable=False),
        _text("description"),
        _text("prompt"),
        _string("default_model", 100),
        _number("user_channel_id"),
        _flag("stream", False),
        _flag("enabled", True),
        _string("visibility", 16, "personal"),
        _list("skill_ids"),
        _list("mcp_server_ids"),
        _list("knowledge_base_ids"),
        _list("preset_messages"),
        _list("tools"),
        *_timestamps(),
        sa.ForeignKeyConstraint(["user_id"], ["users.id"], ondelete="CASCADE",
                                name=op.f("fk_assistant_agents_user_id_users")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_assistant_agents")),
        sa.UniqueConstraint("user_id", "name", name="uq_assistant_agents_user_name"),
    )
    op.create_table(
        "assistant_skills",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("user_id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=100), nullable=False),
        _text("description"),
        _text("prompt"),
        _text("content"),
        _flag("enabled", True),
        _list("mcp_server_ids"),
        *_timestamps(),
        sa.ForeignKeyConstraint(["user_id"], ["users.id"], ondelete="CASCADE",
                                name=op.f("fk_assistant_skills_user_id_users")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_assistant_skills")),
        sa.UniqueConstraint("user_id", "name", name="uq_assistant_skills_user_name"),
    )
    op.create_table(
        "assistant_sessions",
        sa.Column("id", sa.String(length=80), nullable=False),
        sa.Column("user_id", sa.Integer(), nullable=False),
        _string("title", 200),
        _string("run_mode", 16, "chat"),
        _string("agent_id", 32),
        _string("agent_group_id", 80),
        _list("skill_ids"),
        _list("mcp_server_ids"),
        _list("knowledge_base_ids"),
        _string("connector_device_id", 80),
        _text("connector_workspace_path"),
        _string("cloud_sandbox_id", 80),
        _string("connector_approval_mode", 16, "manual"),
        _list("connector_command_prefixes"),
        _string("model_name", 100),
        _number("user_channel_id"),
        _number("max_tokens"),
        sa.Column("temperature", JSON(), nullable=True),
        _string("reasoning_effort", 16),
        _flag("auto_compress_context", False),
        _list("disabled_tool_groups"),
        _string("folder_id", 80),
        sa.Column("metadata", JSON(), server_default="{}", nullable=False),
        _flag("internal", False),
        *_timestamps(),
        sa.ForeignKeyConstraint(["user_id"], ["users.id"], ondelete="CASCADE",
                                name=op.f("fk_assistant_sessions_user_id_users")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_assistant_sessions")),
    )
    op.create_index("ix_assistant_sessions_user", "assistant_sessions",
                    ["user_id", "updated_at"])
    op.create_table(
        "assistant_messages",
        sa.Column("session_id", sa.String(length=80), nullable=False),
        sa.Column("id", sa.String(length=80), nullable=False),
        sa.Column("position", sa.Integer(), nullable=False),
        sa.Column("role", sa.String(length=16), nullable=False),
        _text("content"),
        _list("content_parts"),
        _list("tool_calls"),
        *_timestamps(),
        sa.ForeignKeyConstraint(["session_id"], ["assistant_sessions.id"], ondelete="CASCADE",
                                name=op.f("fk_assistant_messages_session_id_assistant_sessions")),
        sa.PrimaryKeyConstraint("session_id", "id", name=op.f("pk_assistant_messages")),
    )
    op.create_index("ix_assistant_messages_position", "assistant_messages",
                    ["session_id", "position"])
    op.create_table(
        "assistant_runs",
        sa.Column("id", sa.String(length=32), nullable=False),
        sa.Column("user_id", sa.Integer(), nullable=False),
        sa.Column("session_id", sa.String(length=80), nullable=False),
        sa.Column("assistant_message_id", sa.String(length=80), nullable=False),
        sa.Column("mode", sa.String(length=16), nullable=False),
        _string("status", 16, "queued"),
        _string("status_message", 64),
        _number("current_round"),
        _text("error_message"),
        sa.Column("cost_nanos", sa.BigInteger(), server_default=sa.text("0"), nullable=False),
        _number("tool_calls"),
        _list("tool_call_details"),
        sa.Column("request", JSON(), server_default="{}", nullable=False),
        _string("node_name", 100),
        sa.Column("lease_expires_at", UTC(), nullable=True),
        sa.Column("deadline_at", UTC(), nullable=True),
        sa.Column("started_at", UTC(), nullable=True),
        sa.Column("finished_at", UTC(), nullable=True),
        *_timestamps(),
        sa.ForeignKeyConstraint(["user_id"], ["users.id"], ondelete="CASCADE",
                                name=op.f("fk_assistant_runs_user_id_users")),
        sa.ForeignKeyConstraint(["session_id"], ["assistant_sessions.id"], ondelete="CASCADE",
                                name=op.f("fk_assistant_runs_session_id_assistant_sessions")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_assistant_runs")),
    )
    op.create_index("ix_assistant_runs_session", "assistant_runs", ["session_id", "status"])
    op.create_index("ix_assistant_runs_user", "assistant_runs", ["user_id", "status"])
    op.create_table(
        "assistant_run_events",
        sa.Column("id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
                  autoincrement=True, nullable=False),
        sa.Column("run_id", sa.String(length=32), nullable=False),
        sa.Column("session_id", sa.String(length=80), nullable=False),
        sa.Column("seq", sa.Integer(), nullable=False),
        sa.Column("event", sa.String(length=32), nullable=False),
        sa.Column("payload", JSON(), server_default="{}", nullable=False),
        sa.Column("created_at", UTC(), nullable=False),
        sa.ForeignKeyConstraint(["run_id"], ["assistant_runs.id"], ondelete="CASCADE",
                                name=op.f("fk_assistant_run_events_run_id_assistant_runs")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_assistant_run_events")),
        sa.UniqueConstraint("run_id", "seq", name="uq_assistant_run_events_run_seq"),
    )


def downgrade() -> None:
    op.drop_table("assistant_run_events")
    op.drop_index("ix_assistant_runs_user", table_name="assistant_runs")
    op.drop_index("ix_assistant_runs_session", table_name="assistant_runs")
    op.drop_table("assistant_runs")
    op.drop_index("ix_assistant_messages_position", table_name="assistant_messages")
    op.drop_table("assistant_messages")
    op.drop_index("ix_assistant_sessions_user", table_name="assistant_sessions")
    op.drop_table("assistant_sessions")
    op.drop_table("assistant_skills")
    op.drop_table("assistant_agents")
    op.drop_table("assistant_user_settings")
