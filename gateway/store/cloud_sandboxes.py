"""Queries on cloud sandboxes (agents contract §3.4).

Every user-facing read is by ``(id, user)`` so a foreign id looks exactly like a missing one.
A deleted sandbox keeps its row (its charges point at it) with ``status = deleted``; user
listings and ``get_ready_for_user`` leave it out, ``get_owned`` (the charges route) does not.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import func, select, update
from sqlalchemy.engine import Connection, RowMapping

from gateway.store import schema
from gateway.store.subscriptions import spendable_quota

READY = "ready"
DELETED = "deleted"


@dataclass(frozen=True)
class SandboxRow:
    """One ``cloud_sandboxes`` row."""

    id: str
    user_id: int
    host_id: str
    name: str
    image: str
    cpu_cores_nanos: int
    memory_mb: int
    disk_gb: int
    status: str
    storage_charged_at: datetime | None
    deleted_at: datetime | None
    created_at: datetime
    updated_at: datetime

    @classmethod
    def from_row(cls, row: RowMapping) -> SandboxRow:
        return cls(**{name: row[name] for name in cls.__dataclass_fields__})

    @property
    def storage_since(self) -> datetime:
        """Storage is billed up to here already (creation when never billed)."""
        return self.storage_charged_at or self.created_at


def _one(conn: Connection, *where: Any) -> SandboxRow | None:
    row = conn.execute(select(schema.cloud_sandboxes).where(*where)).mappings().first()
    return SandboxRow.from_row(row) if row else None


def get(conn: Connection, sandbox_id: str) -> SandboxRow | None:
    return _one(conn, schema.cloud_sandboxes.c.id == sandbox_id)


def get_owned(conn: Connection, user_id: int, sandbox_id: str) -> SandboxRow | None:
    """The user's sandbox whatever its status (deleted ones too)."""
    s = schema.cloud_sandboxes
    return _one(conn, s.c.id == sandbox_id, s.c.user_id == user_id)


def get_ready_for_user(conn: Connection, user_id: int, sandbox_id: str) -> SandboxRow | None:
    """The user's sandbox unless it was deleted."""
    s = schema.cloud_sandboxes
    return _one(conn, s.c.id == sandbox_id, s.c.user_id == user_id, s.c.status != DELETED)


def list_for_user(conn: Connection, user_id: int) -> list[SandboxRow]:
    """The user's sandboxes except deleted ones, most recently updated first."""
    s = schema.cloud_sandboxes
    rows = conn.execute(select(s).where(s.c.user_id == user_id, s.c.status != DELETED).order_by(
        s.c.updated_at.desc(), s.c.id.desc())).mappings().all()
    return [SandboxRow.from_row(row) for row in rows]


def create(conn: Connection, *, sandbox_id: str, user_id: int, host_id: str, name: str,
           image: str, cpu_cores_nanos: int, memory_mb: int, disk_gb: int,
           now: datetime) -> SandboxRow:
    conn.execute(schema.cloud_sandboxes.insert().values(
        id=sandbox_id, user_id=user_id, host_id=host_id, name=name, image=image,
        cpu_cores_nanos=cpu_cores_nanos, memory_mb=memory_mb, disk_gb=disk_gb, status=READY,
        created_at=now, updated_at=now))
    row = get(conn, sandbox_id)
    assert row is not None
    return row


def mark_deleted(conn: Connection, sandbox_id: str, now: datetime) -> bool:
    """``ready -> deleted``; false when it was deleted already (by a concurrent request)."""
    s = schema.cloud_sandboxes
    return bool(conn.execute(update(s).where(s.c.id == sandbox_id, s.c.status == READY).values(
        status=DELETED, deleted_at=now, updated_at=now)).rowcount)


def advance_storage(conn: Connection, sandbox: SandboxRow, until: datetime) -> bool:
    """Move ``storage_charged_at`` from what ``sandbox`` read to ``until``; false when another
    settlement moved it first (its interval must then not be billed again)."""
    s = schema.cloud_sandboxes
    was = (s.c.storage_charged_at.is_(None) if sandbox.storage_charged_at is None
           else s.c.storage_charged_at == sandbox.storage_charged_at)
    return bool(conn.execute(update(s).where(s.c.id == sandbox.id, was).values(
        storage_charged_at=until)).rowcount)


def storage_due(conn: Connection, before: datetime, limit: int = 500) -> list[str]:
    """Ready sandboxes on a host that prices storage, not billed since ``before`` (oldest
    first): what the periodic storage job settles."""
    s, h = schema.cloud_sandboxes, schema.sandbox_hosts
    since = func.coalesce(s.c.storage_charged_at, s.c.created_at)
    return list(conn.execute(
        select(s.c.id).join(h, h.c.id == s.c.host_id)
        .where(s.c.status == READY, h.c.storage_price_gb_hour_nanos > 0, since <= before)
        .order_by(since, s.c.id).limit(limit)).scalars().all())


def has_spendable_credit(conn: Connection, user_id: int, now: datetime) -> bool:
    """A positive wallet balance or a subscription quota usable now (the §3.5 gate)."""
    u = schema.users
    balance = conn.execute(select(u.c.balance_nanos).where(u.c.id == user_id)).scalar()
    return (balance is not None and int(balance) > 0) or spendable_quota(conn, user_id, now) > 0
