"""Maintains and reads the hourly usage rollups (``schema_rollups``).

Writes: the settlement batch adds the usage-log rows it inserts with ``add_settled`` -- rows
summed per key in Python, then ONE ``INSERT ... ON CONFLICT DO UPDATE SET x = x + excluded.x``
``executemany`` per table, in the batch's transaction.  Adding is commutative, so several
processes settling into one database (PostgreSQL fleet, ``--workers`` on SQLite) stay exact;
rows go in key order so two concurrent batches lock rollup rows in the same order (no
deadlock).  Removing usage rows (retention) subtracts them with ``subtract_logged``; emptying
the log empties the rollups.

Reads: ``plan`` splits a half-open time range into the whole days and whole hours the rollups
answer and the ragged edges (less than an hour each) the caller reads from the raw rows, so
any bounds stay exact.  ``differences`` recomputes the rollups from the raw rows (reconciliation).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import and_, delete, func, select, true
from sqlalchemy.engine import Connection
from sqlalchemy.sql.elements import ColumnElement

from gateway.store import schema
from gateway.store.driver_sql import DriverSQL
from gateway.store.schema_rollups import ROLLUP_MEASURES

user_hours = schema.usage_rollup_user_hours
channel_hours = schema.usage_rollup_channel_hours
channel_days = schema.usage_rollup_channel_days
model_hours = schema.usage_rollup_model_hours
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
HOUR = timedelta(hours=1)
DAY = timedelta(days=1)

#: one settled usage row as the rollups see it: (hour, user_id, user_channel_id, channel_id,
#: input, output, cached input, cost_nanos, model_name)
Entry = tuple[int, int, int | None, int | None, int, int, int, int, str]

_COLUMNS = ", ".join(ROLLUP_MEASURES)
_ADD = ", ".join(f"{name} = {{table}}.{name} + excluded.{name}" for name in ROLLUP_MEASURES)
_USER_UPSERT = (
    f"INSERT INTO usage_rollup_user_hours (user_id, hour, {_COLUMNS}) "
    f"VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (user_id, hour) DO UPDATE SET "
    + _ADD.format(table="usage_rollup_user_hours"))
_CHANNEL_UPSERT = (
    f"INSERT INTO usage_rollup_channel_hours (hour, user_channel_id, channel_id, {_COLUMNS}) "
    f"VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (hour, user_channel_id, channel_id) "
    "DO UPDATE SET " + _ADD.format(table="usage_rollup_channel_hours"))
_DAY_UPSERT = (
    f"INSERT INTO usage_rollup_channel_days (day, user_channel_id, channel_id, {_COLUMNS}) "
    f"VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (day, user_channel_id, channel_id) "
    "DO UPDATE SET " + _ADD.format(table="usage_rollup_channel_days"))
_MODEL_UPSERT = (
    f"INSERT INTO usage_rollup_model_hours (model_name, hour, {_COLUMNS}) "
    f"VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (model_name, hour) DO UPDATE SET "
    + _ADD.format(table="usage_rollup_model_hours"))
_UPSERTS = (_USER_UPSERT, _CHANNEL_UPSERT, _DAY_UPSERT, _MODEL_UPSERT)
_DELETE_EMPTY = (
    ("DELETE FROM usage_rollup_user_hours WHERE user_id = ? AND hour = ? AND requests = 0", 2),
    ("DELETE FROM usage_rollup_channel_hours WHERE hour = ? AND user_channel_id = ? "
     "AND channel_id = ? AND requests = 0", 3),
    ("DELETE FROM usage_rollup_channel_days WHERE day = ? AND user_channel_id = ? "
     "AND channel_id = ? AND requests = 0", 3),
    ("DELETE FROM usage_rollup_model_hours WHERE model_name = ? AND hour = ? "
     "AND requests = 0", 2),
)


def hour_of(moment: datetime) -> int:
    """Whole hours since the epoch of an aware datetime (the rollups' ``hour``)."""
    return (moment - EPOCH) // HOUR


def hour_start(hour: int) -> datetime:
    return EPOCH + hour * HOUR


def entry(row: dict[str, Any], hour: int) -> Entry:
    """The rollup entry of one usage-log row dict."""
    return (hour, row["user_id"], row.get("user_channel_id"), row.get("channel_id"),
            int(row.get("input_tokens") or 0), int(row.get("output_tokens") or 0),
            int(row.get("cached_input_tokens") or 0), int(row.get("cost_nanos") or 0),
            str(row.get("model_name") or ""))


Rows = list[tuple[Any, ...]]
Tables = tuple[Rows, Rows, Rows, Rows]


def _sum(entries: Iterable[Entry], sign: int) -> Tables:
    """Rows for the user-hour, channel-hour, channel-day and model-hour upserts, each in key
    order."""
    users: dict[tuple[Any, ...], list[int]] = {}
    channels: dict[tuple[Any, ...], list[int]] = {}
    days: dict[tuple[Any, ...], list[int]] = {}
    models: dict[tuple[Any, ...], list[int]] = {}
    for hour, user_id, uc_id, channel_id, inp, out, cached, cost, model in entries:
        uc_id, channel_id = uc_id or 0, channel_id or 0
        for sums in (users.setdefault((user_id, hour), [0, 0, 0, 0, 0]),
                     channels.setdefault((hour, uc_id, channel_id), [0, 0, 0, 0, 0]),
                     days.setdefault((hour // 24, uc_id, channel_id), [0, 0, 0, 0, 0]),
                     models.setdefault((model, hour), [0, 0, 0, 0, 0])):
            sums[0] += sign
            sums[1] += sign * inp
            sums[2] += sign * out
            sums[3] += sign * cached
            sums[4] += sign * cost
    return tuple([(*key, *sums) for key, sums in sorted(table.items())]  # type: ignore[return-value]
                 for table in (users, channels, days, models))


def _upsert(sql: DriverSQL, tables: Tables) -> None:
    for statement, rows in zip(_UPSERTS, tables, strict=True):
        sql.many(statement, rows)


def add_settled(sql: DriverSQL, entries: Sequence[Entry]) -> None:
    """Add freshly inserted usage rows to the rollups (one upsert per table)."""
    if entries:
        _upsert(sql, _sum(entries, 1))


def add_logged(conn: Connection, rows: Iterable[dict[str, Any]]) -> None:
    """Add usage rows written outside the settlement batch (imports, test fixtures)."""
    sql = DriverSQL(conn)
    try:
        add_settled(sql, [entry(row, hour_of(row["created_at"])) for row in rows])
    finally:
        sql.close()


def subtract_logged(conn: Connection, rows: Iterable[dict[str, Any]]) -> None:
    """Take usage rows about to be deleted out of the rollups (rows emptied are removed)."""
    entries = [entry(row, hour_of(row["created_at"])) for row in rows]
    if not entries:
        return
    tables = _sum(entries, -1)
    sql = DriverSQL(conn)
    try:
        _upsert(sql, tables)
        for (statement, width), rows_of in zip(_DELETE_EMPTY, tables, strict=True):
            sql.many(statement, [row[:width] for row in rows_of])
    finally:
        sql.close()


def clear(conn: Connection) -> int:
    """Empty the rollups (the usage log was emptied)."""
    return sum(conn.execute(delete(table)).rowcount or 0
               for table in (user_hours, channel_hours, channel_days, model_hours))


# --- reads ------------------------------------------------------------------------------------

Span = tuple[int | None, int | None]
Edge = tuple[datetime | None, datetime | None]


def _split(start: datetime | None, end: datetime | None, unit: timedelta
           ) -> tuple[Span | None, list[Edge]]:
    """Whole ``unit``s ``(first, stop)`` inside ``[start, end)`` (None: not one whole unit; a
    None bound: open) and the edges around them."""
    first = None if start is None else -((start - EPOCH) // -unit)
    stop = None if end is None else (end - EPOCH) // unit
    if first is not None and stop is not None and first >= stop:
        return None, [(start, end)]
    edges: list[Edge] = []
    if start is not None and first is not None and EPOCH + first * unit > start:
        edges.append((start, EPOCH + first * unit))
    if end is not None and stop is not None and EPOCH + stop * unit < end:
        edges.append((EPOCH + stop * unit, end))
    return (first, stop), edges


def plan(start: datetime | None, end: datetime | None, *, days: bool
         ) -> list[tuple[str, Any]]:
    """How to read ``[start, end)``: ``("day", span)`` / ``("hour", span)`` parts from the
    rollups and ``("raw", (start, end))`` parts (under an hour each) from the usage rows."""
    whole, edges = _split(start, end, DAY if days else HOUR)
    parts: list[tuple[str, Any]] = [] if whole is None else [("day" if days else "hour", whole)]
    for lo, hi in edges:
        parts.extend(plan(lo, hi, days=False) if days else [("raw", (lo, hi))])
    return parts


def _table(level: str, user_id: int | None, models: Sequence[str] | None = None) -> Any:
    if models is not None:
        return model_hours
    if user_id is not None:
        return user_hours
    return channel_days if level == "day" else channel_hours


def _conditions(table: Any, span: Span, user_id: int | None = None,
                user_channel_id: int | None = None, channel_id: int | None = None,
                models: Sequence[str] | None = None) -> list[ColumnElement[bool]]:
    column = table.c.day if table is channel_days else table.c.hour
    first, stop = span
    conditions: list[ColumnElement[bool]] = []
    if first is not None:
        conditions.append(column >= first)
    if stop is not None:
        conditions.append(column < stop)
    for name, value in (("user_id", user_id), ("user_channel_id", user_channel_id),
                        ("channel_id", channel_id)):
        if value is not None:
            conditions.append(table.c[name] == value)
    if models is not None:
        conditions.append(table.c.model_name.in_(list(models)))
    return conditions


def rolled_totals(conn: Connection, level: str, span: Span, user_id: int | None = None,
                  user_channel_id: int | None = None, channel_id: int | None = None,
                  models: Sequence[str] | None = None) -> dict[str, int]:
    """Requests, cost and input+output tokens over whole days or hours of one rollup: one
    user's or some models' (hours only), or everyone's narrowed by user channel / channel."""
    table = _table(level, user_id, models)
    row = conn.execute(
        select(func.coalesce(func.sum(table.c.requests), 0),
               func.coalesce(func.sum(table.c.cost_nanos), 0),
               func.coalesce(func.sum(table.c.input_tokens + table.c.output_tokens), 0))
        .where(and_(true(), *_conditions(table, span, user_id, user_channel_id, channel_id,
                                         models)))
    ).one()
    return {"requests": int(row[0]), "cost_nanos": int(row[1]), "tokens": int(row[2])}


def rolled_pairs(conn: Connection, level: str, span: Span
                 ) -> list[tuple[int | None, int | None, dict[str, int]]]:
    """Channel-usage totals per (user channel, channel) over whole days or hours (0 -> None)."""
    t = _table(level, None)
    rows = conn.execute(
        select(t.c.user_channel_id, t.c.channel_id, func.sum(t.c.requests),
               func.sum(t.c.input_tokens), func.sum(t.c.output_tokens),
               func.sum(t.c.cached_input_tokens), func.sum(t.c.cost_nanos))
        .where(and_(true(), *_conditions(t, span)))
        .group_by(t.c.user_channel_id, t.c.channel_id)).all()
    return [(row[0] or None, row[1] or None, {
        "request_count": int(row[2]), "input_tokens": int(row[3]),
        "output_tokens": int(row[4]), "cached_input_tokens": int(row[5]),
        "cost_nanos": int(row[6])}) for row in rows]


# --- reconciliation ---------------------------------------------------------------------------

def _stored(conn: Connection, table: Any, keys: Sequence[str]) -> dict[tuple[Any, ...],
                                                                         tuple[int, ...]]:
    return {tuple(row[:len(keys)]): tuple(int(v) for v in row[len(keys):])
            for row in conn.execute(select(*(table.c[k] for k in keys),
                                           *(table.c[m] for m in ROLLUP_MEASURES)))}


def differences(conn: Connection) -> list[str]:
    """Every rollup row that does not equal the sums recomputed from the raw usage rows."""
    logs = schema.usage_logs
    entries = [entry(dict(row), hour_of(row["created_at"])) for row in conn.execute(
        select(logs.c.created_at, logs.c.user_id, logs.c.user_channel_id, logs.c.channel_id,
               logs.c.input_tokens, logs.c.output_tokens, logs.c.cached_input_tokens,
               logs.c.cost_nanos, logs.c.model_name)).mappings()]
    users, channels, days, models = _sum(entries, 1)
    found: list[str] = []
    for name, table, keys, wanted in (
            ("user", user_hours, ("user_id", "hour"), users),
            ("channel", channel_hours, ("hour", "user_channel_id", "channel_id"), channels),
            ("channel day", channel_days, ("day", "user_channel_id", "channel_id"), days),
            ("model", model_hours, ("model_name", "hour"), models)):
        expected = {row[:len(keys)]: row[len(keys):] for row in wanted}
        stored = _stored(conn, table, keys)
        for key in sorted(set(expected) | set(stored), key=repr):
            if expected.get(key) != stored.get(key):
                found.append(f"{name} rollup {key}: stored {stored.get(key)}, "
                             f"raw rows {expected.get(key)}")
    return found
