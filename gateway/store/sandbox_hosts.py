"""Queries on sandbox hosts (agents contract §3.1 to §3.3).

A host row points at its hidden connector device (``mode=sandboxd``, owned by the creating
admin); the token and the link live on that device.  A host's online state is its device's
([P-41]), so the queries here return the device row alongside the host.  Prices are integer
nano-units per hour (§3.6 reads them at settlement time).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import select, update
from sqlalchemy.engine import Connection, RowMapping

from gateway.store import schema
from gateway.store.devices import DeviceRow

#: host columns an admin may change (``PUT``)
EDITABLE = frozenset({
    "name", "enabled", "security_policy", "runtime_price_hour_nanos", "cpu_price_hour_nanos",
    "memory_price_gb_hour_nanos", "storage_price_gb_hour_nanos", "runtime_multiplier_nanos",
})


@dataclass(frozen=True)
class HostRow:
    """One ``sandbox_hosts`` row."""

    id: str
    name: str
    connector_device_id: str
    created_by: int
    enabled: bool
    security_policy: str
    runtime_price_hour_nanos: int
    cpu_price_hour_nanos: int
    memory_price_gb_hour_nanos: int
    storage_price_gb_hour_nanos: int
    runtime_multiplier_nanos: int
    reported_capacity: dict[str, Any] | None
    last_seen_at: datetime | None
    created_at: datetime
    updated_at: datetime

    @classmethod
    def from_row(cls, row: RowMapping) -> HostRow:
        return cls(**{name: row[name] for name in cls.__dataclass_fields__})


def _with_devices(conn: Connection, *where: Any, order: Any = None) -> list[
        tuple[HostRow, DeviceRow]]:
    h = schema.sandbox_hosts
    d = schema.connector_devices
    query = select(h, *[column.label(f"device_{column.name}") for column in d.c]).join(
        d, d.c.id == h.c.connector_device_id).where(*where)
    if order is not None:
        query = query.order_by(*order)
    pairs = []
    for row in conn.execute(query).mappings().all():
        device = {name: row[f"device_{name}"] for name in DeviceRow.__dataclass_fields__}
        pairs.append((HostRow.from_row(row), DeviceRow(**device)))
    return pairs


def get(conn: Connection, host_id: str) -> tuple[HostRow, DeviceRow] | None:
    found = _with_devices(conn, schema.sandbox_hosts.c.id == host_id)
    return found[0] if found else None


def get_by_device(conn: Connection, device_id: str) -> HostRow | None:
    h = schema.sandbox_hosts
    row = conn.execute(select(h).where(h.c.connector_device_id == device_id)).mappings().first()
    return HostRow.from_row(row) if row else None


def list_all(conn: Connection) -> list[tuple[HostRow, DeviceRow]]:
    """Every host, newest first (admin)."""
    h = schema.sandbox_hosts
    return _with_devices(conn, order=(h.c.created_at.desc(), h.c.id.desc()))


def list_enabled(conn: Connection) -> list[tuple[HostRow, DeviceRow]]:
    """Enabled hosts sorted by name (what users may choose from)."""
    h = schema.sandbox_hosts
    return _with_devices(conn, h.c.enabled.is_(True), order=(h.c.name, h.c.id))


def create(conn: Connection, *, host_id: str, device_id: str, name: str, created_by: int,
           enabled: bool, security_policy: str, prices: dict[str, int],
           now: datetime) -> HostRow:
    conn.execute(schema.sandbox_hosts.insert().values(
        id=host_id, name=name, connector_device_id=device_id, created_by=created_by,
        enabled=enabled, security_policy=security_policy, created_at=now, updated_at=now,
        **prices,
    ))
    row = get_by_device(conn, device_id)
    assert row is not None
    return row


def update_fields(conn: Connection, host_id: str, changes: dict[str, Any],
                  now: datetime) -> None:
    unknown = set(changes) - EDITABLE
    if unknown:
        raise ValueError(f"not editable: {sorted(unknown)}")
    h = schema.sandbox_hosts
    conn.execute(update(h).where(h.c.id == host_id).values(**changes, updated_at=now))
    if "name" in changes:
        d = schema.connector_devices
        conn.execute(update(d).where(
            d.c.id == select(h.c.connector_device_id).where(h.c.id == host_id)
            .scalar_subquery()).values(name=changes["name"], updated_at=now))


def record_capacity(conn: Connection, device_id: str, capacity: dict[str, Any],
                    now: datetime) -> None:
    """``hello.capacity`` of a host's device becomes the host's ``reported_capacity``."""
    h = schema.sandbox_hosts
    conn.execute(update(h).where(h.c.connector_device_id == device_id).values(
        reported_capacity=capacity, updated_at=now))
