"""A write the database refused for a constraint, as our own exception.

Most uniqueness rules are checked first for a clear message, but two requests racing past the
check meet the unique index instead.  Callers outside ``gateway/store`` must not import
SQLAlchemy to recognise that, so ``refusing_conflicts`` runs a transaction's work and turns the
database's ``IntegrityError`` into ``WriteConflict``.  Raised inside the transaction, it rolls
everything back exactly as the database error did.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from sqlalchemy.engine import Connection
from sqlalchemy.exc import IntegrityError

T = TypeVar("T")


class WriteConflict(Exception):
    """A unique or foreign-key constraint refused a write; nothing of the transaction stays."""


def refusing_conflicts(conn: Connection, fn: Callable[..., T], *args: Any) -> T:
    """``fn(conn, *args)``, with a constraint violation raised as ``WriteConflict``."""
    try:
        return fn(conn, *args)
    except IntegrityError as exc:
        raise WriteConflict(str(exc.orig)) from exc
