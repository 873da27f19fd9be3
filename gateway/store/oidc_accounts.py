"""Accounts of OIDC identities: sign in by subject, link by verified email, create, bind.

An OIDC sign-in is one transaction: find the account bound to the identity's subject, else
link the account with the same email (only when the provider verified it, weakness 10, and only
if that account is not bound to another subject), else create one when the signup policy the
console computed allows it (weakness 7).  Binding from a signed-in session refuses a subject
already bound to someone else.  A refusal raises ``LinkRefused`` (its message is shown on the
login page) and rolls the transaction back; a concurrent callback that claimed the same
subject first surfaces as ``IdentityConflict``, never as a database error.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import select, update
from sqlalchemy.engine import Connection
from sqlalchemy.exc import IntegrityError

from gateway.store import schema
from gateway.store import users as user_store

#: a user and their relations (group names, memberships), as ``users.user_relations`` gives them
UserWithRelations = tuple[dict[str, Any], dict[str, Any]]


class LinkRefused(Exception):
    """The identity cannot sign in or bind; the message is for the person signing in."""


class IdentityConflict(Exception):
    """Another transaction bound the same subject (or took the same account) first."""


@dataclass(frozen=True)
class OidcIdentity:
    """What the provider's ID token says about the person (email already normalised)."""

    sub: str
    email: str | None
    name: str
    email_verified: bool
    avatar: str


@dataclass(frozen=True)
class SignupPolicy:
    """The site's settings that decide whether an unknown identity gets a new account."""

    open: bool
    #: registration is limited to some email suffixes
    suffixes: bool
    domain_ok: bool
    group_id: int | None
    referral: str
    referral_enabled: bool


def _fill(user: dict[str, Any], identity: OidcIdentity, now: datetime) -> dict[str, Any]:
    values: dict[str, Any] = {"oidc_sub": identity.sub, "updated_at": now}
    if not user["avatar_url"] and identity.avatar:
        values["avatar_url"] = identity.avatar
    if identity.email_verified and identity.email == user["email"]:
        values["email_verified"] = True
    return values


def _with_relations(conn: Connection, user_id: int) -> UserWithRelations:
    user = user_store.get_user(conn, user_id)
    assert user is not None
    if not user["enabled"]:
        raise LinkRefused("User is disabled")
    return user, user_store.user_relations(conn, user)


def _free_username(conn: Connection, base: str) -> str:
    u = schema.users
    username = base
    for n in range(2, 100):
        if conn.execute(select(u.c.id).where(u.c.username == username)).first() is None:
            break
        username = f"{base}-{n}"
    return username


def _sign_in(conn: Connection, identity: OidcIdentity, policy: SignupPolicy,
             username_base: str, now: datetime) -> UserWithRelations:
    u = schema.users
    by_sub = conn.execute(select(u).where(u.c.oidc_sub == identity.sub)).mappings().first()
    if by_sub is not None:
        if not by_sub["avatar_url"] and identity.avatar:
            conn.execute(update(u).where(u.c.id == by_sub["id"])
                         .values(avatar_url=identity.avatar, updated_at=now))
        return _with_relations(conn, by_sub["id"])
    email = identity.email
    existing = None
    if email:
        existing = conn.execute(select(u).where(u.c.email == email)).mappings().first()
    if existing is not None:
        if not identity.email_verified:
            raise LinkRefused("An account with this email already exists. Sign in to it and "
                              "link your identity provider from your profile.")
        linked = conn.execute(update(u).where(u.c.id == existing["id"], u.c.oidc_sub.is_(None))
                              .values(**_fill(dict(existing), identity, now)))
        if linked.rowcount != 1:
            raise LinkRefused("This account is already linked to another identity")
        return _with_relations(conn, existing["id"])
    if not policy.open:
        raise LinkRefused("registration is disabled")
    if not email:
        raise LinkRefused("the identity provider did not share an email address")
    if policy.suffixes and not identity.email_verified:
        raise LinkRefused("the identity provider has not verified this email address")
    if not policy.domain_ok:
        raise LinkRefused("email domain is not allowed for registration")
    referrer_id = None
    if policy.referral and policy.referral_enabled:
        referrer = user_store.find_by_referral_code(conn, policy.referral)
        referrer_id = referrer["id"] if referrer else None
    try:
        user_id = user_store.create_user(
            conn, username=_free_username(conn, username_base), email=email,
            password_hash=None, now=now, email_verified=identity.email_verified,
            group_id=policy.group_id, referrer_id=referrer_id)
    except user_store.UniqueViolation:
        raise LinkRefused("could not create the account; please try again") from None
    conn.execute(update(u).where(u.c.id == user_id)
                 .values(oidc_sub=identity.sub, avatar_url=identity.avatar))
    return _with_relations(conn, user_id)


def sign_in(conn: Connection, identity: OidcIdentity, policy: SignupPolicy,
            username_base: str, now: datetime) -> UserWithRelations:
    """The account the identity signs in to: bound, linked by verified email, or new (named
    after ``username_base``, with ``-2``, ``-3``... when taken)."""
    try:
        return _sign_in(conn, identity, policy, username_base, now)
    except IntegrityError:
        raise IdentityConflict() from None


def bind(conn: Connection, user_id: int, identity: OidcIdentity,
         now: datetime) -> UserWithRelations:
    """Bind the identity to the signed-in user's account."""
    u = schema.users
    try:
        user = user_store.get_user(conn, user_id)
        if user is None or not user["enabled"]:
            raise LinkRefused("User is disabled")
        other = conn.execute(select(u.c.id).where(u.c.oidc_sub == identity.sub,
                                                  u.c.id != user_id)).first()
        if other is not None:
            raise LinkRefused("OIDC account is already bound to another user")
        conn.execute(update(u).where(u.c.id == user_id).values(**_fill(user, identity, now)))
        return _with_relations(conn, user_id)
    except IntegrityError:
        raise IdentityConflict() from None
