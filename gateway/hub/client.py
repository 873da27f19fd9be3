"""``SharedState`` of a ``--workers`` process: every call goes to the supervisor's hub.

The third implementation beside ``MemoryState`` (one process) and ``RedisState`` (a fleet):
same semantics, because the hub runs a ``MemoryState`` for all the workers of one machine
(``gateway.hub.server``).  The connection is a Unix socket the supervisor made before it
started the worker, so there is no reconnecting: a worker whose hub is gone cannot admit
anything exactly any more, so ``available`` turns False (admission and ``/readyz`` fail closed)
and ``lost`` fires -- the worker's service stops the process then (its supervisor is gone).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Sequence
from typing import Any

import orjson
from twisted.internet.defer import Deferred, fail, succeed
from twisted.internet.endpoints import UNIXClientEndpoint, connectProtocol
from twisted.internet.protocol import connectionDone
from twisted.logger import Logger
from twisted.protocols import amp
from twisted.python.failure import Failure

from gateway.hub import commands
from gateway.state.protocol import SharedStateUnavailable, WindowVerdict

log = Logger()


class HubUnavailable(SharedStateUnavailable):
    """The supervisor's hub is not connected: the command was not sent."""


class HubOperationFailed(Exception):
    """The hub ran the operation and it raised (the message says what)."""


class _WorkerSide(amp.AMP):
    def __init__(self, owner: HubState) -> None:
        super().__init__()
        self._owner = owner

    @commands.Deliver.responder
    def deliver(self, channel: str, message: bytes) -> dict[str, Any]:
        self._owner._deliver(channel, message)
        return {}

    @commands.Recall.responder
    def recall(self, kind: str, ident: int) -> dict[str, Any]:
        # what this turn queued (a grant asked, a give-back, a spend) reaches the hub before
        # the answer: the sizes in the answer already count it
        self._owner.flush()
        handler = self._owner.recall_handler
        returned = handler(kind, ident) if handler is not None else []
        return {"returned": orjson.dumps(returned)}

    def connectionLost(self, reason: Failure = connectionDone) -> None:
        super().connectionLost(reason)
        self._owner._connection_lost(reason)


def _verdict(answer: list[Any]) -> WindowVerdict:
    allowed, remaining, retry_after = answer
    return WindowVerdict(bool(allowed), int(remaining), int(retry_after))


