"""Queries on users, groups and memberships (run inside a ``DBRunner`` transaction)."""

from __future__ import annotations

import secrets
from datetime import datetime
from typing import Any

from sqlalchemy import func, or_, select, update
from sqlalchemy.engine import Connection
from sqlalchemy.exc import IntegrityError

from gateway.store import schema

DEFAULT_GROUP_NAME = "user"
DEFAULT_GROUP_SETTING = "default_group_id"
_REFERRAL_ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567"


class UniqueViolation(Exception):
    """An insert/update hit a unique constraint; ``field`` names the clashing column."""

    def __init__(self, field: str) -> None:
        super().__init__(field)
        self.field = field


def new_referral_code() -> str:
    return "".join(secrets.choice(_REFERRAL_ALPHABET) for _ in range(13))


def default_group(conn: Connection, now: datetime) -> dict[str, Any]:
    """The registration group: the one named by the setting, else ``user`` (created if absent)."""
    g = schema.groups
    chosen = conn.execute(
        select(schema.settings.c.value).where(schema.settings.c.key == DEFAULT_GROUP_SETTING)
    ).scalar()
    if chosen and chosen.isdigit():
        row = conn.execute(select(g).where(g.c.id == int(chosen))).mappings().first()
        if row:
            return dict(row)
    row = conn.execute(select(g).where(g.c.name == DEFAULT_GROUP_NAME)).mappings().first()
    if row:
        return dict(row)
    inserted = conn.execute(
        g.insert().values(name=DEFAULT_GROUP_NAME, multiplier_nanos=1_000_000_000,
                          created_at=now, updated_at=now)
    ).inserted_primary_key
    assert inserted is not None
    group_id = inserted[0]
    return dict(conn.execute(select(g).where(g.c.id == group_id)).mappings().one())


def admin_exists(conn: Connection) -> bool:
    u = schema.users
    found = conn.execute(
        select(u.c.id).where(u.c.is_admin.is_(True), u.c.enabled.is_(True)).limit(1)
    ).first()
    return found is not None


def count_enabled_admins(conn: Connection) -> int:
    u = schema.users
    return conn.execute(
        select(func.count()).where(u.c.is_admin.is_(True), u.c.enabled.is_(True))
    ).scalar_one()


def get_user(conn: Connection, user_id: int) -> dict[str, Any] | None:
    row = conn.execute(select(schema.users).where(schema.users.c.id == user_id)).mappings().first()
    return dict(row) if row else None


def find_by_identifier(conn: Connection, identifier: str) -> dict[str, Any] | None:
    u = schema.users
    row = conn.execute(
        select(u).where(or_(u.c.username == identifier, u.c.email == identifier.lower()))
        .order_by(u.c.id).limit(1)
    ).mappings().first()
    return dict(row) if row else None


def find_by_referral_code(conn: Connection, code: str) -> dict[str, Any] | None:
    u = schema.users
    row = conn.execute(select(u).where(u.c.referral_code == code)).mappings().first()
    return dict(row) if row else None


def taken_field(conn: Connection, username: str, email: str) -> str | None:
    u = schema.users
    if conn.execute(select(u.c.id).where(u.c.username == username)).first():
        return "username"
    if conn.execute(select(u.c.id).where(u.c.email == email)).first():
        return "email"
    return None


def create_user(
    conn: Connection,
    *,
    username: str,
    email: str,
    password_hash: str | None,
    now: datetime,
    is_admin: bool = False,
    email_verified: bool = False,
    group_id: int | None = None,
    referrer_id: int | None = None,
) -> int:
    """Insert a user with a permanent membership in their primary group; returns the id.

    Raises ``UniqueViolation`` naming ``username`` or ``email`` when taken (checked first for
    a clear message, and again by the unique index for races).
    """
    field = taken_field(conn, username, email)
    if field:
        raise UniqueViolation(field)
    if group_id is None or conn.execute(
        select(schema.groups.c.id).where(schema.groups.c.id == group_id)
    ).first() is None:
        group_id = default_group(conn, now)["id"]
    nested = conn.begin_nested()
    try:
        inserted = conn.execute(
            schema.users.insert().values(
                username=username, email=email, password_hash=password_hash,
                email_verified=email_verified, avatar_url="", balance_nanos=0,
                group_id=group_id, referral_code=new_referral_code(), referrer_id=referrer_id,
                is_admin=is_admin, enabled=True, token_version=0,
                created_at=now, updated_at=now,
            )
        ).inserted_primary_key
        assert inserted is not None
        user_id = inserted[0]
        nested.commit()
    except IntegrityError:
        nested.rollback()
        raise UniqueViolation(taken_field(conn, username, email) or "username") from None
    conn.execute(
        schema.group_memberships.insert().values(
            user_id=user_id, group_id=group_id, expires_at=None, created_at=now, updated_at=now
        )
    )
    return int(user_id)


def bump_token_version(conn: Connection, user_id: int, now: datetime) -> None:
    u = schema.users
    conn.execute(
        update(u).where(u.c.id == user_id)
        .values(token_version=u.c.token_version + 1, updated_at=now)
    )


def user_relations(conn: Connection, user: dict[str, Any]) -> dict[str, Any]:
    """The user's primary group, membership rows (with groups) and inviter (id + username)."""
    g, m, u = schema.groups, schema.group_memberships, schema.users
    group = conn.execute(select(g).where(g.c.id == user["group_id"])).mappings().first()
    memberships = conn.execute(
        select(m, g.c.name.label("group_name"), g.c.multiplier_nanos.label("group_multiplier"),
               g.c.created_at.label("group_created_at"), g.c.updated_at.label("group_updated_at"))
        .join(g, g.c.id == m.c.group_id)
        .where(m.c.user_id == user["id"]).order_by(m.c.id)
    ).mappings().all()
    referrer = None
    if user.get("referrer_id"):
        referrer = conn.execute(
            select(u.c.id, u.c.username).where(u.c.id == user["referrer_id"])
        ).mappings().first()
    return {
        "group": dict(group) if group else None,
        "memberships": [dict(row) for row in memberships],
        "referrer": dict(referrer) if referrer else None,
    }
