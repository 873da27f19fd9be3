"""The ``text`` events of one streamed model round (agents contract §1.7, §1.8 step 7, §1.10).

Why coalesce: a streamed round produces a content delta per upstream chunk, often many per
network read.  Chat mode writes each one to the client's SSE at once (no ``reactor``).  A run
persists its events through the group-commit writer; there the deltas that arrive within one
reactor turn are joined into one ``text`` event (a delta is any slice of the text, so the
joined events still concatenate to the round's content, in order) -- fewer rows, one batch.
``flush()`` is called before the loop emits anything else, so a round's text always precedes
its ``tool_call`` events.
"""

from __future__ import annotations

from typing import Any

from twisted.internet.defer import Deferred, DeferredList, ensureDeferred
from twisted.logger import Logger

log = Logger()


class TextDeltas:
    def __init__(self, sink: Any, round_number: int, *, with_round: bool,
                 reactor: Any = None) -> None:
        self.sink = sink
        self.round = round_number
        self.with_round = with_round
        self.reactor = reactor
        #: deltas received (``events`` may be fewer: coalesced)
        self.received = 0
        self.events = 0
        self._pending: list[str] = []
        self._scheduled: Any = None
        self._emitted: list[Deferred[Any]] = []
        self.closed = False

    def add(self, delta: str) -> None:
        if self.closed:
            return
        self.received += 1
        self._pending.append(delta)
        if self.reactor is None:
            self.flush()
        elif self._scheduled is None:
            self._scheduled = self.reactor.callLater(0, self.flush)

    def flush(self) -> None:
        if self._scheduled is not None:
            if self._scheduled.active():
                self._scheduled.cancel()
            self._scheduled = None
        if not self._pending or self.closed:
            return
        payload: dict[str, Any] = {"delta": "".join(self._pending)}
        self._pending = []
        if self.with_round:
            payload["round"] = self.round
        self.events += 1
        emitted = ensureDeferred(self.sink.emit("text", payload))
        emitted.addErrback(lambda f: log.failure("a text event failed", f))
        self._emitted.append(emitted)

    async def close(self, *, drop: bool = False) -> None:
        """The round ended: the rest goes out (or, on a cancel, is dropped); waits for the
        events emitted so far."""
        if drop:
            self._pending = []
        self.flush()
        self.closed = True
        emitted, self._emitted = self._emitted, []
        await DeferredList(emitted)