class HubState:
    """Rate-limit windows, counters, claims and the bus, held by the supervisor."""

    shared_across_processes = True

    def __init__(self, reactor: Any, path: str) -> None:
        self._reactor = reactor
        self._path = path
        self._protocol: _WorkerSide | None = None
        self._subscribers: dict[str, list[Callable[[bytes], None]]] = defaultdict(list)
        self._stopping = False
        #: this turn's operations, not sent yet, and their waiters (None: nothing to answer)
        self._ops: list[list[Any]] = []
        self._waiters: list[Deferred[Any] | None] = []
        self._flush_call: Any = None
        self._before_flush: list[Callable[[], None]] = []
        #: answers the hub's recalls of allowances (``HubWallets``): kind, ident -> returned
        self.recall_handler: Callable[[str, int], list[list[Any]]] | None = None
        #: fires once when the hub connection is lost other than by ``stop``
        self.lost: Deferred[None] = Deferred()

    @property
    def available(self) -> bool:
        return self._protocol is not None

    def seconds(self) -> float:
        """The reactor's clock (how busy an account is, per second)."""
        return float(self._reactor.seconds())

    def on_recovered(self, callback: Callable[[], None]) -> Callable[[], None]:
        """The hub never comes back to a worker (the worker stops instead): never called."""
        return lambda: None

    def start(self) -> Deferred[None]:
        endpoint = UNIXClientEndpoint(self._reactor, self._path, timeout=10)
        d = connectProtocol(endpoint, _WorkerSide(self))

        def connected(protocol: _WorkerSide) -> None:
            self._protocol = protocol

        return d.addCallback(connected)

    def stop(self) -> Deferred[None]:
        """Close the connection once everything sent so far was handled by the hub."""
        self._stopping = True
        self.flush()
        protocol = self._protocol
        if protocol is None:
            return succeed(None)
        d = protocol.callRemote(commands.Barrier)
        d.addErrback(lambda _: None)

        def close(_: Any) -> None:
            if protocol.transport is not None:
                protocol.transport.loseConnection()

        return d.addCallback(close)

    def _connection_lost(self, reason: Failure) -> None:
        self._protocol = None
        self.flush()  # whatever was still queued fails now
        if not self._stopping:
            log.error("the supervisor's state hub is gone ({reason})",
                      reason=reason.getErrorMessage())
            if not self.lost.called:
                self.lost.callback(None)

    # --- calls ------------------------------------------------------------------------------

    def ask(self, name: str, *arguments: Any) -> Deferred[Any]:
        """Queue an operation for this turn's batch; fires with its answer, or fails with
        ``HubUnavailable`` at once when not connected (``HubOperationFailed`` if it raised)."""
        if self._protocol is None:
            return fail(HubUnavailable("the supervisor's state hub is not connected"))
        waiter: Deferred[Any] = Deferred()
        self._queue(name, arguments, waiter)
        return waiter

    def tell(self, name: str, *arguments: Any) -> None:
        """Queue an operation that needs no answer (dropped, with a log line, if not
        connected: the hub gives a lost worker's holds back anyway)."""
        if self._protocol is None:
            log.warn("state hub not connected: {name} not sent", name=name)
            return
        self._queue(name, arguments, None)

    def _queue(self, name: str, arguments: tuple[Any, ...], waiter: Deferred[Any] | None
               ) -> None:
        self._ops.append([name, *arguments])
        self._waiters.append(waiter)
        if self._flush_call is None:
            self._flush_call = self._reactor.callLater(0, self.flush)

    def before_flush(self, callback: Callable[[], None]) -> None:
        """Run ``callback`` once at the start of this turn's batch (it may queue operations
        there: one sum for many events of the turn), scheduling the batch if need be."""
        self._before_flush.append(callback)
        if self._flush_call is None:
            self._flush_call = self._reactor.callLater(0, self.flush)

    def flush(self) -> None:
        """Send the queued operations now, as one batch."""
        if self._flush_call is not None:
            if self._flush_call.active():
                self._flush_call.cancel()
            self._flush_call = None
        if self._before_flush:
            callbacks, self._before_flush = self._before_flush, []
            for callback in callbacks:
                callback()
            if self._flush_call is not None:  # what they queued is in this batch
                if self._flush_call.active():
                    self._flush_call.cancel()
                self._flush_call = None
        if not self._ops:
            return
        ops, waiters = self._ops, self._waiters
        self._ops, self._waiters = [], []
        protocol = self._protocol
        if protocol is None:
            answer: Deferred[Any] = fail(HubUnavailable("the state hub went away"))
        else:
            answer = protocol.callRemote(commands.Batch, ops=orjson.dumps(ops))
        answer.addCallbacks(self._answered, self._batch_failed,
                            callbackArgs=(waiters,), errbackArgs=(waiters,))

    @staticmethod
    def _answered(answer: dict[str, Any], waiters: list[Deferred[Any] | None]) -> None:
        for waiter, result in zip(waiters, orjson.loads(answer["results"]), strict=True):
            if waiter is None:
                continue
            if isinstance(result, dict):
                waiter.errback(HubOperationFailed(result.get("error", "")))
            else:
                waiter.callback(result)

    @staticmethod
    def _batch_failed(failure: Failure, waiters: list[Deferred[Any] | None]) -> None:
        if failure.check(HubUnavailable):
            error: Exception = failure.value  # type: ignore[assignment]
        else:
            error = HubUnavailable(f"state hub call failed: {failure.getErrorMessage()}")
        for waiter in waiters:
            if waiter is not None:
                waiter.errback(error)

    def barrier(self) -> Deferred[None]:
        """Fires once the hub handled everything sent before."""
        self.flush()
        if self._protocol is None:
            return fail(HubUnavailable("the supervisor's state hub is not connected"))
        return self._protocol.callRemote(commands.Barrier).addCallback(lambda _: None)

    def take_all(self, limits: Sequence[tuple[str, int]],
                 window_seconds: int) -> Deferred[WindowVerdict]:
        return self.ask("take_all", [key for key, _ in limits], [limit for _, limit in limits],
                        window_seconds).addCallback(_verdict)

    def hit(self, key: str, limit: int, window_seconds: int) -> Deferred[WindowVerdict]:
        return self.ask("hit", key, limit, window_seconds).addCallback(_verdict)

    def incr(self, key: str, amount: int = 1) -> Deferred[int]:
        return self.ask("incr", key, amount)

    def claim(self, key: str, ttl_seconds: int) -> Deferred[bool]:
        return self.ask("claim", key, int(ttl_seconds))

    def release(self, key: str) -> Deferred[None]:
        return self.ask("release", key).addCallback(lambda _: None)

    def publish(self, channel: str, message: bytes) -> Deferred[None]:
        """After everything queued before it (one connection keeps the order)."""
        self.flush()
        if self._protocol is None:
            return fail(HubUnavailable("the supervisor's state hub is not connected"))
        return self._protocol.callRemote(commands.Publish, channel=channel,
                                         message=message).addCallback(lambda _: None)

    def subscribe(self, channel: str, callback: Callable[[bytes], None]) -> Callable[[], None]:
        self._subscribers[channel].append(callback)

        def unsubscribe() -> None:
            if callback in self._subscribers[channel]:
                self._subscribers[channel].remove(callback)

        return unsubscribe

    def _deliver(self, channel: str, message: bytes) -> None:
        for callback in list(self._subscribers.get(channel, ())):
            try:
                callback(message)
            except Exception:
                log.failure("subscriber of {channel} failed", channel=channel)
