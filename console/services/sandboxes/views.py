"""The JSON shapes of cloud sandboxes and their charges (agents contract §0, §3.4, §3.6).

Decimals (cores, costs) are minimal decimal strings; timestamps are RFC 3339 with fractional
seconds and an offset, and an unset optional one (``storage_charged_at``) is omitted.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from gateway.billing.money import format_nanos
from gateway.store.cloud_sandboxes import SandboxRow
from gateway.store.sandbox_charges import ChargeRow


def rfc3339(moment: datetime) -> str:
    return f"{moment:%Y-%m-%dT%H:%M:%S}.{moment.microsecond:06d}Z"


def sandbox_view(row: SandboxRow) -> dict[str, Any]:
    view: dict[str, Any] = {
        "id": row.id, "user_id": row.user_id, "host_id": row.host_id, "name": row.name,
        "image": row.image, "cpu_cores": format_nanos(row.cpu_cores_nanos),
        "memory_mb": row.memory_mb, "disk_gb": row.disk_gb, "status": row.status,
        "created_at": rfc3339(row.created_at), "updated_at": rfc3339(row.updated_at),
    }
    if row.storage_charged_at is not None:
        view["storage_charged_at"] = rfc3339(row.storage_charged_at)
    return view


def charge_view(row: ChargeRow) -> dict[str, Any]:
    return {
        "id": row.id, "user_id": row.user_id, "sandbox_id": row.sandbox_id,
        "host_id": row.host_id, "kind": row.kind, "reference": row.reference,
        "quantity": row.quantity, "cost": format_nanos(row.cost_nanos),
        "rate_snapshot": row.rate_snapshot, "created_at": rfc3339(row.created_at),
    }
