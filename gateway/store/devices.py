"""Queries on connector devices (agents contract §2): the user's devices and hidden host devices.

A device is found either by ``(id, user)`` -- a foreign id looks exactly like a missing one --
or by the sha256 of its token (the plaintext is never stored).  Hidden devices (sandbox-host
devices, [P-16]) are invisible to every user-facing query.  The live WebSocket link is recorded
as ``link_id`` so that a closing connection only marks the device offline when it is still the
connection of record (a superseded link closing late changes nothing).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import delete, select, update
from sqlalchemy.engine import Connection, RowMapping

from gateway.store import schema

ONLINE = "online"
OFFLINE = "offline"
#: a device is online iff status is online and it was seen within this window (§2.5)
ONLINE_WINDOW = timedelta(seconds=60)
USER_MODES = frozenset({"platform", "web_server"})
SANDBOXD = "sandboxd"


@dataclass(frozen=True)
class DeviceRow:
    """One ``connector_devices`` row."""

    id: str
    user_id: int
    name: str
    remark: str
    token_hash: str
    hostname: str
    os: str
    arch: str
    version: str
    kind: str
    desktop_instance_id: str
    mode: str
    listen_port: int
    hidden: bool
    status: str
    last_seen_at: datetime | None
    link_id: str | None
    max_parallel: int
    capabilities: list[str] | None
    created_at: datetime
    updated_at: datetime

    @classmethod
    def from_row(cls, row: RowMapping) -> DeviceRow:
        return cls(**{name: row[name] for name in cls.__dataclass_fields__})

    def online_at(self, now: datetime) -> bool:
        """The computed online rule of §2.5."""
        return (self.status == ONLINE and self.last_seen_at is not None
                and now - self.last_seen_at <= ONLINE_WINDOW)


def _one(conn: Connection, *where: Any) -> DeviceRow | None:
    row = conn.execute(select(schema.connector_devices).where(*where)).mappings().first()
    return DeviceRow.from_row(row) if row else None


def get(conn: Connection, device_id: str) -> DeviceRow | None:
    """Any device by id (hidden ones included): for links and host bookkeeping."""
    return _one(conn, schema.connector_devices.c.id == device_id)


def get_for_user(conn: Connection, user_id: int, device_id: str) -> DeviceRow | None:
    d = schema.connector_devices
    return _one(conn, d.c.id == device_id, d.c.user_id == user_id, d.c.hidden.is_(False))


def find_by_token_hash(conn: Connection, token_hash: str) -> DeviceRow | None:
    return _one(conn, schema.connector_devices.c.token_hash == token_hash)


def list_for_user(conn: Connection, user_id: int) -> list[DeviceRow]:
    """The user's visible devices, last seen first, then newest."""
    d = schema.connector_devices
    rows = conn.execute(
        select(d).where(d.c.user_id == user_id, d.c.hidden.is_(False)).order_by(
            d.c.last_seen_at.desc().nulls_last(), d.c.created_at.desc(), d.c.id.desc())
    ).mappings().all()
    return [DeviceRow.from_row(row) for row in rows]


def create(conn: Connection, *, device_id: str, user_id: int, name: str, remark: str,
           mode: str, listen_port: int, token_hash: str, hidden: bool,
           now: datetime) -> DeviceRow:
    conn.execute(schema.connector_devices.insert().values(
        id=device_id, user_id=user_id, name=name, remark=remark, token_hash=token_hash,
        mode=mode, listen_port=listen_port, hidden=hidden, status=OFFLINE,
        created_at=now, updated_at=now,
    ))
    row = get(conn, device_id)
    assert row is not None
    return row


def rename(conn: Connection, device_id: str, name: str, remark: str | None,
           now: datetime) -> None:
    values: dict[str, Any] = {"name": name, "updated_at": now}
    if remark is not None:
        values["remark"] = remark
    d = schema.connector_devices
    conn.execute(update(d).where(d.c.id == device_id).values(**values))


