"""One upstream HTTP/1.1 connection of the lean client: sends a request, parses its answer.

Why httptools: Agent parses answers line by line in Python (``HTTPClientParser``); llhttp (C)
does it in one ``feed_data`` call per read, calling back into this protocol per part.  Those
callbacks only record; the response, its body bytes and the end of its body are handed over only
*after* ``feed_data`` returns, so the caller's callbacks, which may abort or send the next
request, never run inside the C parser.  Every body piece of one read (a streamed answer's HTTP
chunks: under a burst several SSE events wait in the socket at once) is handed over in one
call, joined: the relay then parses, translates and writes them to its client as one batch, one
``send()`` instead of one per piece (issue 22, goal 4).  An answer that arrived whole in
one read (the usual JSON answer) frees the connection (back to the pool) *before* its caller
hears of it, and is handed over with its body already ended: the caller reads it at once, and a
request it sends right there reuses this connection.

The request leaves in one write, straight to the socket when nothing waits in the transport's
buffer (``gateway.links.socket_write``: no write watch, no extra reactor pass).  What makes a
connection reusable or not (``Connection: close``, an HTTP/1.0 answer, an error, an aborted
body, a ``HEAD`` -- httptools cannot be told an answer has no body, so its state after one is
not trusted) is decided here; the pool (``gateway.channels.lean_pool``) only keeps the idle ones.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from httptools import HttpParserError, HttpParserUpgrade, HttpResponseParser
from twisted.internet.defer import Deferred
from twisted.internet.protocol import Protocol
from twisted.python.failure import Failure
from twisted.web.iweb import UNKNOWN_LENGTH

from gateway.channels.lean_response import LeanResponse
from gateway.channels.response_headers import ResponseHeaders
from gateway.links.socket_write import write_now

if TYPE_CHECKING:
    from gateway.channels.lean_exchange import Exchange
    from gateway.channels.lean_pool import LeanPool


class ParseFailure(Exception):
    """The upstream's bytes are not an HTTP/1.1 response (httptools refused them)."""


class LeanConnection(Protocol):
    """One upstream connection: sends a request, parses its answer, then waits in the pool."""

    def __init__(self, pool: LeanPool) -> None:
        self._pool = pool
        self.key: Any = None
        self._parser = HttpResponseParser(self)
        self._exchange: Exchange | None = None
        self._response: LeanResponse | None = None
        self._answered = False
        self._headers = ResponseHeaders()
        self._phrase = b""
        #: body pieces parsed from the current read, handed over together once it is parsed
        self._parts: list[bytes] = []
        self._interim = False
        self._complete = False
        self._keep_alive = False
        #: bytes of an answer arrived for the current request (it must not be sent again)
        self._heard = False
        self.dead = False
        self.idle_since = 0.0
        self.lost: Deferred[None] | None = None

    # driven by the pool

    def start(self, exchange: Exchange) -> None:
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
        if self._exchange is None or self._complete:
            # nothing sent, or a second answer in the read that completed the first one
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
        if self._response is not None and not self._complete:
            self._parts.append(body)

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
            # HttpParserUpgrade: a 101 nobody asked for.  The body parsed before the error
            # still goes first, as it would have in a read of its own.
            self._hand_over_parts()
            self._broken(Failure(ParseFailure(f"malformed upstream response: {exc}")))
            return
        exchange = self._exchange
        response = self._response
        if exchange is None or response is None:
            return
        if self._parts:
            self._hand_over_parts()
        if self._complete:
            # the answer is whole: the connection is free (pooled) before its caller hears
            # of it, and an answer that came in one read is handed over with its body ended,
            # so the caller reads it at once instead of waiting for a second callback
            self._exchange = None
            self._response = None
            self._complete = False
            exchange.conn = None
            if self._keep_alive and not self.dead:
                self._pool.release(self)
            else:
                self.retire()
            response.end(None)
            if self._answered:
                self._answered = False
            else:
                exchange.answer(response)
        elif not self._answered:
            self._answered = True
            exchange.answer(response)  # the caller may deliver, abort or pause right here

    def _hand_over_parts(self) -> None:
        """The body pieces of this read to the response, in one call."""
        parts = self._parts
        if not parts:
            return
        self._parts = []
        response = self._response
        if response is not None:
            response.data(parts[0] if len(parts) == 1 else b"".join(parts))

    @property
    def idle(self) -> bool:
        """Open and carrying no request (waiting in the pool)."""
        return self._exchange is None and not self.dead

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
