"""Tables of agent links: connector devices, their tasks, sandbox hosts, cloud sandboxes
and their charges (agents contract §1.13, §2, §3).

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
    text,
)

from gateway.store.schema import FALSE, TRUE, ZERO, _timestamps, metadata
from gateway.store.types import JSONText, UTCDateTime

# --- agent links: connector devices, their tasks, sandbox hosts (agents contract §1.13, §2, §3)

connector_devices = Table(
    "connector_devices", metadata,
    # "acd-…" (contract §0.1)
    Column("id", String(32), primary_key=True),
    Column("user_id", Integer, ForeignKey("users.id", ondelete="CASCADE"), nullable=False),
    Column("name", String(120), nullable=False),
    Column("remark", String(200), nullable=False, server_default=""),
    # sha256 hex of the trimmed token; the plaintext is never stored
    Column("token_hash", String(64), nullable=False, unique=True),
    Column("hostname", String(120), nullable=False, server_default=""),
    Column("os", String(40), nullable=False, server_default=""),
    Column("arch", String(40), nullable=False, server_default=""),
    Column("version", String(80), nullable=False, server_default=""),
    # cli | desktop
    Column("kind", String(16), nullable=False, server_default="cli"),
    Column("desktop_instance_id", String(120), nullable=False, server_default=""),
    # platform | web_server | sandboxd (sandboxd only for host devices, [P-20])
    Column("mode", String(16), nullable=False, server_default="platform"),
    Column("listen_port", Integer, nullable=False, server_default=ZERO),
    # host devices are hidden from device listings ([P-16])
    Column("hidden", Boolean, nullable=False, server_default=FALSE),
    # online | offline as last written; the online rule (§2.5) is computed on read
    Column("status", String(16), nullable=False, server_default="offline"),
    Column("last_seen_at", UTCDateTime, nullable=True),
    # the live WebSocket link holding the device ("<node>/<connection>"), None when none
    Column("link_id", String(96), nullable=True),
    Column("max_parallel", Integer, nullable=False, server_default=text("1")),
    Column("capabilities", JSONText, nullable=True),
    *_timestamps(),
)
Index("ix_connector_devices_user", connector_devices.c.user_id, connector_devices.c.last_seen_at)

connector_tasks = Table(
    "connector_tasks", metadata,
    # "act-…"
    Column("id", String(32), primary_key=True),
    # the owner (for sandbox tasks the sandbox owner, not the host admin)
    Column("user_id", Integer, ForeignKey("users.id", ondelete="CASCADE"), nullable=False),
    Column("device_id", String(32), ForeignKey("connector_devices.id", ondelete="CASCADE"),
           nullable=False),
    # empty for management / terminal / cleanup tasks
    Column("run_id", String(32), nullable=False, server_default=""),
    Column("tool_call_id", String(128), nullable=False, server_default=""),
    Column("action", String(64), nullable=False),
    # empty = unrestricted
    Column("workspace_path", Text, nullable=False, server_default=""),
    # the arguments object (input)
    Column("payload", JSONText, nullable=False),
    # the sandbox this task works in (also in the payload); empty for device tasks
    Column("cloud_sandbox_id", String(32), nullable=False, server_default=""),
    # pending_approval | queued | running | completed | failed
    Column("status", String(24), nullable=False),
    # normalized result text (§1.13) and the device's raw result fields (output)
    Column("result", Text, nullable=False, server_default=""),
    Column("output", JSONText, nullable=True),
    Column("error_message", Text, nullable=False, server_default=""),
    # who claimed it: "http" (long-poll) or the link id of the WebSocket that carried it
    Column("claimed_by", String(96), nullable=True),
    Column("started_at", UTCDateTime, nullable=True),
    Column("finished_at", UTCDateTime, nullable=True),
    *_timestamps(),
)
Index("ix_connector_tasks_queue", connector_tasks.c.device_id, connector_tasks.c.status,
      connector_tasks.c.created_at)
Index("ix_connector_tasks_run", connector_tasks.c.run_id, connector_tasks.c.created_at)
Index("ix_connector_tasks_claim", connector_tasks.c.claimed_by, connector_tasks.c.status)
Index("ix_connector_tasks_status", connector_tasks.c.status, connector_tasks.c.created_at)
Index("ix_connector_tasks_sandbox", connector_tasks.c.cloud_sandbox_id,
      connector_tasks.c.status)

sandbox_hosts = Table(
    "sandbox_hosts", metadata,
    # "ash-…"
    Column("id", String(32), primary_key=True),
    Column("name", String(120), nullable=False),
    Column("connector_device_id", String(32),
           ForeignKey("connector_devices.id", ondelete="CASCADE"), nullable=False, unique=True),
    # the admin who created it (owner of the hidden device)
    Column("created_by", Integer, ForeignKey("users.id", ondelete="CASCADE"), nullable=False),
    Column("enabled", Boolean, nullable=False, server_default=TRUE),
    # JSON text of an object (§3.2), kept as the admin sent it
    Column("security_policy", Text, nullable=False, server_default=""),
    Column("runtime_price_hour_nanos", BigInteger, nullable=False, server_default=ZERO),
    Column("cpu_price_hour_nanos", BigInteger, nullable=False, server_default=ZERO),
    Column("memory_price_gb_hour_nanos", BigInteger, nullable=False, server_default=ZERO),
    Column("storage_price_gb_hour_nanos", BigInteger, nullable=False, server_default=ZERO),
    Column("runtime_multiplier_nanos", BigInteger, nullable=False,
           server_default=text("1000000000")),
    # hello.capacity {cpu_cores, memory_mb, disk_gb} as last reported ([P-24]); None until then
    Column("reported_capacity", JSONText, nullable=True),
    Column("last_seen_at", UTCDateTime, nullable=True),
    *_timestamps(),
)

cloud_sandboxes = Table(
    "cloud_sandboxes", metadata,
    # "acs-…"
    Column("id", String(32), primary_key=True),
    Column("user_id", Integer, ForeignKey("users.id", ondelete="CASCADE"), nullable=False),
    Column("host_id", String(32), ForeignKey("sandbox_hosts.id", ondelete="CASCADE"),
           nullable=False),
    Column("name", String(120), nullable=False),
    Column("image", String(255), nullable=False),
    # decimal cores in nano-units (0.25 core = 250000000)
    Column("cpu_cores_nanos", BigInteger, nullable=False),
    Column("memory_mb", Integer, nullable=False),
    Column("disk_gb", Integer, nullable=False),
    # ready | deleted
    Column("status", String(16), nullable=False, server_default="ready"),
    Column("storage_charged_at", UTCDateTime, nullable=True),
    Column("deleted_at", UTCDateTime, nullable=True),
    *_timestamps(),
)
Index("ix_cloud_sandboxes_user", cloud_sandboxes.c.user_id, cloud_sandboxes.c.updated_at)
Index("ix_cloud_sandboxes_host", cloud_sandboxes.c.host_id, cloud_sandboxes.c.status)

sandbox_charges = Table(
    "sandbox_charges", metadata,
    # "asc-…"
    Column("id", String(32), primary_key=True),
    Column("user_id", Integer, ForeignKey("users.id", ondelete="CASCADE"), nullable=False),
    Column("sandbox_id", String(32), ForeignKey("cloud_sandboxes.id", ondelete="CASCADE"),
           nullable=False),
    Column("host_id", String(32), nullable=False),
    # runtime | storage
    Column("kind", String(16), nullable=False),
    # "task:<task id>" or "storage:<sandbox id>:<time>": unique, so nothing is charged twice
    Column("reference", String(200), nullable=False, unique=True),
    # minutes (runtime) or hours (storage) as an exact decimal string
    Column("quantity", String(64), nullable=False),
    Column("cost_nanos", BigInteger, nullable=False),
    # JSON text of the rates used
    Column("rate_snapshot", Text, nullable=False),
    Column("created_at", UTCDateTime, nullable=False),
)
Index("ix_sandbox_charges_sandbox", sandbox_charges.c.sandbox_id, sandbox_charges.c.created_at)
