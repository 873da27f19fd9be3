"""A lean HTTP/1.1 client connection pool: what ``UpstreamClient`` sends its requests through.

Why not ``twisted.web.client.Agent``: Agent parses responses line by line in Python
(``HTTPClientParser``, a ``LineReceiver``), builds a ``Headers`` object (name normalisation
per header), a ``Response`` with its own producer proxy, and chains several Deferreds per
request through ``HTTPConnectionPool``.  Measured on the relay floor, that machinery was the
largest single block of a relayed request's CPU.  Here a connection is one ``Protocol`` whose
responses are parsed by ``httptools`` (the llhttp C parser) and whose request is one write,
sent straight to the socket when nothing waits in the transport's buffer
(``gateway.links.socket_write``: no write watch, no extra reactor pass); the pool is a list of
idle connections per key.

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
TLS), so this module knows nothing about addresses or certificates.  Every timer uses the
injected clock.  A response, and the end of its body, are handed over only *after*
``feed_data`` returns (body bytes of the same read are buffered until then), so the caller's
callbacks that may abort or send the next request never run inside the C parser; later body
bytes of a stream go to the body protocol as they are parsed.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from httptools import HttpParserError, HttpParserUpgrade, HttpResponseParser
from twisted.internet.defer import Deferred, DeferredList
from twisted.internet.interfaces import IDelayedCall, IStreamClientEndpoint
from twisted.internet.protocol import ClientFactory, Protocol
from twisted.python.failure import Failure
from twisted.web.http_headers import Headers
from twisted.web.iweb import UNKNOWN_LENGTH

from gateway.links.socket_write import write_now

#: methods Agent's pool re-sends on a fresh connection when a pooled one failed before answering
IDEMPOTENT = frozenset({b"GET", b"HEAD", b"OPTIONS", b"DELETE", b"TRACE", b"PUT"})

_canonical_names: dict[bytes, bytes] = {}


def canonical_name(lower: bytes) -> bytes:
    """Twisted's canonical capitalisation of a header name (``content-type`` ->
    ``Content-Type``, ``etag`` -> ``ETag``), cached: upstreams send the same few names."""
    name = _canonical_names.get(lower)
    if name is None:
        name = next(iter(Headers({lower: [b""]}).getAllRawHeaders()))[0]
        if len(_canonical_names) < 4096:
            _canonical_names[lower] = name
    return name


class ParseFailure(Exception):
    """The upstream's bytes are not an HTTP/1.1 response (httptools refused them)."""


class AnswerAbandoned(Exception):
    """The caller cancelled a request that was already sent (its connection is closed)."""


class ResponseHeaders:
    """The response headers with the read side of ``twisted.web.http_headers.Headers``."""

    __slots__ = ("_raw",)

    def __init__(self) -> None:
        #: lower-case name -> values, in arrival order
        self._raw: dict[bytes, list[bytes]] = {}

    def add(self, lower: bytes, value: bytes) -> None:
        values = self._raw.get(lower)
        if values is None:
            self._raw[lower] = [value]
        else:
            values.append(value)

    def getRawHeaders(self, name: bytes | str, default: Any = None) -> Any:
        key = name.lower() if isinstance(name, bytes) else name.lower().encode("latin-1")
        values = self._raw.get(key)
        return default if values is None else values

    def hasHeader(self, name: bytes | str) -> bool:
        return self.getRawHeaders(name) is not None

    def getAllRawHeaders(self) -> Iterator[tuple[bytes, list[bytes]]]:
        for lower, values in self._raw.items():
            yield canonical_name(lower), values


