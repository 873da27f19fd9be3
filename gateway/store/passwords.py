"""Replacing a user's password, which signs out every session they had.

The new hash and the token-version bump are written together in the caller's transaction
(contract weakness 12): a token issued before the change stops working the moment the change
commits, whether it came from the password-change route or ``lockgate-admin reset-password``.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import update
from sqlalchemy.engine import Connection

from gateway.store import schema
from gateway.store.users import bump_token_version


def replace_password(conn: Connection, user_id: int, password_hash: str, now: datetime, *,
                     verified_email: bool = False) -> None:
    """Store the new hash and bump the token version; ``verified_email`` also marks the
    address verified (the change was confirmed by a code mailed to it)."""
    u = schema.users
    values: dict[str, Any] = {"password_hash": password_hash, "updated_at": now}
    if verified_email:
        values["email_verified"] = True
    conn.execute(update(u).where(u.c.id == user_id).values(**values))
    bump_token_version(conn, user_id, now)
