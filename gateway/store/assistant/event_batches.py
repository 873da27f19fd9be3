"""Progress events of many runs appended in one transaction (agents contract §1.9, §1.10).

Why its own module: the group-commit writer (``gateway/assistant/event_batcher.py``) hands
over whole batches, and a batch costs a fixed handful of statements however many events and
runs it holds: the runs' rows are read and locked once, ``seq`` is read once per batch, the
events go in with one multi-row insert, and each run's row (progress columns, merged tool-call
details) is updated once.

Why the lock: several nodes append events to one run -- the worker on one node, a stop, an
approval or a lease sweep on another.  The run's row is read ``FOR UPDATE`` (runs in id order,
so two batches never wait on each other in a circle) before anything else, which on
PostgreSQL makes "the run is still active" and "``seq`` = stored maximum + 1" hold until the
commit: a stop elsewhere either commits first (then the batch sees the run ended and writes
nothing for it) or waits for the batch (then its ``cancelled`` event numbers after the batch's
events).  Every other append (start, finish, fail, cancel) first moves the run with a guarded
``UPDATE``, which takes the same row lock.  SQLite has one writer at a time and needs none.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import func, select, update
from sqlalchemy.engine import Connection

from gateway.store import schema
from gateway.store.assistant.rows import ACTIVE_RUN_STATUSES, RunEventRow

RUNS = schema.assistant_runs
EVENTS = schema.assistant_run_events


@dataclass(frozen=True)
class PendingEvent:
    """One event a live run wants written; ``values`` are run columns to set with it."""

    run_id: str
    session_id: str
    event: str
    payload: Any
    values: dict[str, Any]
    now: datetime


def merged_details(details: list[dict[str, Any]], detail: dict[str, Any]
                   ) -> list[dict[str, Any]]:
    """§1.9: details merged by tool-call id; a later one overwrites, keeping the earlier
    non-empty ``result``/``arguments`` when it has none."""
    out = list(details)
    for index, known in enumerate(out):
        if known.get("id") == detail.get("id"):
            merged = {**known, **detail}
            for key in ("result", "arguments"):
                if not detail.get(key) and known.get(key):
                    merged[key] = known[key]
            out[index] = merged
            return out
    out.append(detail)
    return out


def lock_active_runs(conn: Connection, run_ids: list[str]) -> dict[str, list[dict[str, Any]]]:
    """The active runs among ``run_ids``, locked until the commit: id -> tool-call details."""
    rows = conn.execute(select(RUNS.c.id, RUNS.c.status, RUNS.c.tool_call_details)
                        .where(RUNS.c.id.in_(sorted(run_ids))).order_by(RUNS.c.id)
                        .with_for_update())
    return {run_id: list(details or []) for run_id, status, details in rows
            if status in ACTIVE_RUN_STATUSES}


def append_batch(conn: Connection, items: list[PendingEvent]) -> list[RunEventRow | None]:
    """Write ``items`` in order; None for each item whose run has ended (nothing written)."""
    run_ids = list(dict.fromkeys(item.run_id for item in items))
    details = lock_active_runs(conn, run_ids)
    live = [run_id for run_id in run_ids if run_id in details]
    if not live:
        return [None] * len(items)
    last_seq = dict(conn.execute(
        select(EVENTS.c.run_id, func.max(EVENTS.c.seq)).where(EVENTS.c.run_id.in_(live))
        .group_by(EVENTS.c.run_id)).all())
    changes: dict[str, dict[str, Any]] = {}
    rows: list[dict[str, Any]] = []
    for item in items:
        if item.run_id not in details:
            continue
        change = changes.setdefault(item.run_id, {})
        change.update(item.values)
        change["updated_at"] = item.now
        if item.event == "tool_call" and isinstance(item.payload, dict):
            details[item.run_id] = merged_details(details[item.run_id], item.payload)
            change["tool_call_details"] = details[item.run_id]
            change["tool_calls"] = len(details[item.run_id])
        seq = int(last_seq.get(item.run_id) or 0) + 1
        last_seq[item.run_id] = seq
        rows.append({"run_id": item.run_id, "session_id": item.session_id, "seq": seq,
                     "event": item.event, "payload": item.payload, "created_at": item.now})
    # one multi-row INSERT ... RETURNING; the keys are matched by (run, seq), never by the
    # order the database returns them in
    keys = {(run_id, seq): key for key, run_id, seq in conn.execute(
        EVENTS.insert().returning(EVENTS.c.id, EVENTS.c.run_id, EVENTS.c.seq), rows)}
    for run_id, change in changes.items():
        conn.execute(update(RUNS).where(RUNS.c.id == run_id).values(**change))
    written = iter(RunEventRow(id=int(keys[row["run_id"], row["seq"]]), **row) for row in rows)
    return [next(written) if item.run_id in details else None for item in items]
