"""The JSON form of a sandbox host (agents contract §3.1, §3.4): prices as decimal strings,
the policy as JSON text, the computed ``online`` ([P-41]) and ``available_range`` ([P-24]).

``admin`` adds what only the host's administrator sees (its hidden device id).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

import orjson

from console.services.sandboxes.views import rfc3339
from gateway.billing.money import format_nanos
from gateway.sandboxes.host_policy import available_range, parse_policy
from gateway.sandboxes.host_state import host_online
from gateway.store.devices import DeviceRow
from gateway.store.sandbox_hosts import HostRow

#: the host's price fields and the nano-unit columns that hold them
PRICE_FIELDS = {
    "runtime_price_hour": "runtime_price_hour_nanos",
    "cpu_price_hour": "cpu_price_hour_nanos",
    "memory_price_gb_hour": "memory_price_gb_hour_nanos",
    "storage_price_gb_hour": "storage_price_gb_hour_nanos",
}


def host_view(host: HostRow, device: DeviceRow, now: datetime, *,
              admin: bool = False) -> dict[str, Any]:
    policy = parse_policy(host.security_policy)
    view: dict[str, Any] = {
        "id": host.id, "name": host.name, "enabled": host.enabled,
        "security_policy": orjson.dumps(policy).decode(),
        **{field: format_nanos(getattr(host, column)) for field, column in PRICE_FIELDS.items()},
        "runtime_multiplier": format_nanos(host.runtime_multiplier_nanos),
        "online": host_online(device, now),
        "reported_capacity": host.reported_capacity,
        "available_range": available_range(policy, host.reported_capacity).as_json(),
        "created_at": rfc3339(host.created_at), "updated_at": rfc3339(host.updated_at),
    }
    if host.last_seen_at is not None:
        view["last_seen_at"] = rfc3339(host.last_seen_at)
    if admin:
        view["connector_device_id"] = host.connector_device_id
    return view
