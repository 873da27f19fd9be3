"""The HTTP/1.1 channel Lockgate's Site speaks: bounded headers and bodies, answered politely.

twisted.web buffers a whole request body before any resource sees it, and drops the connection
without an answer when a header line is longer than 16 KiB.  This channel

- refuses a declared ``Content-Length`` above the route family's cap as soon as the headers are
  in (413, before reading the body);
- stops a chunked body at the cap (``LockgateRequest`` counts what it buffers);
- answers 431 when the headers exceed ``totalHeadersSize`` or ``maxHeaders``, or one header
  line exceeds ``MAX_LENGTH`` (414 when it is the request line);

each time in the family's error shape (``tap.body_limits``).  After a refusal the rest of the
client's upload is read and thrown away for at most ``LINGER`` seconds (so the client gets to
read the answer instead of a reset) and the connection is then closed.

Twisted's channel attributes live in slots (``tap.slot_defaults``), as the request's do: an
open stream keeps its connection's channel for its whole life.
"""

from __future__ import annotations

from typing import Any

from twisted.internet.protocol import connectionDone
from twisted.python.failure import Failure
from twisted.web.http import HTTPChannel
from twisted.web.server import Site

from tap import body_limits, slot_defaults
from tap.http_request import LockgateRequest

#: seconds a refused connection keeps discarding the client's upload before it is cut
LINGER = 2.0

HEADERS_TOO_LARGE = "Request headers are too large"

#: every attribute twisted.web's HTTPChannel (and its bases) sets on an instance, and ours;
#: ``callLater`` stays out (its class-level value is a method the factory replaces)
_SLOTS = (
    "_HTTPChannel__first_line", "_HTTPChannel__header", "_TimeoutMixin__timeoutCall",
    "_abortingCall", "_buffer", "_busyReceiving", "_command", "_dataBuffer",
    "_handlingRequest", "_networkProducer", "_path", "_receivedHeaderCount",
    "_receivedHeaderSize", "_requestProducer", "_requestProducerStreaming", "_savedTimeOut",
    "_transferDecoder", "_version", "_waitingForTransport", "connected", "factory", "length",
    "line_mode", "paused", "persistent", "requestFactory", "requests", "site", "timeOut",
    "transport",
    "_host", "_linger", "_peer", "_refused", "_target",
)
_DEFAULTS = {**slot_defaults.class_defaults(HTTPChannel, _SLOTS), "_refused": False,
             "_linger": None, "_target": None, "_peer": None, "_host": None}


class LockgateChannel(HTTPChannel):
    __slots__ = _SLOTS

    totalHeadersSize = 16384
    maxHeaders = 100

    _refused: bool
    _linger: Any
    _target: bytes | None
    _peer: Any
    _host: Any

    def __init__(self) -> None:
        slot_defaults.fill(self, _DEFAULTS)
        super().__init__()

    def __delattr__(self, name: str) -> None:
        slot_defaults.delete(self, name, _DEFAULTS)  # HTTPChannel dels _command, _path ...

    # --- addresses ------------------------------------------------------------------------

    def getPeer(self) -> Any:
        """The client's address, built once per connection: twisted.web asks for it (and for
        ``getHost``, a ``getsockname`` system call) on every request of a keep-alive
        connection, and neither changes while the connection lives."""
        if self._peer is None:
            self._peer = super().getPeer()
        return self._peer

    def getHost(self) -> Any:
        if self._host is None:
            self._host = super().getHost()
        return self._host

    # --- headers --------------------------------------------------------------------------

    def lineReceived(self, line: bytes) -> None:
        if self._refused:
            return
        if self._receivedHeaderSize + len(line) > self.totalHeadersSize:
            self._too_long()
            return
        if self._target is None and line:
            parts = line.split(b" ")
            self._target = parts[1] if len(parts) > 1 else b""
        super().lineReceived(line)

    def lineLengthExceeded(self, line: bytes) -> None:
        self._too_long()

    def _too_long(self) -> None:
        if self._target is None:  # still on the request line
            self.refuse(414, "Request target is too long", "uri_too_long")
        else:
            self.refuse(431, HEADERS_TOO_LARGE, "headers_too_large")

    def headerReceived(self, line: bytes) -> bool:
        if self._receivedHeaderCount >= self.maxHeaders:
            self.refuse(431, "Too many request headers", "headers_too_large")
            return False
        return bool(super().headerReceived(line))

    def allHeadersReceived(self) -> None:
        family = body_limits.family_of(self._target)
        if self.length is not None and self.length > family.limit:
            self.refuse(413, f"Request body exceeds maximum {family.limit} bytes",
                        "body_too_large")
            return
        self.requests[-1].body_limit = family.limit
        super().allHeadersReceived()

    def allContentReceived(self) -> None:
        self._target = None
        super().allContentReceived()

    # --- bodies ---------------------------------------------------------------------------

    def rawDataReceived(self, data: bytes) -> None:
        if not self._refused:
            super().rawDataReceived(data)

    def body_over_limit(self, limit: int) -> None:
        """Called by the request when a streamed body passes its family's cap."""
        self.refuse(413, f"Request body exceeds maximum {limit} bytes", "body_too_large")

    # --- refusing -------------------------------------------------------------------------

    def refuse(self, status: int, message: str, code: str) -> None:
        """Answer ``status`` now, discard whatever else the client sends, then close."""
        if self._refused or self.transport is None:
            return
        self._refused = True
        self.persistent = False
        self.setRawMode()  # no more line parsing of what is still buffered
        self.dataReceived = self._discard  # type: ignore[method-assign]
        self.transport.write(body_limits.raw_response(self._target, status, message, code))
        lose_write = getattr(self.transport, "loseWriteConnection", None)
        if lose_write is None:
            self.transport.loseConnection()
            return
        lose_write()
        self._linger = self.callLater(LINGER, self._cut)

    def _cut(self) -> None:
        transport: Any = self.transport
        if transport is not None:
            transport.abortConnection()

    def _discard(self, data: bytes) -> None:
        """The refused request's remaining upload: read (so the client can finish) and dropped."""

    def connectionLost(self, reason: Failure = connectionDone) -> None:
        if self._linger is not None and self._linger.active():
            self._linger.cancel()
        self._linger = None
        super().connectionLost(reason)


class LockgateSite(Site):
    """A Site speaking ``LockgateChannel`` with ``LockgateRequest``s."""

    protocol = LockgateChannel  # type: ignore[assignment]  # HTTP/1.1 only (no h2 installed)

    def __init__(self, resource: Any, **kwargs: Any) -> None:
        kwargs.setdefault("requestFactory", LockgateRequest)
        super().__init__(resource, **kwargs)
