"""The JSON shape of a sandbox host (agents contract §3.1, [P-24], [P-41]): prices as decimal
strings, the policy as JSON text, online from the host's device."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from gateway.billing.money import format_nanos
from gateway.links.host_range import available_range
from gateway.links.views import rfc3339
from gateway.store.devices import DeviceRow
from gateway.store.sandbox_hosts import HostRow

PRICE_FIELDS = {
    "runtime_price_hour": "runtime_price_hour_nanos",
    "cpu_price_hour": "cpu_price_hour_nanos",
    "memory_price_gb_hour": "memory_price_gb_hour_nanos",
    "storage_price_gb_hour": "storage_price_gb_hour_nanos",
}


def host_view(host: HostRow, device: DeviceRow, now: datetime) -> dict[str, Any]:
    view: dict[str, Any] = {
        "id": host.id, "name": host.name, "connector_device_id": host.connector_device_id,
        "enabled": host.enabled, "security_policy": host.security_policy,
    }
    for name, column in PRICE_FIELDS.items():
        view[name] = format_nanos(getattr(host, column))
    view["runtime_multiplier"] = format_nanos(host.runtime_multiplier_nanos)
    if host.last_seen_at is not None:
        view["last_seen_at"] = rfc3339(host.last_seen_at)
    view["online"] = device.online_at(now)
    view["reported_capacity"] = host.reported_capacity
    view["available_range"] = available_range(host.security_policy, host.reported_capacity)
    view["created_at"] = rfc3339(host.created_at)
    view["updated_at"] = rfc3339(host.updated_at)
    return view
