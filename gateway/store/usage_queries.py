"""Reads over ``usage_logs``: filtered log pages, stats aggregates, per-channel usage, deletion.

The log table is the biggest table Lockgate has (a million rows is ordinary), so every query
here is shaped for its indexes -- (user_id | api_key_id | channel_id | user_channel_id |
model_name, created_at) and (created_at):

- the model filter is a case-insensitive substring (contract §1.4), which no B-tree index can
  serve directly.  Instead the distinct logged model names are walked through the model
  rollup's (model_name, hour) key one ``MIN(model_name) > ?`` probe at a time (one index
  seek per distinct name, not a table scan), matched in Python, and the page is then
  read with ``model_name IN (...)`` -- an indexed lookup.  Deployments with an unusual number
  of distinct names fall back to ``lower(model_name) LIKE``;
- pages are ``created_at DESC, id DESC`` with LIMIT/OFFSET; time bounds are half-open ranges
  on ``created_at``;
- aggregates (stats, channel usage, and a page's ``total`` when the filter is time plus one
  user or user channel / channel) read the hourly / daily rollups (``usage_rollups``, kept by
  the settlement batch) for the whole days and hours of the range and the raw rows only for
  the ragged edges, so they cost the same at 10 M rows as at 10 k and stay exact.

Every function takes a ``Connection`` (run through ``DBRunner.transaction``) and returns plain
values.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import and_, delete, func, select, true
from sqlalchemy.engine import Connection
from sqlalchemy.sql.elements import ColumnElement

from gateway.store import schema, usage_rollups
from gateway.store.driver_sql import DriverSQL

logs = schema.usage_logs

#: above this many distinct logged model names the substring filter uses LIKE instead
DISTINCT_NAME_PROBES = 2000
#: rows removed per statement by the retention job (keeps each lock short)
DELETE_BATCH = 5000
#: every table holding a kind of log row; ``DELETE /api/logs`` empties those that exist
LOG_TABLES = ("usage_logs", "status_checks", "audit_logs", "plugin_logs",
              "scheduled_task_runs")


@dataclass(frozen=True)
class LogFilter:
    """What a log query may be narrowed by (all optional; ``end`` is exclusive)."""

    user_id: int | None = None
    api_key_id: int | None = None
    user_channel_id: int | None = None
    channel_id: int | None = None
    #: case-insensitive substring of the logged model name
    model: str | None = None
    start: datetime | None = None
    end: datetime | None = None


def model_names_containing(conn: Connection, needle: str) -> list[str] | None:
    """The distinct logged model names containing ``needle`` (case-insensitive), or ``None``
    when there are too many distinct names to walk (the caller then uses LIKE).

    Walks the model rollup's primary key (every logged name is there), one plain
    ``MIN(model_name) > ?`` probe per name."""
    wanted = needle.lower()
    found: list[str] = []
    sql = DriverSQL(conn)
    try:
        [(current,)] = sql.all("SELECT min(model_name) FROM usage_rollup_model_hours")
        for _ in range(DISTINCT_NAME_PROBES):
            if current is None:
                return found
            if wanted in current.lower():
                found.append(current)
            [(current,)] = sql.all("SELECT min(model_name) FROM usage_rollup_model_hours "
                                   "WHERE model_name > ?", [current])
    finally:
        sql.close()
    return None


def _like_pattern(needle: str) -> str:
    escaped = needle.lower().replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return f"%{escaped}%"


def _conditions(flt: LogFilter, names: list[str] | None) -> list[ColumnElement[bool]] | None:
    """SQL conditions for ``flt`` (``names``: the model names its model filter matches, None
    for too many); ``None`` when nothing can match."""
    conditions: list[ColumnElement[bool]] = []
    for column, value in ((logs.c.user_id, flt.user_id), (logs.c.api_key_id, flt.api_key_id),
                          (logs.c.user_channel_id, flt.user_channel_id),
                          (logs.c.channel_id, flt.channel_id)):
        if value is not None:
            conditions.append(column == value)
    if flt.start is not None:
        conditions.append(logs.c.created_at >= flt.start)
    if flt.end is not None:
        conditions.append(logs.c.created_at < flt.end)
    if flt.model:
        if names is None:
            conditions.append(func.lower(logs.c.model_name).like(_like_pattern(flt.model),
                                                                 escape="\\"))
        elif not names:
            return None
        else:
            conditions.append(logs.c.model_name.in_(names))
    return conditions


def list_logs(conn: Connection, flt: LogFilter, *, limit: int, offset: int = 0,
              with_total: bool = True) -> dict[str, Any]:
    """``{"items": [row dicts], "total": n}`` newest first (``total`` None without it)."""
    names = model_names_containing(conn, flt.model) if flt.model else None
    conditions = _conditions(flt, names)
    if conditions is None:
        return {"items": [], "total": 0 if with_total else None}
    where = and_(true(), *conditions)
    rows = conn.execute(
        select(logs).where(where)
        .order_by(logs.c.created_at.desc(), logs.c.id.desc())
        .limit(limit).offset(offset)
    ).mappings().all()
    total = None
    if with_total:
        total = _rolled_count(conn, flt, names)
        if total is None:
            total = conn.execute(select(func.count()).select_from(logs).where(where)
                                 ).scalar_one()
    return {"items": [dict(row) for row in rows], "total": total}


def _rolled_count(conn: Connection, flt: LogFilter, names: list[str] | None) -> int | None:
    """The number of rows ``flt`` matches, from the rollups when they hold its dimensions
    (time, and one of: a user, user channel / channel, or model names); None when they do
    not."""
    if flt.api_key_id is not None or 0 in (flt.user_channel_id, flt.channel_id):
        return None  # (id 0 is how the rollups spell "none")
    if flt.model:
        if names is None or flt.user_id is not None or flt.user_channel_id is not None \
                or flt.channel_id is not None:
            return None
        return ranged_totals(conn, flt.start, flt.end, models=names)["requests"]
    if flt.user_id is not None and (flt.user_channel_id is not None
                                    or flt.channel_id is not None):
        return None
    return ranged_totals(conn, flt.start, flt.end, flt.user_id, flt.user_channel_id,
                         flt.channel_id)["requests"]


def _totals(conn: Connection, *conditions: ColumnElement[bool]) -> dict[str, int]:
    row = conn.execute(
        select(func.count(), func.coalesce(func.sum(logs.c.cost_nanos), 0),
               func.coalesce(func.sum(logs.c.input_tokens + logs.c.output_tokens), 0))
        .select_from(logs).where(and_(true(), *conditions))
    ).one()
    return {"requests": int(row[0]), "cost_nanos": int(row[1]), "tokens": int(row[2])}


def _time(start: datetime | None, end: datetime | None) -> list[ColumnElement[bool]]:
    conditions: list[ColumnElement[bool]] = []
    if start is not None:
        conditions.append(logs.c.created_at >= start)
    if end is not None:
        conditions.append(logs.c.created_at < end)
    return conditions


def ranged_totals(conn: Connection, start: datetime | None = None, end: datetime | None = None,
                  user_id: int | None = None, user_channel_id: int | None = None,
                  channel_id: int | None = None,
                  models: list[str] | None = None) -> dict[str, int]:
    """Requests, cost and tokens in ``[start, end)`` (one user, some model names, or everyone
    optionally narrowed to a user channel / channel): whole days and hours from the rollups,
    the ragged edges (under an hour each) from the raw rows -- exact either way."""
    narrow = [column == value for column, value in (
        (logs.c.user_id, user_id), (logs.c.user_channel_id, user_channel_id),
        (logs.c.channel_id, channel_id)) if value is not None]
    if models is not None:
        narrow.append(logs.c.model_name.in_(models))
    totals = {"requests": 0, "cost_nanos": 0, "tokens": 0}
    days = user_id is None and models is None
    for level, span in usage_rollups.plan(start, end, days=days):
        if level == "raw":
            part = _totals(conn, *narrow, *_time(*span))
        else:
            part = usage_rollups.rolled_totals(conn, level, span, user_id, user_channel_id,
                                               channel_id, models)
        for name in totals:
            totals[name] += part[name]
    return totals


def daily_trend(conn: Connection, days: list[tuple[str, datetime, datetime]],
                user_id: int | None = None) -> list[dict[str, Any]]:
    """``[{date, requests, cost_nanos}]`` for each (label, start, end) day window."""
    trend = []
    for label, start, end in days:
        totals = ranged_totals(conn, start, end, user_id)
        trend.append({"date": label, "requests": totals["requests"],
                      "cost_nanos": totals["cost_nanos"]})
    return trend


def admin_stats(conn: Connection, today: datetime,
                days: list[tuple[str, datetime, datetime]]) -> dict[str, Any]:
    """Counts and money for ``GET /api/stats`` (console contract §5.1)."""
    s = schema
    everything = ranged_totals(conn)
    today_totals = ranged_totals(conn, today)
    revenue = conn.execute(
        select(func.coalesce(func.sum(s.orders.c.amount_nanos), 0))
        .where(s.orders.c.status == "paid")
    ).scalar_one()
    return {
        "users": conn.execute(select(func.count()).select_from(s.users)).scalar_one(),
        "channels": conn.execute(select(func.count()).select_from(s.channels)).scalar_one(),
        "total_requests": everything["requests"],
        "total_cost_nanos": everything["cost_nanos"],
        "today_requests": today_totals["requests"],
        "today_cost_nanos": today_totals["cost_nanos"],
        "revenue_nanos": int(revenue),
        "trend": daily_trend(conn, days),
    }


def user_stats(conn: Connection, user_id: int, today: datetime, minute_ago: datetime,
               days: list[tuple[str, datetime, datetime]]) -> dict[str, Any]:
    """The caller's usage numbers for ``GET /api/user/stats`` (console contract §4.3)."""
    everything = ranged_totals(conn, user_id=user_id)
    last_minute = _totals(conn, logs.c.user_id == user_id, logs.c.created_at >= minute_ago)
    return {
        "total_requests": everything["requests"],
        "total_cost_nanos": everything["cost_nanos"],
        "today_requests": ranged_totals(conn, today, user_id=user_id)["requests"],
        "rpm": last_minute["requests"],
        "tpm": last_minute["tokens"],
        "trend": daily_trend(conn, days, user_id),
    }


