"""Queries on API keys (run inside a ``DBRunner`` transaction).

Every user-facing query is scoped by ``user_id`` so one user can never read or change another
user's key: a foreign id looks exactly like a missing one.  Usage counters (``spent_nanos`` and
the token/request counts) are written by settlement; here they are only read or reset.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import delete, select, update
from sqlalchemy.engine import Connection

from gateway.store import schema

MAX_USER_CHANNELS = 10
#: columns a user may change through the key routes
EDITABLE = frozenset({
    "name", "allowed_models", "allowed_user_channels", "allowed_ips", "quota_limit_nanos",
    "enabled",
})


class KeyInputError(Exception):
    """A key field refers to something that does not exist (checked in the write transaction)."""

    def __init__(self, message: str, field: str) -> None:
        super().__init__(message)
        self.message = message
        self.field = field


def check_user_channels(conn: Connection, ids: Sequence[int]) -> None:
    """Each id must be an existing, enabled user channel."""
    if not ids:
        return
    if len(ids) > MAX_USER_CHANNELS:
        raise KeyInputError("API key cannot be bound to more than 10 user channels",
                            "allowed_user_channels")
    uc = schema.user_channels
    found = set(conn.execute(
        select(uc.c.id).where(uc.c.id.in_(list(ids)), uc.c.enabled.is_(True))
    ).scalars())
    if any(channel_id not in found for channel_id in ids):
        raise KeyInputError("User channel not found or disabled", "allowed_user_channels")


def _one(conn: Connection, *where: Any, lock: bool = False) -> dict[str, Any] | None:
    query = select(schema.api_keys).where(*where)
    if lock:
        # concurrent writes to one key serialise (PostgreSQL); SQLite writers already do
        query = query.with_for_update()
    row = conn.execute(query).mappings().first()
    return dict(row) if row else None


def _locked(conn: Connection, user_id: int, key_id: int) -> dict[str, Any] | None:
    k = schema.api_keys
    return _one(conn, k.c.id == key_id, k.c.user_id == user_id, lock=True)


def list_for_user(conn: Connection, user_id: int) -> list[dict[str, Any]]:
    k = schema.api_keys
    rows = conn.execute(
        select(k).where(k.c.user_id == user_id).order_by(k.c.created_at.desc(), k.c.id.desc())
    ).mappings().all()
    return [dict(row) for row in rows]


def get_for_user(conn: Connection, user_id: int, key_id: int) -> dict[str, Any] | None:
    k = schema.api_keys
    return _one(conn, k.c.id == key_id, k.c.user_id == user_id)


def find_by_hash(conn: Connection, key_hash: str) -> dict[str, Any] | None:
    return _one(conn, schema.api_keys.c.key_hash == key_hash)


def create(conn: Connection, *, user_id: int, name: str, key_hash: str, key_prefix: str,
           allowed_models: list[str], allowed_user_channels: list[int], allowed_ips: list[str],
           quota_limit_nanos: int, enabled: bool, now: datetime) -> dict[str, Any]:
    check_user_channels(conn, allowed_user_channels)
    inserted = conn.execute(schema.api_keys.insert().values(
        user_id=user_id, name=name, key_hash=key_hash, key_prefix=key_prefix,
        allowed_models=allowed_models, allowed_user_channels=allowed_user_channels,
        allowed_ips=allowed_ips, quota_limit_nanos=quota_limit_nanos, spent_nanos=0,
        request_count=0, input_tokens=0, output_tokens=0, cached_input_tokens=0,
        enabled=enabled, last_used_at=None, usage_reset_at=None,
        created_at=now, updated_at=now,
    )).inserted_primary_key
    assert inserted is not None
    row = _one(conn, schema.api_keys.c.id == inserted[0])
    assert row is not None
    return row


def update_fields(conn: Connection, user_id: int, key_id: int, changes: dict[str, Any],
                  now: datetime) -> dict[str, Any] | None:
    """Apply whitelisted ``changes``; ``None`` when the key is not the user's."""
    unknown = set(changes) - EDITABLE
    if unknown:
        raise ValueError(f"not editable: {sorted(unknown)}")
    if _locked(conn, user_id, key_id) is None:
        return None
    if "allowed_user_channels" in changes:
        check_user_channels(conn, changes["allowed_user_channels"])
    k = schema.api_keys
    conn.execute(update(k).where(k.c.id == key_id).values(**changes, updated_at=now))
    return get_for_user(conn, user_id, key_id)


def rotate(conn: Connection, user_id: int, key_id: int, key_hash: str, key_prefix: str,
           now: datetime) -> tuple[str, dict[str, Any]] | None:
    """New secret; restrictions, quota and usage unchanged.  Returns (old hash, new row)."""
    current = _locked(conn, user_id, key_id)
    if current is None:
        return None
    k = schema.api_keys
    conn.execute(update(k).where(k.c.id == key_id).values(
        key_hash=key_hash, key_prefix=key_prefix, last_used_at=None, updated_at=now))
    row = get_for_user(conn, user_id, key_id)
    assert row is not None
    return current["key_hash"], row


def reset_usage(conn: Connection, user_id: int, key_id: int,
                now: datetime) -> dict[str, Any] | None:
    """Quota counting restarts now: the spent counter and usage counts go back to zero."""
    if _locked(conn, user_id, key_id) is None:
        return None
    k = schema.api_keys
    conn.execute(update(k).where(k.c.id == key_id).values(
        usage_reset_at=now, spent_nanos=0, request_count=0, input_tokens=0, output_tokens=0,
        cached_input_tokens=0, updated_at=now))
    return get_for_user(conn, user_id, key_id)


def remove(conn: Connection, user_id: int, key_id: int) -> str | None:
    """Delete the user's key; returns its hash, ``None`` when there was no such key."""
    current = _locked(conn, user_id, key_id)
    if current is None:
        return None
    k = schema.api_keys
    deleted = conn.execute(delete(k).where(k.c.id == key_id, k.c.user_id == user_id)).rowcount
    return str(current["key_hash"]) if deleted else None