def set_token(conn: Connection, device_id: str, token_hash: str, now: datetime) -> str | None:
    """Replace the token; returns the link id that was live (it must now be closed)."""
    d = schema.connector_devices
    current = get(conn, device_id)
    if current is None:
        return None
    conn.execute(update(d).where(d.c.id == device_id).values(
        token_hash=token_hash, updated_at=now))
    return current.link_id


def remove(conn: Connection, device_id: str) -> None:
    """Delete the device and all its connector tasks."""
    conn.execute(delete(schema.connector_tasks).where(
        schema.connector_tasks.c.device_id == device_id))
    conn.execute(delete(schema.connector_devices).where(
        schema.connector_devices.c.id == device_id))


def report(conn: Connection, device: DeviceRow, hello: dict[str, Any], now: datetime,
           *, link_id: str | None = None, max_parallel: int | None = None) -> DeviceRow:
    """Apply register/heartbeat/hello fields (already validated) and mark the device online.

    ``mode`` is advisory ([P-20]): a user device may switch between ``platform`` and
    ``web_server`` only; a host device stays ``sandboxd``.
    """
    values: dict[str, Any] = {"status": ONLINE, "last_seen_at": now, "updated_at": now}
    for name in ("hostname", "os", "arch", "version", "kind", "desktop_instance_id"):
        if name in hello:
            values[name] = hello[name]
    if hello.get("name"):
        values["name"] = hello["name"]
    mode = hello.get("mode")
    if device.mode != SANDBOXD and mode in USER_MODES:
        values["mode"] = mode
    if "listen_port" in hello and device.mode != SANDBOXD:
        values["listen_port"] = hello["listen_port"]
    if "capabilities" in hello:
        values["capabilities"] = hello["capabilities"]
    if link_id is not None:
        values["link_id"] = link_id
    if max_parallel is not None:
        values["max_parallel"] = max_parallel
    d = schema.connector_devices
    conn.execute(update(d).where(d.c.id == device.id).values(**values))
    _copy_seen_to_host(conn, device.id, now)
    row = get(conn, device.id)
    assert row is not None
    return row


def touch(conn: Connection, device_id: str, now: datetime, link_id: str | None = None) -> bool:
    """Refresh ``last_seen_at`` (any frame does); with ``link_id`` only while that link is live."""
    d = schema.connector_devices
    query = update(d).where(d.c.id == device_id)
    if link_id is not None:
        query = query.where(d.c.link_id == link_id)
    changed = conn.execute(query.values(status=ONLINE, last_seen_at=now)).rowcount
    if changed:
        _copy_seen_to_host(conn, device_id, now)
    return bool(changed)


def touch_links(conn: Connection, links: list[tuple[str, str]], now: datetime) -> None:
    """Refresh every live link of a node at once (``(device id, link id)`` pairs): a link
    whose socket is open and answers pings keeps its device online."""
    d = schema.connector_devices
    h = schema.sandbox_hosts
    for start in range(0, len(links), 500):
        chunk = links[start:start + 500]
        conn.execute(update(d).where(d.c.link_id.in_([link for _, link in chunk])).values(
            status=ONLINE, last_seen_at=now))
        conn.execute(update(h).where(
            h.c.connector_device_id.in_([device for device, _ in chunk])).values(
            last_seen_at=now))


def release_link(conn: Connection, device_id: str, link_id: str, now: datetime) -> bool:
    """The link closed: offline at once, unless another link has taken over already."""
    d = schema.connector_devices
    changed = conn.execute(update(d).where(d.c.id == device_id, d.c.link_id == link_id).values(
        status=OFFLINE, link_id=None, updated_at=now)).rowcount
    return bool(changed)


def _copy_seen_to_host(conn: Connection, device_id: str, now: datetime) -> None:
    h = schema.sandbox_hosts
    conn.execute(update(h).where(h.c.connector_device_id == device_id).values(last_seen_at=now))
