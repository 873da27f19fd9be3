"""One upstream answer as the lean client hands it over: status, headers and its body.

Why its own object rather than ``twisted.web.client.Response``: Agent's response wraps the body
in a producer proxy and its own state machine; callers here (``UpstreamResponse``) only need
Agent's read interface (``code``, ``phrase``, ``headers``, ``length``, ``deliverBody``) and a
body protocol whose transport pauses, resumes and stops the socket.  Body bytes that arrive
before ``deliverBody`` are buffered, so an answer read whole with its headers is handed over in
one go.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from twisted.python.failure import Failure

from gateway.channels.response_headers import ResponseHeaders

if TYPE_CHECKING:
    from gateway.channels.lean_connection import LeanConnection


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
        if buffered:  # several reads' bodies waited: one call, as one read's pieces get
            protocol.dataReceived(buffered[0] if len(buffered) == 1 else b"".join(buffered))
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
        """Close the connection now (the body is not wanted, or not any more).  An answer
        that ended whole has its connection back in the pool already: that one is closed too
        unless it already carries another request."""
        conn = self._conn
        if not self._ended or conn.idle:
            conn.abort()

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
