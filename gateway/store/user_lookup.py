"""Small reads about accounts that callers need as a fact, not as a whole user row.

Whether an address is registered (registration mails a different text then), which users a
handle given on the command line names, and how many users and keys there are (the ledger
check's summary line).
"""

from __future__ import annotations

from typing import NamedTuple

from sqlalchemy import func, or_, select
from sqlalchemy.engine import Connection

from gateway.store import schema


class UserName(NamedTuple):
    id: int
    username: str


class AccountCounts(NamedTuple):
    users: int
    api_keys: int


def email_registered(conn: Connection, email: str) -> bool:
    """Whether an account has exactly this (normalised) email address."""
    u = schema.users
    return conn.execute(select(u.c.id).where(u.c.email == email)).first() is not None


def users_named(conn: Connection, who: str) -> list[UserName]:
    """Users whose username or email is ``who``, or whose id it is when it is all digits."""
    u = schema.users
    match = or_(u.c.username == who, u.c.email == who)
    if who.isdigit():
        match = or_(match, u.c.id == int(who))
    return [UserName(int(row[0]), row[1])
            for row in conn.execute(select(u.c.id, u.c.username).where(match))]


def account_counts(conn: Connection) -> AccountCounts:
    users = conn.execute(select(func.count()).select_from(schema.users)).scalar_one()
    keys = conn.execute(select(func.count()).select_from(schema.api_keys)).scalar_one()
    return AccountCounts(int(users), int(keys))
