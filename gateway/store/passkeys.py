"""Stored WebAuthn credentials (contract §2.6, §4.10).

A credential id is unique across all users (a second registration is a conflict), and the
signature counter only ever moves forward: the update is conditional, so a cloned or replayed
authenticator response with an old counter changes nothing.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import delete, select, update
from sqlalchemy.engine import Connection
from sqlalchemy.exc import IntegrityError

from gateway.store import schema


class DuplicateCredential(Exception):
    """The credential id is already registered (to this or another account)."""


def list_for_user(conn: Connection, user_id: int) -> list[dict[str, Any]]:
    p = schema.passkeys
    rows = conn.execute(
        select(p).where(p.c.user_id == user_id).order_by(p.c.created_at.desc(), p.c.id.desc())
    ).mappings().all()
    return [dict(row) for row in rows]


def by_credential_id(conn: Connection, credential_id: str) -> dict[str, Any] | None:
    p = schema.passkeys
    row = conn.execute(select(p).where(p.c.credential_id == credential_id)).mappings().first()
    return dict(row) if row else None


def insert(conn: Connection, *, user_id: int, credential_id: str, public_key: str, name: str,
           sign_count: int, now: datetime) -> dict[str, Any]:
    p = schema.passkeys
    if by_credential_id(conn, credential_id) is not None:
        raise DuplicateCredential()
    nested = conn.begin_nested()
    try:
        inserted = conn.execute(p.insert().values(
            user_id=user_id, credential_id=credential_id, public_key=public_key, name=name,
            sign_count=sign_count, last_used_at=None, created_at=now, updated_at=now,
        )).inserted_primary_key
        nested.commit()
    except IntegrityError:
        nested.rollback()
        raise DuplicateCredential() from None
    assert inserted is not None
    return dict(conn.execute(select(p).where(p.c.id == inserted[0])).mappings().one())


def delete_for_user(conn: Connection, user_id: int, passkey_id: int) -> bool:
    p = schema.passkeys
    result = conn.execute(delete(p).where(p.c.id == passkey_id, p.c.user_id == user_id))
    return result.rowcount == 1


def advance_counter(conn: Connection, passkey_id: int, new_count: int, now: datetime) -> bool:
    """Record a use; ``False`` (nothing written) when the counter did not move forward.

    Authenticators that keep no counter report 0 forever; that is accepted only while the
    stored counter is 0 too.
    """
    p = schema.passkeys
    moved = p.c.sign_count == 0 if new_count == 0 else p.c.sign_count < new_count
    result = conn.execute(
        update(p).where(p.c.id == passkey_id, moved)
        .values(sign_count=new_count, last_used_at=now, updated_at=now)
    )
    return result.rowcount == 1