def _usage_pairs(conn: Connection, start: datetime | None,
                 end: datetime | None) -> list[tuple[int | None, int | None, dict[str, int]]]:
    """Totals per (user channel, channel) pair for both views: whole hours from the rollup,
    the edges of ``[start, end)`` from the raw rows."""
    pairs = []
    for level, span in usage_rollups.plan(start, end, days=True):
        pairs.extend(_raw_pairs(conn, _time(*span)) if level == "raw"
                     else usage_rollups.rolled_pairs(conn, level, span))
    return pairs


def _raw_pairs(conn: Connection, conditions: list[ColumnElement[bool]]
               ) -> list[tuple[int | None, int | None, dict[str, int]]]:
    rows = conn.execute(
        select(logs.c.user_channel_id, logs.c.channel_id, func.count(),
               func.coalesce(func.sum(logs.c.input_tokens), 0),
               func.coalesce(func.sum(logs.c.output_tokens), 0),
               func.coalesce(func.sum(logs.c.cached_input_tokens), 0),
               func.coalesce(func.sum(logs.c.cost_nanos), 0))
        .where(and_(true(), *conditions))
        .group_by(logs.c.user_channel_id, logs.c.channel_id)
    ).all()
    return [(row[0], row[1], {"request_count": int(row[2]), "input_tokens": int(row[3]),
                              "output_tokens": int(row[4]), "cached_input_tokens": int(row[5]),
                              "cost_nanos": int(row[6])}) for row in rows]


