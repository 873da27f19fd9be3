"""Agent links: connector devices, connector tasks, sandbox hosts, cloud sandboxes and their
charges (agents contract §1.13, §2, §3).

Revision ID: 0004
Revises: 0003
"""

import sqlalchemy as sa
from alembic import op

import gateway.store.types

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def _timestamps() -> list[sa.Column]:
    return [
        sa.Column("created_at", gateway.store.types.UTCDateTime(), nullable=False),
        sa.Column("updated_at", gateway.store.types.UTCDateTime(), nullable=False),
    ]


def upgrade() -> None:
    op.create_table(
        "connector_devices",
        sa.Column("id", sa.String(length=32), nullable=False),
        sa.Column("user_id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=120), nullable=False),
        sa.Column("remark", sa.String(length=200), server_default="", nullable=False),
        sa.Column("token_hash", sa.String(length=64), nullable=False),
        sa.Column("hostname", sa.String(length=120), server_default="", nullable=False),
        sa.Column("os", sa.String(length=40), server_default="", nullable=False),
        sa.Column("arch", sa.String(length=40), server_default="", nullable=False),
        sa.Column("version", sa.String(length=80), server_default="", nullable=False),
        sa.Column("kind", sa.String(length=16), server_default="cli", nullable=False),
        sa.Column("desktop_instance_id", sa.String(length=120), server_default="",
                  nullable=False),
        sa.Column("mode", sa.String(length=16), server_default="platform", nullable=False),
        sa.Column("listen_port", sa.Integer(), server_default=sa.text("0"), nullable=False),
        sa.Column("hidden", sa.Boolean(), server_default=sa.text("false"), nullable=False),
        sa.Column("status", sa.String(length=16), server_default="offline", nullable=False),
        sa.Column("last_seen_at", gateway.store.types.UTCDateTime(), nullable=True),
        sa.Column("link_id", sa.String(length=96), nullable=True),
        sa.Column("max_parallel", sa.Integer(), server_default=sa.text("1"), nullable=False),
        sa.Column("capabilities", gateway.store.types.JSONText(), nullable=True),
        *_timestamps(),
        sa.ForeignKeyConstraint(["user_id"], ["users.id"],
                                name=op.f("fk_connector_devices_user_id_users"),
                                ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_connector_devices")),
        sa.UniqueConstraint("token_hash", name=op.f("uq_connector_devices_token_hash")),
    )
    op.create_index("ix_connector_devices_user", "connector_devices",
                    ["user_id", "last_seen_at"], unique=False)

    op.create_table(
        "connector_tasks",
        sa.Column("id", sa.String(length=32), nullable=False),
        sa.Column("user_id", sa.Integer(), nullable=False),
        sa.Column("device_id", sa.String(length=32), nullable=False),
        sa.Column("run_id", sa.String(length=32), server_default="", nullable=False),
        sa.Column("tool_call_id", sa.String(length=128), server_default="", nullable=False),
        sa.Column("action", sa.String(length=64), nullable=False),
        sa.Column("workspace_path", sa.Text(), server_default="", nullable=False),
        sa.Column("payload", gateway.store.types.JSONText(), nullable=False),
        sa.Column("cloud_sandbox_id", sa.String(length=32), server_default="", nullable=False),
        sa.Column("status", sa.String(length=24), nullable=False),
        sa.Column("result", sa.Text(), server_default="", nullable=False),
        sa.Column("output", gateway.store.types.JSONText(), nullable=True),
        sa.Column("error_message", sa.Text(), server_default="", nullable=False),
        sa.Column("claimed_by", sa.String(length=96), nullable=True),
        sa.Column("started_at", gateway.store.types.UTCDateTime(), nullable=True),
        sa.Column("finished_at", gateway.store.types.UTCDateTime(), nullable=True),
        *_timestamps(),
        sa.ForeignKeyConstraint(["device_id"], ["connector_devices.id"],
                                name=op.f("fk_connector_tasks_device_id_connector_devices"),
                                ondelete="CASCADE"),
        sa.ForeignKeyConstraint(["user_id"], ["users.id"],
                                name=op.f("fk_connector_tasks_user_id_users"),
                                ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_connector_tasks")),
    )
    op.create_index("ix_connector_tasks_queue", "connector_tasks",
                    ["device_id", "status", "created_at"], unique=False)
    op.create_index("ix_connector_tasks_run", "connector_tasks", ["run_id", "created_at"],
                    unique=False)
    op.create_index("ix_connector_tasks_claim", "connector_tasks", ["claimed_by", "status"],
                    unique=False)
    op.create_index("ix_connector_tasks_status", "connector_tasks", ["status", "created_at"],
                    unique=False)
    op.create_index("ix_connector_tasks_sandbox", "connector_tasks",
                    ["cloud_sandbox_id", "status"], unique=False)

    op.create_table(
        "sandbox_hosts",
        sa.Column("id", sa.String(length=32), nullable=False),
        sa.Column("name", sa.String(length=120), nullable=False),
        sa.Column("connector_device_id", sa.String(length=32), nullable=False),
        sa.Column("created_by", sa.Integer(), nullable=False),
        sa.Column("enabled", sa.Boolean(), server_default=sa.text("true"), nullable=False),
        sa.Column("security_policy", sa.Text(), server_default="", nullable=False),
        sa.Column("runtime_price_hour_nanos", sa.BigInteger(), server_default=sa.text("0"),
                  nullable=False),
        sa.Column("cpu_price_hour_nanos", sa.BigInteger(), server_default=sa.text("0"),
                  nullable=False),
        sa.Column("memory_price_gb_hour_nanos", sa.BigInteger(), server_default=sa.text("0"),
                  nullable=False),
        sa.Column("storage_price_gb_hour_nanos", sa.BigInteger(), server_default=sa.text("0"),
                  nullable=False),
        sa.Column("runtime_multiplier_nanos", sa.BigInteger(),
                  server_default=sa.text("1000000000"), nullable=False),
        sa.Column("reported_capacity", gateway.store.types.JSONText(), nullable=True),
        sa.Column("last_seen_at", gateway.store.types.UTCDateTime(), nullable=True),
        *_timestamps(),
        sa.ForeignKeyConstraint(["connector_device_id"], ["connector_devices.id"],
                                name=op.f("fk_sandbox_hosts_connector_device_id_connector_devices"),
                                ondelete="CASCADE"),
        sa.ForeignKeyConstraint(["created_by"], ["users.id"],
                                name=op.f("fk_sandbox_hosts_created_by_users"),
                                ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_sandbox_hosts")),
        sa.UniqueConstraint("connector_device_id",
                            name=op.f("uq_sandbox_hosts_connector_device_id")),
    )

    op.create_table(
        "cloud_sandboxes",
        sa.Column("id", sa.String(length=32), nullable=False),
        sa.Column("user_id", sa.Integer(), nullable=False),
        sa.Column("host_id", sa.String(length=32), nullable=False),
        sa.Column("name", sa.String(length=120), nullable=False),
        sa.Column("image", sa.String(length=255), nullable=False),
        sa.Column("cpu_cores_nanos", sa.BigInteger(), nullable=False),
        sa.Column("memory_mb", sa.Integer(), nullable=False),
        sa.Column("disk_gb", sa.Integer(), nullable=False),
        sa.Column("status", sa.String(length=16), server_default="ready", nullable=False),
        sa.Column("storage_charged_at", gateway.store.types.UTCDateTime(), nullable=True),
        sa.Column("deleted_at", gateway.store.types.UTCDateTime(), nullable=True),
        *_timestamps(),
        sa.ForeignKeyConstraint(["host_id"], ["sandbox_hosts.id"],
                                name=op.f("fk_cloud_sandboxes_host_id_sandbox_hosts"),
                                ondelete="CASCADE"),
        sa.ForeignKeyConstraint(["user_id"], ["users.id"],
                                name=op.f("fk_cloud_sandboxes_user_id_users"),
                                ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_cloud_sandboxes")),
    )
    op.create_index("ix_cloud_sandboxes_user", "cloud_sandboxes", ["user_id", "updated_at"],
                    unique=False)
    op.create_index("ix_cloud_sandboxes_host", "cloud_sandboxes", ["host_id", "status"],
                    unique=False)

    op.create_table(
        "sandbox_charges",
        sa.Column("id", sa.String(length=32), nullable=False),
        sa.Column("user_id", sa.Integer(), nullable=False),
        sa.Column("sandbox_id", sa.String(length=32), nullable=False),
        sa.Column("host_id", sa.String(length=32), nullable=False),
        sa.Column("kind", sa.String(length=16), nullable=False),
        sa.Column("reference", sa.String(length=200), nullable=False),
        sa.Column("quantity", sa.String(length=64), nullable=False),
        sa.Column("cost_nanos", sa.BigInteger(), nullable=False),
        sa.Column("rate_snapshot", sa.Text(), nullable=False),
        sa.Column("created_at", gateway.store.types.UTCDateTime(), nullable=False),
        sa.ForeignKeyConstraint(["sandbox_id"], ["cloud_sandboxes.id"],
                                name=op.f("fk_sandbox_charges_sandbox_id_cloud_sandboxes"),
                                ondelete="CASCADE"),
        sa.ForeignKeyConstraint(["user_id"], ["users.id"],
                                name=op.f("fk_sandbox_charges_user_id_users"),
                                ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_sandbox_charges")),
        sa.UniqueConstraint("reference", name=op.f("uq_sandbox_charges_reference")),
    )
    op.create_index("ix_sandbox_charges_sandbox", "sandbox_charges",
                    ["sandbox_id", "created_at"], unique=False)


def downgrade() -> None:
    op.drop_table("sandbox_charges")
    op.drop_table("cloud_sandboxes")
    op.drop_table("sandbox_hosts")
    op.drop_table("connector_tasks")
    op.drop_table("connector_devices")
