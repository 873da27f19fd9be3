"""Sandbox charge records (agents contract §3.6): one row per runtime or storage charge.

``reference`` is unique (``task:<task id>`` for runtime, ``storage:<sandbox id>:<until>`` for
storage), so a charge can be recorded once only; settlement checks ``exists`` under the
user's billing lock before computing anything, and the unique index backs that up.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import select
from sqlalchemy.engine import Connection, RowMapping

from gateway.store import schema

RUNTIME = "runtime"
STORAGE = "storage"
#: the charges route shows at most this many, newest first
LIST_LIMIT = 200


@dataclass(frozen=True)
class ChargeRow:
    """One ``sandbox_charges`` row."""

    id: str
    user_id: int
    sandbox_id: str
    host_id: str
    kind: str
    reference: str
    quantity: str
    cost_nanos: int
    rate_snapshot: str
    created_at: datetime

    @classmethod
    def from_row(cls, row: RowMapping) -> ChargeRow:
        return cls(**{name: row[name] for name in cls.__dataclass_fields__})


def runtime_reference(task_id: str) -> str:
    return f"task:{task_id}"


def exists(conn: Connection, reference: str) -> bool:
    c = schema.sandbox_charges
    return conn.execute(select(c.c.id).where(c.c.reference == reference)).first() is not None


def insert(conn: Connection, row: ChargeRow) -> None:
    conn.execute(schema.sandbox_charges.insert().values(
        **{name: getattr(row, name) for name in ChargeRow.__dataclass_fields__}))


def list_for_sandbox(conn: Connection, sandbox_id: str,
                     limit: int = LIST_LIMIT) -> list[ChargeRow]:
    """The sandbox's charges, newest first."""
    c = schema.sandbox_charges
    rows = conn.execute(select(c).where(c.c.sandbox_id == sandbox_id).order_by(
        c.c.created_at.desc(), c.c.id.desc()).limit(limit)).mappings().all()
    return [ChargeRow.from_row(row) for row in rows]
