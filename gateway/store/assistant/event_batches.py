"""Events of many runs appended in one transaction, runs' starts and finishes included
(agents contract §1.8 steps 2 and 10, §1.9, §1.10).

Why its own module: the group-commit writer (``gateway/assistant/event_batcher.py``) hands
over whole batches, and a batch costs a fixed handful of statements however many events and
runs it holds: the runs' rows are read and locked once, ``seq`` is read once per batch, the
events go in with one multi-row insert, each run's row (progress columns, merged tool-call
details) is updated once -- runs changing the same columns in one ``executemany`` -- and the
finished runs' assistant messages in one ``executemany``.

Why starts and finishes go through it too: they are the two writes every run makes besides its
events, and with many runs at once a transaction each queues in front of every run's rounds.
A start (``queued -> running``) is written only while the run is still queued; a finish (the
``done`` event: ``completed``, the answer into the assistant message) only while the run is
active, and nothing of that run is written after it.  A finish that comes too late (the run was
stopped meanwhile) still records the run's cost when it is higher than the stored one.

Why the lock: several nodes append events to one run -- the worker on one node, a stop, an
approval or a lease sweep on another.  The run's row is read ``FOR UPDATE`` (runs in id order,
so two batches never wait on each other in a circle) before anything else, which on
PostgreSQL makes "the run is still active" and "``seq`` = stored maximum + 1" hold until the
commit: a stop elsewhere either commits first (then the batch sees the run ended and writes
nothing for it) or waits for the batch (then its ``cancelled`` event numbers after the batch's
events).  Every other append (fail, cancel) first moves the run with a guarded ``UPDATE``,
which takes the same row lock.  SQLite has one writer at a time and needs none.

Why plain DB-API statements (``DriverSQL``, run by ``DBRunner.driver_transaction``): a batch is
written for every few rounds of every run, and SQLAlchemy's Python per execution (statement
building, cache keys, bind and result processing) cost more than SQLite's own work, on the
thread that shares the core with the reactor.  The SQL text is fixed per shape and cached;
values are converted exactly as the column types do (``driver_rows``), so rows written here
read back the same through Core.  A value a type refuses fails the batch with
``StatementError``, as Core's bind would.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

import orjson

from gateway.store import schema
from gateway.store.assistant.driver_rows import DriverTable, json_text, time_param
from gateway.store.assistant.rows import ACTIVE_RUN_STATUSES, RunEventRow
from gateway.store.driver_sql import DriverSQL

RUNS = DriverTable(schema.assistant_runs)


@dataclass(frozen=True)
class Answer:
    """What a finish writes besides the run's columns: the assistant message's columns and
    the cost to keep if the run ended before the finish got to it."""

    message_id: str
    message: dict[str, Any]
    cost_nanos: int


@dataclass(frozen=True)
class PendingEvent:
    """One event a live run wants written; ``values`` are run columns to set with it."""

    run_id: str
    session_id: str
    event: str
    payload: Any
    values: dict[str, Any]
    now: datetime
    #: the run's start: written only while the run is queued (``values`` make it running)
    starts: bool = False
    #: the run's finish: its last event (``values`` end the run)
    answer: Answer | None = None


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


@dataclass
class _Live:
    """An active run as the batch goes through its items."""

    status: str
    details: list[dict[str, Any]]


def lock_active_runs(sql: DriverSQL, run_ids: list[str]) -> dict[str, _Live]:
    """The active runs among ``run_ids``, locked until the commit."""
    rows = sql.all(f"SELECT id, status, tool_call_details FROM assistant_runs "
                   f"WHERE id IN ({sql.marks(len(run_ids))}) ORDER BY id{sql.for_update()}",
                   sorted(run_ids))
    return {run_id: _Live(status, list(orjson.loads(details) or []) if details else [])
            for run_id, status, details in rows if status in ACTIVE_RUN_STATUSES}


def _writes(live: dict[str, _Live], item: PendingEvent) -> bool:
    """Whether ``item`` is written, and what it does to its run's state in this batch."""
    run = live.get(item.run_id)
    if run is None or (item.starts and run.status != "queued"):
        return False
    run.status = item.values.get("status", run.status)
    if item.answer is not None:
        del live[item.run_id]  # ended: nothing of it after its last event
    return True


#: a finished run's assistant message, one ``executemany`` per batch
_ANSWER = ("UPDATE assistant_messages SET content = ?, content_parts = ?, tool_calls = ?, "
           "updated_at = ? WHERE session_id = ? AND id = ?")
