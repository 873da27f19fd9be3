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


class _WorkerSide(amp.AMP):
    def __init__(self, owner: HubState) -> None:
        super().__init__()
        self._owner = owner

    @commands.Deliver.responder
    def deliver(self, channel: str, message: bytes) -> dict[str, Any]:
        self._owner._deliver(channel, message)
        return {}

    def connectionLost(self, reason: Failure = connectionDone) -> None:
        super().connectionLost(reason)
        self._owner._connection_lost(reason)


def _verdict(answer: dict[str, Any]) -> WindowVerdict:
    return WindowVerdict(answer["allowed"], answer["remaining"], answer["retry_after"])


class HubState:
    """Rate-limit windows, counters, claims and the bus, held by the supervisor."""

    shared_across_processes = True

    def __init__(self, reactor: Any, path: str) -> None:
        self._reactor = reactor
        self._path = path
        self._protocol: _WorkerSide | None = None
        self._subscribers: dict[str, list[Callable[[bytes], None]]] = defaultdict(list)
        self._stopping = False
        #: fires once when the hub connection is lost other than by ``stop``
        self.lost: Deferred[None] = Deferred()

    @property
    def available(self) -> bool:
        return self._protocol is not None

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
        if not self._stopping:
            log.error("the supervisor's state hub is gone ({reason})",
                      reason=reason.getErrorMessage())
            if not self.lost.called:
                self.lost.callback(None)

    # --- calls ------------------------------------------------------------------------------

    def call(self, command: type[amp.Command], **arguments: Any) -> Deferred[Any]:
        """Ask the hub; fails with ``HubUnavailable`` at once when not connected."""
        protocol = self._protocol
        if protocol is None:
            return fail(HubUnavailable("the supervisor's state hub is not connected"))
        return protocol.callRemote(command, **arguments)

    def tell(self, command: type[amp.Command], **arguments: Any) -> None:
        """Send a message that needs no answer (dropped, with a log line, if not connected)."""
        protocol = self._protocol
        if protocol is None:
            log.warn("state hub not connected: {command} not sent", command=command.__name__)
            return
        protocol.callRemote(command, **arguments)

    def barrier(self) -> Deferred[None]:
        """Fires once the hub handled everything sent before."""
        return self.call(commands.Barrier).addCallback(lambda _: None)

    def take_all(self, limits: Sequence[tuple[str, int]],
                 window_seconds: int) -> Deferred[WindowVerdict]:
        return self.call(commands.TakeAll, keys=[key for key, _ in limits],
                         limits=[limit for _, limit in limits],
                         window=window_seconds).addCallback(_verdict)

    def hit(self, key: str, limit: int, window_seconds: int) -> Deferred[WindowVerdict]:
        return self.call(commands.Hit, key=key, limit=limit,
                         window=window_seconds).addCallback(_verdict)

    def incr(self, key: str, amount: int = 1) -> Deferred[int]:
        return self.call(commands.Incr, key=key, amount=amount).addCallback(
            lambda answer: int(answer["value"]))

    def claim(self, key: str, ttl_seconds: int) -> Deferred[bool]:
        return self.call(commands.Claim, key=key, ttl=int(ttl_seconds)).addCallback(
            lambda answer: bool(answer["claimed"]))

    def release(self, key: str) -> Deferred[None]:
        return self.call(commands.Release, key=key).addCallback(lambda _: None)

    def publish(self, channel: str, message: bytes) -> Deferred[None]:
        return self.call(commands.Publish, channel=channel, message=message).addCallback(
            lambda _: None)

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
