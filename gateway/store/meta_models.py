"""Admin queries on meta models (console contract §6.3), and what the gateway reads of them.

A meta model's public name (``model_name``) is a model name like any other: it may not be taken
by a global model or another meta model, and a global model may not take it later (the model
store asks ``meta_name_taken``).  Referenced names are resolved to their kind in the same
transaction as the write, so a program never refers to a model that vanished meanwhile.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from datetime import datetime
from typing import Any

from sqlalchemy import select, update
from sqlalchemy.engine import Connection

from gateway.store import schema
from gateway.store.catalog_admin import conflict, fetch_row, name_taken

NOT_FOUND = "Meta model not found"
NAME_TAKEN = "Model name already exists"

#: ``check(lookup)`` -> the problems of the program given how its names resolve
Check = Callable[[Callable[[str], Any]], list[str]]


class ProgramRefused(Exception):
    """The program's references did not check out; ``problems`` says why, first one first."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__(problems[0])
        self.problems = problems


def list_meta_models(conn: Connection) -> list[dict[str, Any]]:
    t = schema.meta_models
    return [dict(r) for r in conn.execute(
        select(t).order_by(t.c.created_at.desc(), t.c.id.desc())).mappings()]


def get_meta_model(conn: Connection, meta_id: int) -> dict[str, Any]:
    return fetch_row(conn, schema.meta_models, meta_id, NOT_FOUND)


def name_kinds(conn: Connection, names: Iterable[str]) -> dict[str, str]:
    """``{name: "model" | "meta"}`` for the names that exist (global models win a tie)."""
    wanted = list(dict.fromkeys(names))
    if not wanted:
        return {}
    m, meta = schema.models, schema.meta_models
    kinds = {name: "meta" for (name,) in conn.execute(
        select(meta.c.model_name).where(meta.c.model_name.in_(wanted)))}
    kinds.update({name: "model" for (name,) in conn.execute(
        select(m.c.model_name).where(m.c.model_name.in_(wanted)))})
    return kinds


def meta_name_taken(conn: Connection, name: str) -> bool:
    return name_taken(conn, schema.meta_models, "model_name", name)


def _check_program(conn: Connection, check: Check, names: Iterable[str]) -> None:
    kinds = name_kinds(conn, names)
    problems = check(kinds.get)
    if problems:
        raise ProgramRefused(problems)


def create_meta_model(conn: Connection, values: dict[str, Any], check: Check,
                      referenced: Iterable[str], now: datetime) -> dict[str, Any]:
    t = schema.meta_models
    _check_program(conn, check, referenced)
    if meta_name_taken(conn, values["model_name"]) or name_taken(
            conn, schema.models, "model_name", values["model_name"]):
        raise conflict(NAME_TAKEN, "model_name")
    key = conn.execute(t.insert().values(**values, created_at=now, updated_at=now)
                       ).inserted_primary_key
    assert key is not None
    return get_meta_model(conn, int(key[0]))


def update_meta_model(conn: Connection, meta_id: int, values: dict[str, Any], check: Check,
                      referenced: Iterable[str], now: datetime) -> dict[str, Any]:
    t = schema.meta_models
    fetch_row(conn, t, meta_id, NOT_FOUND, lock=True)
    _check_program(conn, check, referenced)
    if name_taken(conn, t, "model_name", values["model_name"], except_id=meta_id) or \
            name_taken(conn, schema.models, "model_name", values["model_name"]):
        raise conflict(NAME_TAKEN, "model_name")
    conn.execute(update(t).where(t.c.id == meta_id).values(**values, updated_at=now))
    return get_meta_model(conn, meta_id)


def delete_meta_model(conn: Connection, meta_id: int) -> None:
    t = schema.meta_models
    fetch_row(conn, t, meta_id, NOT_FOUND, lock=True)
    conn.execute(t.delete().where(t.c.id == meta_id))


def validate_program(conn: Connection, check: Check, referenced: Iterable[str]) -> None:
    """The reference checks alone (``POST /api/meta-models/validate``): writes nothing."""
    _check_program(conn, check, referenced)


def account_numbers(conn: Connection, user_id: int,
                    key_id: int | None) -> tuple[int, int | None]:
    """``(balance_nanos, key spent_nanos or None)``: what a program reading ``user.balance``
    or ``api_key.quota_remaining`` needs (read only for such programs)."""
    balance = conn.execute(select(schema.users.c.balance_nanos)
                           .where(schema.users.c.id == user_id)).scalar_one_or_none()
    spent = None if key_id is None else conn.execute(
        select(schema.api_keys.c.spent_nanos).where(schema.api_keys.c.id == key_id)
    ).scalar_one_or_none()
    return int(balance or 0), None if spent is None else int(spent)