class LeanResponse:
    """One upstream answer: status, headers and its body, buffered until ``deliverBody``."""

    __slots__ = ("_buffer", "_conn", "_end", "_ended", "_protocol", "code", "headers", "length",
                 "phrase", "until_close")

    def __init__(self, conn: LeanConnection, code: int, phrase: bytes,
                 headers: ResponseHeaders, length: int | object, until_close: bool) -> None:
        self._conn = conn
        self.code = code
        self.phrase = phrase
        self.headers = headers
        #: Content-Length, 0 for an answer without a body, or ``UNKNOWN_LENGTH``
        self.length = length
        #: the body ends when the connection does (neither Content-Length nor chunked)
        self.until_close = until_close
        self._protocol: Any = None
        self._buffer: list[bytes] | None = None
        self._ended = False
        self._end: Failure | None = None

    def deliverBody(self, protocol: Any) -> None:
        """Connect ``protocol`` (an ``IProtocol``) to the body, as ``IResponse.deliverBody``."""
        self._protocol = protocol
        protocol.makeConnection(self)
        buffered, self._buffer = self._buffer, None
        if buffered:
            for data in buffered:
                protocol.dataReceived(data)
        if self._ended:
            protocol.connectionLost(self._end)

    # the body protocol's transport

    def pauseProducing(self) -> None:
        if not self._ended:
            transport: Any = self._conn.transport
            transport.pauseProducing()

    def resumeProducing(self) -> None:
        if not self._ended:
            transport: Any = self._conn.transport
            transport.resumeProducing()

    def stopProducing(self) -> None:
        """Close the connection now (the body is not wanted, or not any more)."""
        if not self._ended:
            self._conn.abort()

    # fed by the connection

    def data(self, data: bytes) -> None:
        if self._ended:
            return
        protocol = self._protocol
        if protocol is not None:
            protocol.dataReceived(data)
        elif self._buffer is None:
            self._buffer = [data]
        else:
            self._buffer.append(data)

    def end(self, reason: Failure | None) -> None:
        """The body is complete (``None``) or broke (``reason``)."""
        if self._ended:
            return
        self._ended = True
        self._end = reason
        if self._protocol is not None:
            self._protocol.connectionLost(reason)


class _Exchange:
    """One request on its way: the bytes to send and the Deferred its caller waits on."""

    __slots__ = ("conn", "connecting", "data", "deferred", "done", "endpoint", "key",
                 "may_resend", "method", "pool")

    def __init__(self, pool: LeanPool, key: Any, endpoint: IStreamClientEndpoint,
                 method: bytes, data: bytes, may_resend: bool) -> None:
        self.pool = pool
        self.key = key
        self.endpoint = endpoint
        self.method = method
        self.data = data
        self.may_resend = may_resend
        self.deferred: Deferred[LeanResponse] = Deferred(self._cancel)
        #: the caller has its answer (a response, a failure or a cancellation)
        self.done = False
        self.conn: LeanConnection | None = None
        self.connecting: Deferred[Any] | None = None

    def _cancel(self, _: object) -> None:
        """The caller gave up (first-byte timeout, client gone): close whatever it holds.
        Once the request was sent this fails with ``AnswerAbandoned`` (as Agent fails with
        ``ResponseNeverReceived``); while connecting, with ``CancelledError``."""
        conn = self.conn
        if conn is not None:
            conn.abort()
            self.fail(Failure(AnswerAbandoned("the request was cancelled before the answer")))
            return
        self.done = True
        connecting, self.connecting = self.connecting, None
        if connecting is not None:
            connecting.cancel()

    def answer(self, response: LeanResponse) -> None:
        if not self.done:
            self.done = True
            self.deferred.callback(response)

    def fail(self, reason: Failure) -> None:
        if not self.done:
            self.done = True
            self.deferred.errback(reason)