#: a finish that came after the run ended keeps the higher cost (``run_outcomes.record_cost``)
_RECORD_COST = ("UPDATE assistant_runs SET cost_nanos = ?, updated_at = ? "
                "WHERE id = ? AND cost_nanos < ?")


def _update_runs(sql: DriverSQL, changes: dict[str, dict[str, Any]]) -> None:
    """Each run's changed columns; runs that change the same columns (most of a batch: a
    ``model_round``, a tool call) share one ``executemany``."""
    groups: dict[tuple[str, ...], list[list[Any]]] = {}
    for run_id, change in changes.items():
        columns = tuple(sorted(change))  # each name checked against the table by ``params``
        groups.setdefault(columns, []).append(
            [*RUNS.params(columns, change, sql.dialect), run_id])
    for columns, parameters in groups.items():
        sql.many(f"UPDATE assistant_runs SET {', '.join(f'{name} = ?' for name in columns)} "
                 f"WHERE id = ?", parameters)


def _insert_events(sql: DriverSQL, rows: list[dict[str, Any]]) -> dict[tuple[str, int], int]:
    """One multi-row ``INSERT ... RETURNING``; the keys by (run, seq), never by the order the
    database returns them in."""
    values: list[Any] = []
    for row in rows:
        values += [row["run_id"], row["session_id"], row["seq"], row["event"],
                   json_text(row["payload"]), time_param(row["created_at"], sql.dialect)]
    one = f"({sql.marks(6)})"
    return {(run_id, int(seq)): int(key) for key, run_id, seq in sql.all(
        f"INSERT INTO assistant_run_events (run_id, session_id, seq, event, payload, "
        f"created_at) VALUES {', '.join([one] * len(rows))} RETURNING id, run_id, seq",
        values)}


def append_batch(sql: DriverSQL, items: list[PendingEvent]) -> list[RunEventRow | None]:
    """Write ``items`` in order; None for each item not written (its run has ended, or a
    start found the run no longer queued)."""
    run_ids = list(dict.fromkeys(item.run_id for item in items))
    live = lock_active_runs(sql, run_ids)
    details = {run_id: run.details for run_id, run in live.items()}
    written = [_writes(live, item) for item in items]
    late = [[item.answer.cost_nanos, time_param(item.now, sql.dialect), item.run_id,
             item.answer.cost_nanos] for item, wrote in zip(items, written, strict=True)
            if not wrote and item.answer is not None and item.answer.cost_nanos]
    sql.many(_RECORD_COST, late)
    runs = list(dict.fromkeys(item.run_id for item, wrote in zip(items, written, strict=True)
                              if wrote))
    if not runs:
        return [None] * len(items)
    last_seq = {run_id: int(seq) for run_id, seq in sql.all(
        f"SELECT run_id, MAX(seq) FROM assistant_run_events "
        f"WHERE run_id IN ({sql.marks(len(runs))}) GROUP BY run_id", runs)}
    changes: dict[str, dict[str, Any]] = {}
    rows: list[dict[str, Any]] = []
    answers: list[list[Any]] = []
    for item, wrote in zip(items, written, strict=True):
        if not wrote:
            continue
        change = changes.setdefault(item.run_id, {})
        if item.event == "tool_call" and isinstance(item.payload, dict):
            details[item.run_id] = merged_details(details[item.run_id], item.payload)
            change.update(tool_call_details=details[item.run_id],
                          tool_calls=len(details[item.run_id]))
        change.update(item.values)
        change["updated_at"] = item.now
        if item.answer is not None:
            message = item.answer.message
            answers.append([message["content"], json_text(message["content_parts"]),
                            json_text(message["tool_calls"]),
                            time_param(item.now, sql.dialect), item.session_id,
                            item.answer.message_id])
        seq = last_seq.get(item.run_id, 0) + 1
        last_seq[item.run_id] = seq
        rows.append({"run_id": item.run_id, "session_id": item.session_id, "seq": seq,
                     "event": item.event, "payload": item.payload, "created_at": item.now})
    keys = _insert_events(sql, rows)
    _update_runs(sql, changes)
    sql.many(_ANSWER, answers)
    stored = iter(RunEventRow(id=keys[row["run_id"], row["seq"]], **row) for row in rows)
    return [next(stored) if wrote else None for wrote in written]
