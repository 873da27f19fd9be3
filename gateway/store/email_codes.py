"""One-time email codes: store a hash, check and consume it in one conditional UPDATE.

Why a module of its own: the consume step must be a single conditional write (``used_at IS
NULL AND attempts < MAX_ATTEMPTS AND expires_at > now``) so two requests racing with the same
code cannot both win (contract weakness 8), and it must run inside the caller's transaction so
registration can consume the code and insert the user atomically.  A wrong guess is counted on
every live code of that address and purpose, so asking for several codes does not multiply the
guesses an attacker gets.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from sqlalchemy import delete, select, update
from sqlalchemy.engine import Connection

from gateway.store import schema

#: wrong guesses a code survives; the next attempt after that is refused even if right
MAX_ATTEMPTS = 5
#: only the newest few live codes of an address count (contract §2.3)
NEWEST = 5
#: used and expired rows are kept this long (for support questions), then purged
RETENTION = timedelta(days=1)


def insert(conn: Connection, *, email: str, purpose: str, code_hash: str,
           captcha_verified: bool, now: datetime, expires_at: datetime) -> int:
    """Store a new code (and purge long-dead ones); returns its id."""
    t = schema.email_codes
    conn.execute(delete(t).where(t.c.expires_at < now - RETENTION))
    inserted = conn.execute(
        t.insert().values(email=email, purpose=purpose, code_hash=code_hash,
                          captcha_verified=captcha_verified, attempts=0,
                          expires_at=expires_at, used_at=None, created_at=now)
    ).inserted_primary_key
    assert inserted is not None
    return int(inserted[0])


def remove(conn: Connection, code_id: int) -> None:
    """Drop a code that was never delivered (the mail failed)."""
    conn.execute(delete(schema.email_codes).where(schema.email_codes.c.id == code_id))


def _live(email: str, purpose: str, now: datetime) -> list:
    t = schema.email_codes
    return [t.c.email == email, t.c.purpose == purpose, t.c.used_at.is_(None),
            t.c.attempts < MAX_ATTEMPTS, t.c.expires_at > now]


def consume(conn: Connection, *, email: str, purpose: str, code_hash: str, now: datetime,
            require_captcha: bool = False) -> bool:
    """Mark the matching live code used and return True; otherwise count a wrong attempt.

    The caller must commit even when this returns False, or the attempt is not counted.
    """
    t = schema.email_codes
    live = _live(email, purpose, now)
    newest = select(t.c.id).where(*live).order_by(t.c.id.desc()).limit(NEWEST).subquery()
    wanted = [t.c.id.in_(select(newest.c.id)), t.c.code_hash == code_hash]
    if require_captcha:
        wanted.append(t.c.captcha_verified.is_(True))
    found = conn.execute(
        select(t.c.id).where(*wanted).order_by(t.c.id.desc()).limit(1)
    ).scalar()
    if found is not None:
        done = conn.execute(
            update(t).where(t.c.id == found, *live).values(used_at=now)
        )
        if done.rowcount == 1:
            return True
    conn.execute(update(t).where(*live).values(attempts=t.c.attempts + 1))
    return False