def _add(into: dict[int, dict[str, int]], key: int | None, usage: dict[str, int]) -> None:
    if key is None:
        return
    target = into.setdefault(int(key), dict.fromkeys(usage, 0))
    for name, value in usage.items():
        target[name] += value


def channel_usage(conn: Connection, start: datetime | None = None,
                  end: datetime | None = None) -> dict[str, Any]:
    """Every user channel and upstream channel with its usage totals (contract §5.3)."""
    s = schema
    user_channels = [dict(r) for r in conn.execute(
        select(s.user_channels).order_by(s.user_channels.c.name, s.user_channels.c.id)
    ).mappings()]
    channels = [dict(r) for r in conn.execute(
        select(s.channels).order_by(s.channels.c.priority.desc(), s.channels.c.weight.desc(),
                                    s.channels.c.name, s.channels.c.id)
    ).mappings()]
    by_user_channel: dict[int, dict[str, int]] = {}
    by_channel: dict[int, dict[str, int]] = {}
    for uc_id, channel_id, usage in _usage_pairs(conn, start, end):
        _add(by_user_channel, uc_id, usage)
        _add(by_channel, channel_id, usage)
    return {"user_channels": user_channels, "channels": channels,
            "by_user_channel": by_user_channel, "by_channel": by_channel}


def delete_all_logs(conn: Connection) -> int:
    """Empty every log table that exists (``DELETE /api/logs``); returns the rows removed."""
    usage_rollups.clear(conn)
    deleted = 0
    for name in LOG_TABLES:
        table = schema.metadata.tables.get(name)
        if table is not None:
            deleted += conn.execute(delete(table)).rowcount or 0
    return deleted


def delete_usage_before(conn: Connection, cutoff: datetime, batch: int = DELETE_BATCH) -> int:
    """Remove up to ``batch`` usage rows older than ``cutoff``; returns how many went."""
    ids = select(logs.c.id, logs.c.created_at, logs.c.user_id, logs.c.user_channel_id,
                 logs.c.channel_id, logs.c.input_tokens, logs.c.output_tokens,
                 logs.c.cached_input_tokens, logs.c.cost_nanos, logs.c.model_name).where(
        logs.c.created_at < cutoff).order_by(logs.c.created_at).limit(batch)
    rows = [dict(row) for row in conn.execute(ids).mappings()]
    if not rows:
        return 0
    doomed = [row["id"] for row in rows]
    usage_rollups.subtract_logged(conn, rows)
    return conn.execute(delete(logs).where(logs.c.id.in_(doomed))).rowcount or 0