class LeanConnection(Protocol):
    """One upstream connection: sends a request, parses its answer, then waits in the pool."""

    def __init__(self, pool: LeanPool) -> None:
        self._pool = pool
        self.key: Any = None
        self._parser = HttpResponseParser(self)
        self._exchange: _Exchange | None = None
        self._response: LeanResponse | None = None
        self._answered = False
        self._headers = ResponseHeaders()
        self._phrase = b""
        self._interim = False
        self._complete = False
        self._keep_alive = False
        #: bytes of an answer arrived for the current request (it must not be sent again)
        self._heard = False
        self.dead = False
        self.idle_since = 0.0
        self.lost: Deferred[None] | None = None

    # driven by the pool

    def start(self, exchange: _Exchange) -> None:
        self._exchange = exchange
        exchange.conn = self
        self._heard = False
        write_now(self.transport, exchange.data)

    def retire(self) -> None:
        """Close cleanly (FIN) after a complete answer: not to be reused, nothing to cut."""
        if not self.dead:
            self.dead = True
            self._pool.forget(self)
            transport: Any = self.transport
            if transport is not None:
                transport.loseConnection()

    def abort(self) -> None:
        """Close at once; the connection is never reused."""
        if not self.dead:
            self.dead = True
            self._pool.forget(self)
            transport: Any = self.transport
            if transport is not None:
                transport.abortConnection()

    # httptools callbacks (inside feed_data: record only)

    def on_message_begin(self) -> None:
        if self._exchange is None:
            raise ParseFailure("an answer nobody asked for")
        self._headers = ResponseHeaders()
        self._phrase = b""

    def on_status(self, status: bytes) -> None:
        self._phrase += status

    def on_header(self, name: bytes, value: bytes) -> None:
        self._headers.add(name.lower(), value)

    def on_headers_complete(self) -> None:
        code = self._parser.get_status_code()
        if 100 <= code < 200 and code != 101:
            self._interim = True  # 100 Continue, 103 Early Hints: the real answer follows
            return
        exchange = self._exchange
        assert exchange is not None
        headers = self._headers
        length: int | object = UNKNOWN_LENGTH
        until_close = False
        if exchange.method == b"HEAD" or code in (204, 304):
            length = 0
            if exchange.method == b"HEAD":
                self._complete = True
                self._keep_alive = False
        else:
            declared = headers.getRawHeaders(b"content-length")
            chunked = b"chunked" in b",".join(
                headers.getRawHeaders(b"transfer-encoding", ())).lower()
            if declared and not chunked:
                length = int(declared[0])
            elif not chunked:
                until_close = True
        self._response = LeanResponse(self, code, self._phrase, headers, length, until_close)

    def on_body(self, body: bytes) -> None:
        response = self._response
        if response is not None and not self._complete:
            response.data(body)

    def on_message_complete(self) -> None:
        if self._interim:
            self._interim = False
            return
        if self._complete:  # a HEAD answer ended at its headers
            return
        self._complete = True
        self._keep_alive = self._parser.should_keep_alive()

    # the transport

    def dataReceived(self, data: bytes) -> None:
        if self.dead:
            return
        self._heard = True
        try:
            self._parser.feed_data(data)
        except (HttpParserError, HttpParserUpgrade, ParseFailure, ValueError) as exc:
            # HttpParserUpgrade: a 101 nobody asked for
            self._broken(Failure(ParseFailure(f"malformed upstream response: {exc}")))
            return
        exchange = self._exchange
        response = self._response
        if exchange is None or response is None:
            return
        if not self._answered:
            self._answered = True
            exchange.answer(response)  # the caller may deliver, abort or pause right here
        if self._complete:
            self._exchange = None
            self._response = None
            self._answered = False
            self._complete = False
            exchange.conn = None
            if self._keep_alive and not self.dead:
                self._pool.release(self)
            else:
                self.retire()
            response.end(None)

    def _broken(self, reason: Failure) -> None:
        exchange, response = self._exchange, self._response
        self._exchange = self._response = None
        self.abort()
        if response is not None and self._answered:
            response.end(reason)
        elif exchange is not None:
            exchange.fail(reason)

    def connectionLost(self, reason: Failure = None) -> None:  # type: ignore[assignment]
        self.dead = True
        self._pool.forget(self)
        lost, self.lost = self.lost, None
        exchange, response = self._exchange, self._response
        self._exchange = self._response = None
        if exchange is not None:
            exchange.conn = None
            if response is not None and self._answered:
                response.end(None if response.until_close else reason)
            elif (not self._heard and exchange.may_resend and not exchange.done
                  and exchange.pool.resend(exchange)):
                pass  # a stale pooled connection: sent again on a fresh one
            else:
                exchange.fail(reason)
        if lost is not None:
            lost.callback(None)


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
        exchange = _Exchange(self, key, endpoint, method, data, may_resend)
        conn = self._take(key)
        if conn is not None:
            conn.start(exchange)
        else:
            exchange.may_resend = False  # a fresh connection: nothing to retry
            self._connect(exchange)
        return exchange.deferred

    def resend(self, exchange: _Exchange) -> bool:
        """Send ``exchange`` again on a fresh connection (its pooled one died unheard)."""
        exchange.may_resend = False
        self._connect(exchange)
        return True

    def _connect(self, exchange: _Exchange) -> None:
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
