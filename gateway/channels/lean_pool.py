"""A lean HTTP/1.1 client connection pool: what ``UpstreamClient`` sends its requests through.

Why not ``twisted.web.client.Agent``: Agent parses responses line by line in Python
(``HTTPClientParser``, a ``LineReceiver``), builds a ``Headers`` object (name normalisation
per header), a ``Response`` with its own producer proxy, and chains several Deferreds per
request through ``HTTPConnectionPool``.  Measured on the relay floor, that machinery was the
largest single block of a relayed request's CPU.  The client is split by job: this pool (a
list of idle connections per key, and opening new ones), ``lean_connection`` (one connection:
the request written in one send, the answer parsed by httptools), ``lean_exchange`` (one
request and the one answer its caller hears), ``lean_response`` and ``response_headers`` (the
answer handed over).

What it keeps from Agent + ``HTTPConnectionPool``, on purpose:

- persistent connections per key ((scheme, host, port, policy number): the caller's key), at
  most ``max_idle_per_key`` idle ones per key, each closed after ``idle_timeout`` seconds idle;
- a connection is retired (closed, not pooled) on ``Connection: close`` (or an HTTP/1.0
  answer without keep-alive), on any error, on an aborted body, after a ``HEAD`` (httptools
  cannot be told a response has no body, so its parser state after one is not trusted);
- a request that failed on a *reused* connection before any byte of the answer came back is
  sent again on a fresh connection only when Agent would have: an idempotent method without a
  body (a POST is never sent twice);
- 1xx answers are skipped; 204/304 (llhttp knows) and HEAD answers have no body; bodies are
  framed by Content-Length, chunked encoding, or the end of the connection;
- the response is handed over as an object Agent callers know (``code``, ``phrase``,
  ``headers`` with ``getRawHeaders``/``getAllRawHeaders`` and canonical names, ``length``,
  ``deliverBody(protocol)``); the body protocol's transport offers ``pauseProducing`` /
  ``resumeProducing`` (backpressure onto the socket) and ``stopProducing`` (closes the socket
  at once).  A clean end is ``connectionLost(None)``; a close-delimited body ends cleanly at the
  close; anything else is the ``Failure`` that broke it.

Connections come from the caller's endpoint (``gateway.channels.safe_connect``: SSRF policy,
TLS), so the client knows nothing about addresses or certificates.  Every timer uses the
injected clock.
"""

from __future__ import annotations

from typing import Any

from twisted.internet.defer import Deferred, DeferredList
from twisted.internet.interfaces import IDelayedCall, IStreamClientEndpoint
from twisted.internet.protocol import ClientFactory
from twisted.python.failure import Failure

from gateway.channels.lean_connection import LeanConnection
from gateway.channels.lean_exchange import Exchange
from gateway.channels.lean_response import LeanResponse

#: methods Agent's pool re-sends on a fresh connection when a pooled one failed before answering
IDEMPOTENT = frozenset({b"GET", b"HEAD", b"OPTIONS", b"DELETE", b"TRACE", b"PUT"})


class _QuietFactory(ClientFactory):
    """Builds connections for one pool; quiet (no "Starting factory" line per connection)."""

    noisy = False

    def __init__(self, pool: LeanPool) -> None:
        self._pool = pool

    def buildProtocol(self, addr: Any) -> LeanConnection:
        return LeanConnection(self._pool)


class LeanPool:
    """Idle keep-alive connections per key, and the request/response exchange over them."""

    def __init__(self, clock: Any, *, max_idle_per_key: int, idle_timeout: float) -> None:
        self._clock = clock
        self._max_idle = max_idle_per_key
        self._idle_timeout = idle_timeout
        self._idle: dict[Any, list[LeanConnection]] = {}
        self._factory = _QuietFactory(self)
        self._sweeper: IDelayedCall | None = None
        #: connections opened (tests assert pooled reuse)
        self.connections_opened = 0

    def request(self, key: Any, endpoint: IStreamClientEndpoint, method: bytes, data: bytes,
                *, may_resend: bool) -> Deferred[LeanResponse]:
        """Send ``data`` (a whole request) over a pooled or a new connection to ``endpoint``;
        fires with the response once its headers arrived.  Cancelling closes the connection."""
        exchange = Exchange(self, key, endpoint, method, data, may_resend)
        conn = self._take(key)
        if conn is not None:
            conn.start(exchange)
        else:
            exchange.may_resend = False  # a fresh connection: nothing to retry
            self._connect(exchange)
        return exchange.deferred

    def resend(self, exchange: Exchange) -> bool:
        """Send ``exchange`` again on a fresh connection (its pooled one died unheard)."""
        exchange.may_resend = False
        self._connect(exchange)
        return True

    def _connect(self, exchange: Exchange) -> None:
        self.connections_opened += 1
        connecting: Deferred[Any] = exchange.endpoint.connect(self._factory)
        exchange.connecting = connecting

        def connected(conn: LeanConnection) -> None:
            exchange.connecting = None
            conn.key = exchange.key
            if exchange.done:  # cancelled while connecting
                conn.abort()
                return
            conn.start(exchange)

        def failed(reason: Failure) -> None:
            exchange.connecting = None
            exchange.fail(reason)

        connecting.addCallbacks(connected, failed)

    def _take(self, key: Any) -> LeanConnection | None:
        idle = self._idle.get(key)
        if not idle:
            return None
        oldest_ok = self._clock.seconds() - self._idle_timeout
        while idle:
            conn = idle.pop()
            if conn.dead:
                continue
            if conn.idle_since < oldest_ok:
                conn.retire()
                continue
            return conn
        return None

    def release(self, conn: LeanConnection) -> None:
        """``conn`` answered in full and may be reused."""
        idle = self._idle.get(conn.key)
        if idle is None:
            idle = self._idle[conn.key] = []
        if len(idle) >= self._max_idle:
            conn.retire()
            return
        conn.idle_since = self._clock.seconds()
        idle.append(conn)
        if self._sweeper is None:
            self._sweeper = self._clock.callLater(self._idle_timeout, self._sweep)

    def forget(self, conn: LeanConnection) -> None:
        idle = self._idle.get(conn.key)
        if idle and conn in idle:
            idle.remove(conn)

    def _sweep(self) -> None:
        """Close connections idle for longer than ``idle_timeout`` (one timer per pool)."""
        self._sweeper = None
        oldest_ok = self._clock.seconds() - self._idle_timeout
        left = False
        for idle in list(self._idle.values()):
            for conn in [c for c in idle if c.idle_since < oldest_ok]:
                conn.retire()
            left = left or bool(idle)
        if left:
            self._sweeper = self._clock.callLater(self._idle_timeout, self._sweep)

    def close(self) -> Deferred[Any]:
        """Close every idle connection; fires once they are all closed."""
        if self._sweeper is not None and self._sweeper.active():
            self._sweeper.cancel()
        self._sweeper = None
        waits: list[Deferred[None]] = []
        for idle in list(self._idle.values()):
            for conn in list(idle):
                conn.lost = Deferred()
                waits.append(conn.lost)
                conn.dead = True
                transport: Any = conn.transport
                transport.loseConnection()
            idle.clear()
        self._idle.clear()
        return DeferredList(waits, consumeErrors=True)
