"""The ``lockgate-admin`` commands: blocking work on the database through the store's code.

Each command takes the parsed options, an open engine and an output stream, and returns the
process exit status: 0 done, 1 a finding (migrations pending, ledger differences), 2 refused
(bad input, unknown user, invalid document) -- with a message that says what to do.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from datetime import UTC, datetime
from typing import IO, Any

import orjson
from argon2 import PasswordHasher

from console.http import ApiError
from console.services.identity.passwords import MAX_LENGTH, MIN_LENGTH
from console.services.settings import transfer as settings_transfer
from console.user_view import timestamp
from gateway.settings.store import Settings
from gateway.store import migrate
from gateway.store import users as user_store
from gateway.store.config_transfer import ImportRefused, apply_config_plan
from gateway.store.conflicts import WriteConflict, refusing_conflicts
from gateway.store.connection import Connection, Engine
from gateway.store.database_url import engine_display
from gateway.store.first_run import mark_setup_completed, setup_pending
from gateway.store.ledger_audit import audit
from gateway.store.passwords import replace_password
from gateway.store.settings_rows import read_settings
from gateway.store.user_lookup import UserName, account_counts, users_named
from gateway.user_cache import DEFAULT_TTL

OK, FINDING, REFUSED = 0, 1, 2

#: reads a new password (from a file, standard input or a prompt)
PasswordSource = Callable[[], str]


class Refused(Exception):
    """Bad input: the message says what to change; nothing was written."""


def now() -> datetime:
    return datetime.now(UTC)


def _find_user(conn: Connection, who: str) -> UserName:
    found = users_named(conn, who)
    if not found:
        raise Refused(f"no user with username, email or id {who!r}")
    if len(found) > 1:
        raise Refused(f"{who!r} names several users; give the numeric id")
    return found[0]


def _checked_password(password: str) -> str:
    if not MIN_LENGTH <= len(password) <= MAX_LENGTH:
        raise Refused(f"the password must be {MIN_LENGTH} to {MAX_LENGTH} characters")
    return password


def reset_password(engine: Engine, out: IO[str], who: str, read_password: PasswordSource,
                   hasher: PasswordHasher,
                   announce: Callable[[int], None] | None = None) -> int:
    """``announce(user_id)`` tells running processes (their user caches) after the commit."""
    password_hash = hasher.hash(_checked_password(read_password()))
    with engine.begin() as conn:
        user = _find_user(conn, who)
        replace_password(conn, user.id, password_hash, now())
    out.write(f"password of user {user.id} ({user.username}) reset; "
              "their sessions are signed out\n")
    if announce is not None:
        announce(user.id)
        out.write("running processes told to refuse the old sessions at once\n")
    else:
        out.write("no --redis: running processes refuse the old sessions once their cached "
                  f"copy of the user expires (at most {DEFAULT_TTL:g} s)\n")
    return OK


def create_admin(engine: Engine, out: IO[str], username: str, email: str,
                 read_password: PasswordSource, hasher: PasswordHasher) -> int:
    if not username.strip() or "@" not in email:
        raise Refused("give a username and an email address")
    password_hash = hasher.hash(_checked_password(read_password()))
    with engine.begin() as conn:
        moment = now()
        try:
            user_id = user_store.create_user(
                conn, username=username.strip(), email=email.strip(),
                password_hash=password_hash, now=moment, is_admin=True, email_verified=True)
        except user_store.UniqueViolation as exc:
            raise Refused(f"that {exc.field} is taken; choose another or use "
                          "reset-password") from None
        first_admin = setup_pending(conn)
        if first_admin:
            mark_setup_completed(conn, moment)
    out.write(f"administrator {user_id} ({username.strip()}) created"
              + ("; first-run setup marked done\n" if first_admin else "\n"))
    return OK


def run_migrations(engine: Engine, out: IO[str]) -> int:
    with engine.connect() as conn:
        before = migrate.current_revision(conn)
    migrate.upgrade(engine)
    head = migrate.head_revision()
    out.write(f"schema at {head}" + (" (already current)\n" if before == head
                                     else f" (was {before or 'empty'})\n"))
    return OK


def check(engine: Engine, out: IO[str], database: str, secret_file: str) -> int:
    out.write(f"database: {engine_display(engine)}\n")
    with engine.connect() as conn:
        current = migrate.current_revision(conn)
        head = migrate.head_revision()
        pending = current != head
        out.write(f"schema: {current or 'empty'}, this version needs {head}"
                  + (" -> migrations pending: run 'lockgate-admin migrate'\n" if pending
                     else " (current)\n"))
        if not pending:
            out.write("first-run setup: " + ("pending (POST /api/setup, or "
                                             "'lockgate-admin create-admin')\n"
                                             if setup_pending(conn) else "done\n"))
    secret = os.path.abspath(secret_file)
    out.write(f"secret file: {secret} ("
              + ("present" if os.path.exists(secret) else "absent; created on first start")
              + ")\n")
    return FINDING if pending else OK


def export_config(engine: Engine, out: IO[bytes], sections: list[str]) -> int:
    chosen = sections or list(settings_transfer.SECTIONS)
    moment = now()
    with engine.connect() as conn:
        doc: dict[str, Any] = {"version": settings_transfer.VERSION,
                               "exported_at": timestamp(moment), "sections": chosen}
        doc.update(settings_transfer.read_config(conn, chosen))
    out.write(orjson.dumps(doc, option=orjson.OPT_INDENT_2) + b"\n")
    return OK


def import_config(engine: Engine, out: IO[str], raw: bytes, node_name: str) -> dict[str, Any]:
    """Validate and apply a document; returns the plan (its sections and settings)."""
    try:
        doc = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise Refused(f"not a JSON document: {exc}") from None
    with engine.begin() as conn:
        settings = Settings(read_settings(conn))
        try:
            plan = settings_transfer.validate_document(settings, node_name, doc)
            refusing_conflicts(conn, apply_config_plan, plan, now())
        except ApiError as error:
            raise Refused(_api_message(error)) from None
        except ImportRefused as exc:
            raise Refused(str(exc)) from None
        except WriteConflict:
            raise Refused("the configuration conflicts with an existing record") from None
    out.write(f"imported sections: {', '.join(plan['sections'])}\n")
    return plan


def _api_message(error: ApiError) -> str:
    body = error.body()
    field = body.get("field")
    return str(body.get("error")) + (f" (field {field})" if field else "")


def verify_ledger(engine: Engine, out: IO[str]) -> int:
    with engine.connect() as conn:
        differences = audit(conn)
        users, keys = account_counts(conn)
    for difference in differences:
        out.write(f"DIFFERENCE {difference}\n")
    if differences:
        out.write(f"{len(differences)} difference(s) found\n")
        return FINDING
    out.write(f"ledger verified: {users} users, {keys} API keys, no difference\n")
    return OK
