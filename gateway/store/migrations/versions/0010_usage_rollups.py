"""Usage rollups (issue 22): the usage log summed per hour per user and per model, and per hour
and per day per (user channel, channel), kept by the settlement batch; filled here from the rows already
logged.  Two indexes serve the log filters that pair a model with a user or a channel.

Revision ID: 0010
Revises: 0009
"""

import sqlalchemy as sa
from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None

MEASURES = ("requests", "input_tokens", "output_tokens", "cached_input_tokens", "cost_nanos")
#: whole hours since the Unix epoch of a naive-UTC ``created_at``, per dialect
HOUR = {
    "sqlite": "CAST(strftime('%s', created_at) AS INTEGER) / 3600",
    "postgresql": "CAST(floor(extract(epoch FROM created_at) / 3600) AS INTEGER)",
}
SUMS = ("count(*), coalesce(sum(input_tokens), 0), coalesce(sum(output_tokens), 0), "
        "coalesce(sum(cached_input_tokens), 0), coalesce(sum(cost_nanos), 0)")


def _measures() -> list[sa.Column]:
    return [sa.Column(name, sa.BigInteger(), server_default=sa.text("0"), nullable=False)
            for name in MEASURES]


def upgrade() -> None:
    op.create_table(
        "usage_rollup_user_hours",
        sa.Column("user_id", sa.Integer(), nullable=False),
        sa.Column("hour", sa.Integer(), nullable=False),
        *_measures(),
        sa.PrimaryKeyConstraint("user_id", "hour", name=op.f("pk_usage_rollup_user_hours")),
    )
    op.create_table(
        "usage_rollup_channel_hours",
        sa.Column("hour", sa.Integer(), nullable=False),
        sa.Column("user_channel_id", sa.Integer(), nullable=False),
        sa.Column("channel_id", sa.Integer(), nullable=False),
        *_measures(),
        sa.PrimaryKeyConstraint("hour", "user_channel_id", "channel_id",
                                name=op.f("pk_usage_rollup_channel_hours")),
    )
    op.create_table(
        "usage_rollup_channel_days",
        sa.Column("day", sa.Integer(), nullable=False),
        sa.Column("user_channel_id", sa.Integer(), nullable=False),
        sa.Column("channel_id", sa.Integer(), nullable=False),
        *_measures(),
        sa.PrimaryKeyConstraint("day", "user_channel_id", "channel_id",
                                name=op.f("pk_usage_rollup_channel_days")),
    )
    op.create_table(
        "usage_rollup_model_hours",
        sa.Column("model_name", sa.String(length=200), nullable=False),
        sa.Column("hour", sa.Integer(), nullable=False),
        *_measures(),
        sa.PrimaryKeyConstraint("model_name", "hour", name=op.f("pk_usage_rollup_model_hours")),
    )
    op.create_index("ix_usage_logs_user_model_time", "usage_logs",
                    ["user_id", "model_name", "created_at"])
    op.create_index("ix_usage_logs_channel_model_time", "usage_logs",
                    ["channel_id", "model_name", "created_at"])
    hour = HOUR[op.get_bind().dialect.name]
    columns = ", ".join(MEASURES)
    op.execute(
        f"INSERT INTO usage_rollup_user_hours (user_id, hour, {columns}) "
        f"SELECT user_id, {hour}, {SUMS} FROM usage_logs GROUP BY user_id, {hour}")
    op.execute(
        f"INSERT INTO usage_rollup_channel_hours (hour, user_channel_id, channel_id, {columns}) "
        f"SELECT {hour}, coalesce(user_channel_id, 0), coalesce(channel_id, 0), {SUMS} "
        f"FROM usage_logs GROUP BY {hour}, coalesce(user_channel_id, 0), coalesce(channel_id, 0)")
    op.execute(
        f"INSERT INTO usage_rollup_model_hours (model_name, hour, {columns}) "
        f"SELECT model_name, {hour}, {SUMS} FROM usage_logs GROUP BY model_name, {hour}")
    sums = ", ".join(f"sum({name})" for name in MEASURES)
    op.execute(
        f"INSERT INTO usage_rollup_channel_days (day, user_channel_id, channel_id, {columns}) "
        f"SELECT hour / 24, user_channel_id, channel_id, {sums} FROM usage_rollup_channel_hours "
        "GROUP BY hour / 24, user_channel_id, channel_id")


def downgrade() -> None:
    op.drop_index("ix_usage_logs_channel_model_time", table_name="usage_logs")
    op.drop_index("ix_usage_logs_user_model_time", table_name="usage_logs")
    op.drop_table("usage_rollup_model_hours")
    op.drop_table("usage_rollup_channel_days")
    op.drop_table("usage_rollup_channel_hours")
    op.drop_table("usage_rollup_user_hours")
