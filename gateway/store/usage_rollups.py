"""Maintains and reads the hourly usage rollups (``schema_rollups``).

Writes: the settlement batch adds the usage-log rows it inserts with ``add_settled`` -- rows
summed per key in Python, then ONE ``INSERT ... ON CONFLICT DO UPDATE SET x = x + excluded.x``
``executemany`` per table, in the batch's transaction.  Adding is commutative, so several
processes settling into one database (PostgreSQL fleet, ``--workers`` on SQLite) stay exact;
rows go in key order so two concurrent batches lock rollup rows in the same order (no
deadlock).  Removing usage rows (retention) subtracts them with ``subtract_logged``; emptying
the log empties the rollups.

Reads: ``window`` splits a half-open time range into the whole hours the rollups answer and
the ragged edges (less than an hour each) the caller reads from the raw rows, so any bounds
stay exact.  ``differences`` recomputes the rollups from the raw rows (reconciliation).
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
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
HOUR = timedelta(hours=1)

#: one settled usage row as the rollups see it:
#: (hour, user_id, user_channel_id, channel_id, input, output, cached input, cost_nanos)
Entry = tuple[int, int, int | None, int | None, int, int, int, int]

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


def hour_of(moment: datetime) -> int:
    """Whole hours since the epoch of an aware datetime (the rollups' ``hour``)."""
    return (moment - EPOCH) // HOUR


def hour_start(hour: int) -> datetime:
    return EPOCH + hour * HOUR


def entry(row: dict[str, Any], hour: int) -> Entry:
    """The rollup entry of one usage-log row dict."""
    return (hour, row["user_id"], row.get("user_channel_id"), row.get("channel_id"),
            int(row.get("input_tokens") or 0), int(row.get("output_tokens") or 0),
            int(row.get("cached_input_tokens") or 0), int(row.get("cost_nanos") or 0))


def _sum(entries: Iterable[Entry], sign: int) -> tuple[list[tuple[int, ...]],
                                                      list[tuple[int, ...]]]:
    users: dict[tuple[int, int], list[int]] = {}
    channels: dict[tuple[int, int, int], list[int]] = {}
    for hour, user_id, uc_id, channel_id, inp, out, cached, cost in entries:
        for sums in (users.setdefault((user_id, hour), [0, 0, 0, 0, 0]),
                     channels.setdefault((hour, uc_id or 0, channel_id or 0), [0, 0, 0, 0, 0])):
            sums[0] += sign
            sums[1] += sign * inp
            sums[2] += sign * out
            sums[3] += sign * cached
            sums[4] += sign * cost
    return ([(*key, *sums) for key, sums in sorted(users.items())],
            [(*key, *sums) for key, sums in sorted(channels.items())])


def add_settled(sql: DriverSQL, entries: Sequence[Entry]) -> None:
    """Add freshly inserted usage rows to both rollups (one upsert per table)."""
    if not entries:
        return
    users, channels = _sum(entries, 1)
    sql.many(_USER_UPSERT, users)
    sql.many(_CHANNEL_UPSERT, channels)


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
    users, channels = _sum(entries, -1)
    sql = DriverSQL(conn)
    try:
        sql.many(_USER_UPSERT, users)
        sql.many(_CHANNEL_UPSERT, channels)
        sql.many("DELETE FROM usage_rollup_user_hours WHERE user_id = ? AND hour = ? "
                 "AND requests = 0", [row[:2] for row in users])
        sql.many("DELETE FROM usage_rollup_channel_hours WHERE hour = ? AND user_channel_id = ? "
                 "AND channel_id = ? AND requests = 0", [row[:3] for row in channels])
    finally:
        sql.close()


def clear(conn: Connection) -> int:
    """Empty both rollups (the usage log was emptied)."""
    return sum(conn.execute(delete(table)).rowcount or 0 for table in (user_hours, channel_hours))


# --- reads ------------------------------------------------------------------------------------

def window(start: datetime | None, end: datetime | None
           ) -> tuple[tuple[int | None, int | None] | None, list[tuple[datetime | None,
                                                                     datetime | None]]]:
    """Split ``[start, end)`` into whole hours ``(first, stop)`` for the rollups (None: no
    whole hour; a None bound: open) and the raw-row edges around them."""
    first = None if start is None else -((start - EPOCH) // -HOUR)
    stop = None if end is None else hour_of(end)
    if first is not None and stop is not None and first >= stop:
        return None, [(start, end)]
    edges: list[tuple[datetime | None, datetime | None]] = []
    if start is not None and first is not None and hour_start(first) > start:
        edges.append((start, hour_start(first)))
    if end is not None and stop is not None and hour_start(stop) < end:
        edges.append((hour_start(stop), end))
    return (first, stop), edges


def _hours(table: Any, hours: tuple[int | None, int | None]) -> list[ColumnElement[bool]]:
    first, stop = hours
    conditions: list[ColumnElement[bool]] = []
    if first is not None:
        conditions.append(table.c.hour >= first)
    if stop is not None:
        conditions.append(table.c.hour < stop)
    return conditions


def rolled_totals(conn: Connection, hours: tuple[int | None, int | None],
                  user_id: int | None = None) -> dict[str, int]:
    """Requests, cost and input+output tokens over whole hours (one user, or everyone)."""
    table = channel_hours if user_id is None else user_hours
    conditions = _hours(table, hours)
    if user_id is not None:
        conditions.append(table.c.user_id == user_id)
    row = conn.execute(
        select(func.coalesce(func.sum(table.c.requests), 0),
               func.coalesce(func.sum(table.c.cost_nanos), 0),
               func.coalesce(func.sum(table.c.input_tokens + table.c.output_tokens), 0))
        .where(and_(true(), *conditions))).one()
    return {"requests": int(row[0]), "cost_nanos": int(row[1]), "tokens": int(row[2])}


def rolled_pairs(conn: Connection, hours: tuple[int | None, int | None]
                 ) -> list[tuple[int | None, int | None, dict[str, int]]]:
    """Channel-usage totals per (user channel, channel) over whole hours (id 0 -> None)."""
    t = channel_hours
    rows = conn.execute(
        select(t.c.user_channel_id, t.c.channel_id, func.sum(t.c.requests),
               func.sum(t.c.input_tokens), func.sum(t.c.output_tokens),
               func.sum(t.c.cached_input_tokens), func.sum(t.c.cost_nanos))
        .where(and_(true(), *_hours(t, hours)))
        .group_by(t.c.user_channel_id, t.c.channel_id)).all()
    return [(row[0] or None, row[1] or None, {
        "request_count": int(row[2]), "input_tokens": int(row[3]),
        "output_tokens": int(row[4]), "cached_input_tokens": int(row[5]),
        "cost_nanos": int(row[6])}) for row in rows]


# --- reconciliation ---------------------------------------------------------------------------

def _stored(conn: Connection, table: Any, keys: Sequence[str]) -> dict[tuple[int, ...],
                                                                         tuple[int, ...]]:
    return {tuple(int(v) for v in row[:len(keys)]): tuple(int(v) for v in row[len(keys):])
            for row in conn.execute(select(*(table.c[k] for k in keys),
                                           *(table.c[m] for m in ROLLUP_MEASURES)))}


def differences(conn: Connection) -> list[str]:
    """Every rollup row that does not equal the sums recomputed from the raw usage rows."""
    logs = schema.usage_logs
    entries = [entry(dict(row), hour_of(row["created_at"])) for row in conn.execute(
        select(logs.c.created_at, logs.c.user_id, logs.c.user_channel_id, logs.c.channel_id,
               logs.c.input_tokens, logs.c.output_tokens, logs.c.cached_input_tokens,
               logs.c.cost_nanos)).mappings()]
    users, channels = _sum(entries, 1)
    found: list[str] = []
    for name, table, keys, wanted in (
            ("user", user_hours, ("user_id", "hour"), users),
            ("channel", channel_hours, ("hour", "user_channel_id", "channel_id"), channels)):
        expected = {row[:len(keys)]: row[len(keys):] for row in wanted}
        stored = _stored(conn, table, keys)
        for key in sorted(set(expected) | set(stored)):
            if expected.get(key) != stored.get(key):
                found.append(f"{name} rollup {key}: stored {stored.get(key)}, "
                             f"raw rows {expected.get(key)}")
    return found
