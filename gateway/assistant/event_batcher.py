"""Run events written in group commits (agents contract §1.10; the settler's pattern).

Why: every run event is a durable row the run waits for before its next step, and with many
runs in flight one transaction per event is most of a round's overhead -- each commit is a
thread hop and (on SQLite) a sync.  ``EventBatcher.write`` queues the event and answers once
it is committed; events queued while a batch is being written go into the next batch, so a
busy node writes many runs' events per transaction and an idle node still writes at once (no
artificial delay).  Within a batch the items are written in the order they were queued, each
with the same steps as before (skip an ended run, progress columns, tool-call detail merge,
``seq`` = stored max + 1), so ``seq`` order and "no event after the terminal one" hold.  The
bus announcement of each row happens after its batch commits, as before.  A batch that fails
is retried item by item, so one bad event fails only its own writer.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from twisted.internet.defer import Deferred
from twisted.logger import Logger

from gateway.store.assistant import run_outcomes
from gateway.store.assistant.rows import RunEventRow, RunRow
from gateway.store.assistant.runs import append_event, find_run, transition
from gateway.store.pool import DBRunner

log = Logger()

#: most events written in one transaction
MAX_BATCH = 200


@dataclass
class _Item:
    run: RunRow
    event: str
    payload: dict[str, Any]
    values: dict[str, Any]
    now: datetime
    done: Deferred[RunEventRow | None] = field(default_factory=Deferred)


def write_event(conn: Any, item: _Item) -> RunEventRow | None:
    """One progress event of a live run (none once the run has ended)."""
    current = find_run(conn, item.run.id)
    if current is None or not current.active:
        return None
    if item.values:
        transition(conn, item.run.id, item.values, item.now)
    if item.event == "tool_call":
        run_outcomes.merge_detail(conn, item.run.id, item.payload, item.now)
    return append_event(conn, item.run.id, item.run.session_id, item.event, item.payload,
                        item.now)


def _write_all(conn: Any, items: list[_Item]) -> list[RunEventRow | None]:
    return [write_event(conn, item) for item in items]


@dataclass
class EventBatcher:
    db: DBRunner
    #: the real reactor: a batch starts on its next turn (never on a test's fake clock)
    reactor: Any
    #: called with the committed rows of each batch, in order (the bus announcement)
    announce: Callable[[list[RunEventRow]], None]
    max_batch: int = MAX_BATCH
    _queue: list[_Item] = field(default_factory=list)
    _writing: bool = False
    _scheduled: Any = None
    #: sizes of the batches written (stats and tests)
    batch_sizes: list[int] = field(default_factory=list)

    def write(self, run: RunRow, event: str, payload: dict[str, Any],
              values: dict[str, Any] | None, now: datetime) -> Deferred[RunEventRow | None]:
        item = _Item(run, event, payload, dict(values or {}), now)
        self._queue.append(item)
        self._schedule()
        return item.done

    def _schedule(self) -> None:
        if self._writing or self._scheduled is not None or not self._queue:
            return
        # the rest of this reactor turn may queue more events: they join this batch
        self._scheduled = self.reactor.callLater(0, self._flush)

    def _flush(self) -> None:
        self._scheduled = None
        batch, self._queue = self._queue[:self.max_batch], self._queue[self.max_batch:]
        self._writing = True
        self.batch_sizes.append(len(batch))
        del self.batch_sizes[:-1000]
        Deferred.fromCoroutine(self._commit(batch)).addBoth(self._written)

    def _written(self, _result: Any) -> None:
        self._writing = False
        self._schedule()

    async def _commit(self, batch: list[_Item]) -> None:
        try:
            rows = await self.db.transaction(_write_all, batch)
        except Exception:
            log.failure("a run event batch failed; writing its events one by one")
            await self._one_by_one(batch)
            return
        self.announce([row for row in rows if row is not None])
        for item, row in zip(batch, rows, strict=True):
            item.done.callback(row)

    async def _one_by_one(self, batch: list[_Item]) -> None:
        for item in batch:
            try:
                row = await self.db.transaction(write_event, item)
            except Exception as exc:
                item.done.errback(exc)
                continue
            if row is not None:
                self.announce([row])
            item.done.callback(row)
