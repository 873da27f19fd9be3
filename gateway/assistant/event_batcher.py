"""Run events written in group commits (agents contract §1.10; the settler's pattern), runs'
starts and finishes included.

Why: with many runs in flight one transaction per event is most of a round's overhead -- each
commit is a thread hop and database work on a thread that competes with the reactor for the
interpreter. ``EventBatcher.write`` queues the event and answers once it is committed; events
queued while a batch is being written go into the next batch, so a busy node writes many runs'
events per transaction and an idle node still writes at once (no artificial delay). A batch is
a fixed handful of statements however large (``gateway/store/assistant/event_batches.py``): the
items keep the order they were queued in, an ended run gets none of its items written, and the
runs' rows are locked first, so ``seq`` order and "no event after the terminal one" hold across
nodes too. The bus announcement happens after the batch commits (``RunService.announce``: one
per run, its newest row). A batch that fails is retried item by item, so one bad event fails
only its own writer. Batches go through the database's lean path
(``DBRunner.driver_transaction``: plain DB-API statements).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from twisted.internet.defer import Deferred
from twisted.logger import Logger

from gateway.store.assistant.event_batches import Answer, PendingEvent, append_batch
from gateway.store.assistant.rows import RunEventRow, RunRow
from gateway.store.driver_sql import DriverSQL
from gateway.store.pool import DBRunner

log = Logger()

#: most events written in one transaction
MAX_BATCH = 200


@dataclass
class _Item:
    #: what the batch writes, made once when queued
    pending: PendingEvent
    done: Deferred[RunEventRow | None] = field(default_factory=Deferred)


def _write_all(sql: DriverSQL, items: list[_Item]) -> list[RunEventRow | None]:
    return append_batch(sql, [item.pending for item in items])


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
              values: dict[str, Any] | None, now: datetime, *, starts: bool = False,
              answer: Answer | None = None) -> Deferred[RunEventRow | None]:
        """Queue one event (``starts``: the run's start; ``answer``: its finish, see
        ``event_batches``); answers the row once committed, None when it was not written."""
        item = _Item(PendingEvent(run.id, run.session_id, event, payload, dict(values or {}),
                                  now, starts, answer))
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
            rows = await self.db.driver_transaction(_write_all, batch)
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
                [row] = await self.db.driver_transaction(_write_all, [item])
            except Exception as exc:
                item.done.errback(exc)
                continue
            if row is not None:
                self.announce([row])
            item.done.callback(row)
