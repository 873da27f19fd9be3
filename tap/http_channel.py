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

Requests are parsed by httptools (llhttp, in C; ``tap.request_parser``) instead of
twisted.web's line-by-line Python parser, which cost about a tenth of a /v1 call's CPU (issue
22).  Everything else is twisted.web's channel, driven as its own parser drives it: a request
is created when its first byte arrives, its headers go to ``requestHeaders`` as
``headerReceived`` would put them, ``allHeadersReceived`` (persistence, ``Expect:
100-continue``, the caps above) runs when the head is in, body pieces go to
``handleContentChunk`` as they arrive, and ``allContentReceived`` dispatches the request.  A
request pipelined behind one still being answered waits: what llhttp already parsed of it is
kept as queued steps, what arrives later stays unparsed in ``_dataBuffer`` (the client paused
past ``_optimisticEagerReadSize``), and both are replayed in order when ``requestDone``
switches back to "line mode".  llhttp stops after the head of an Upgrade request: a WebSocket
resource that took the transport over gets the bytes after the head; otherwise the connection
goes on with twisted.web's own line parser (``lineReceived`` and friends below), as it would
have without llhttp.

Twisted's channel attributes live in slots (``tap.slot_defaults``), as the request's do: an
open stream keeps its connection's channel for its whole life.  The parser is made when bytes
arrive and dropped while a request is answered between requests, so an open stream keeps none.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from httptools import HttpParserCallbackError, HttpParserError, HttpParserUpgrade
from twisted.internet.protocol import connectionDone
from twisted.protocols import basic
from twisted.python.failure import Failure
from twisted.web.http import (
    HTTPChannel,
    _ChunkedTransferDecoder,
    _IdentityTransferDecoder,
)
from twisted.web.http_headers import Headers
from twisted.web.iweb import INonQueuedRequestFactory
from twisted.web.server import Site

from gateway.links.socket_write import write_now
from tap import body_limits, request_parser, response_write, slot_defaults
from tap.http_request import LockgateRequest

#: seconds a refused connection keeps discarding the client's upload before it is cut
LINGER = 2.0

HEADERS_TOO_LARGE = "Request headers are too large"
URI_TOO_LONG = "Request target is too long"

#: a request line's bytes besides the target, at the least: "GET", two spaces, "HTTP/1.1"
_SHORTEST_LINE_REST = 13
#: len(b"content-length"), len(b"transfer-encoding"): the headers that frame a body
_FRAMING_LENGTHS = (14, 17)
_VERSIONS = {"1.1": b"HTTP/1.1", "1.0": b"HTTP/1.0"}

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
    "_parser", "_events", "_feeding", "_in_head", "_in_message", "_head_bytes", "_chunk_size",
    "_ended_here", "_url", "_upgrade_held", "_upgrade_transport", "_legacy", "_successor",
    "_holding_head", "_held_head",
)
_DEFAULTS = {**slot_defaults.class_defaults(HTTPChannel, _SLOTS), "_refused": False,
             "_linger": None, "_target": None, "_peer": None, "_host": None,
             "_parser": None, "_feeding": False, "_in_head": False, "_in_message": False,
             "_head_bytes": 0, "_chunk_size": 0, "_ended_here": False, "_url": b"",
             "_upgrade_held": False, "_upgrade_transport": None, "_legacy": False,
             "_successor": None, "_holding_head": False, "_held_head": None}


class LockgateChannel(HTTPChannel):
    """twisted.web's HTTP/1.1 channel with an llhttp request parser and bounded requests."""

    __slots__ = _SLOTS

    totalHeadersSize = 16384
    maxHeaders = 100

    _refused: bool
    _linger: Any
    _target: bytes | None
    _peer: Any
    _host: Any
    _parser: Any
    _events: list[tuple[Callable[..., None], tuple[Any, ...]]]
    _feeding: bool
    _in_head: bool
    _in_message: bool
    _head_bytes: int
    _chunk_size: int
    _ended_here: bool
    _url: bytes
    _upgrade_held: bool
    _upgrade_transport: Any
    _legacy: bool
    _successor: Any
    _holding_head: bool
    _held_head: bytes | None

    def __init__(self) -> None:
        slot_defaults.fill(self, _DEFAULTS)
        super().__init__()
        self._events = []

    # HTTPChannel dels _command, _path and _version, which have no class default: a plain
    # slot delete is what a dict did (see tap.slot_defaults on why there is no __delattr__)

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

    # --- bytes in -------------------------------------------------------------------------

    def dataReceived(self, data: bytes) -> None:
        self.resetTimeout()
        if self._legacy:
            self._legacy_data(data)
        elif self._handlingRequest or self._events or self._feeding:
            self._hold(data)
        else:
            self._feed(data)

    def _hold(self, data: bytes) -> None:
        """Bytes of a later request that arrived while one is being answered: kept unparsed
        until it is done, and the client paused past ``_optimisticEagerReadSize`` (as
        twisted.web does)."""
        self._dataBuffer.append(data)
        if (self._handlingRequest and not self._waitingForTransport
                and sum(map(len, self._dataBuffer)) > self._optimisticEagerReadSize):
            self._networkProducer.pauseProducing()

    def _feed(self, data: bytes) -> None:
        parser = self._parser
        if parser is None:
            parser = self._parser = request_parser.new(self)
        self._feeding = True
        self._chunk_size = len(data)
        self._ended_here = False
        try:
            parser.feed_data(data)
        except HttpParserUpgrade as upgrade:
            self._feeding = False
            rest = data[upgrade.args[0]:]
            if self._events:
                self._events.append((self._upgraded, (rest,)))
            else:
                self._upgraded(rest)
            return
        except HttpParserCallbackError as error:
            self._feeding = False
            cause = error.__context__
            if not isinstance(cause, request_parser.Stop):
                if cause is not None:
                    raise cause from None
                raise
            return
        except HttpParserError:
            self._feeding = False
            if self._head_starts_chunk():
                self._reparse(data)
            else:
                self._later_or_now(self._malformed)
            return
        self._feeding = False
        if self._in_head:
            self._head_bytes += len(data)
            if self._head_bytes > self.totalHeadersSize + 2 * (self.maxHeaders + 2):
                self._later_or_now(self._head_too_large)
                return
        if self._handlingRequest:
            if not self._in_message:
                self._parser = None  # between requests: an answer in progress keeps no parser
            if self._events and not self._waitingForTransport and (
                    len(data) + sum(map(len, self._dataBuffer)) > self._optimisticEagerReadSize):
                self._networkProducer.pauseProducing()
        elif self._dataBuffer and not self._events and not self._refused and not self._legacy:
            held = b"".join(self._dataBuffer)
            self._dataBuffer = []
            self.dataReceived(held)

    def _later_or_now(self, step: Callable[[], None]) -> None:
        """Run ``step`` now, or after the queued steps when a request is being answered."""
        if self._handlingRequest or self._events:
            self._events.append((step, ()))
        else:
            step()

    # --- parser callbacks: each runs its step now, or queues it behind the request being
    # --- answered (a pipelined request waits for the one before it, as in twisted.web)

    def on_message_begin(self) -> None:
        if self._refused:
            raise request_parser.Stop
        self._in_message = self._in_head = True
        # the whole chunk is this head's when the head starts it; after another request in
        # the same chunk its share is unknown, and the chunk is not counted
        self._head_bytes = -self._chunk_size if self._ended_here else 0
        if self._handlingRequest or self._events:
            self._events.append((self._begin, ()))
        else:
            self._begin()
            if self._refused:
                raise request_parser.Stop

    def on_url(self, part: bytes) -> None:
        if self._refused:
            raise request_parser.Stop
        if self._handlingRequest or self._events:
            self._events.append((self._url_part, (part,)))
        else:
            self._url_part(part)

    def on_header(self, name: bytes, value: bytes) -> None:
        if self._refused:
            raise request_parser.Stop
        if not self._in_head:
            return  # a chunked body's trailer: dropped, as twisted.web does
        if self._handlingRequest or self._events:
            self._events.append((self._header, (name, value)))
        else:
            self._header(name, value)

    def on_headers_complete(self) -> None:
        if self._refused:
            raise request_parser.Stop
        self._in_head = False
        parser = self._parser
        args = (parser.get_method(), parser.get_http_version(), parser.should_keep_alive(),
                parser.should_upgrade())
        if self._handlingRequest or self._events:
            self._events.append((self._head_done, args))
        else:
            self._head_done(*args)
            if self._refused:
                raise request_parser.Stop

    def on_body(self, data: bytes) -> None:
        if self._refused:
            raise request_parser.Stop
        if self._handlingRequest or self._events:
            self._events.append((self._body, (data,)))
        else:
            self.requests[-1].handleContentChunk(data)

    def on_message_complete(self) -> None:
        if self._refused:
            raise request_parser.Stop
        self._in_message = False
        self._ended_here = True
        if self._handlingRequest or self._events:
            self._events.append((self._complete, ()))
        else:
            self._complete()

    # --- the steps: twisted.web's lineReceived / headerReceived / allHeadersReceived ... ----

    def _begin(self) -> None:
        if not self.persistent:
            # after a request that closes the connection, whatever else came is dropped
            self._refused = True
            self.dataReceived = self._discard  # type: ignore[method-assign]
            return
        if INonQueuedRequestFactory.providedBy(self.requestFactory):
            request = self.requestFactory(self)
        else:
            request = self.requestFactory(self, len(self.requests))
        self.requests.append(request)
        self._url = b""
        self._target = None
        self.length = 0
        self._receivedHeaderCount = 0
        self._receivedHeaderSize = 0
        self._upgrade_held = False

    def _url_part(self, part: bytes) -> None:
        url = self._url = self._url + part
        if len(url) + _SHORTEST_LINE_REST > self.MAX_LENGTH:
            self.refuse(414, URI_TOO_LONG, "uri_too_long")

    def _header(self, name: bytes, value: bytes) -> None:
        if self._target is None:
            self._target = self._url
            self._receivedHeaderSize = len(self._url) + _SHORTEST_LINE_REST
        if self._receivedHeaderCount >= self.maxHeaders:
            self.refuse(431, "Too many request headers", "headers_too_large")
            return
        value = value.strip(b" \t")
        size = self._receivedHeaderSize = self._receivedHeaderSize + len(name) + 1 + len(value)
        if size > self.totalHeadersSize:
            self.refuse(431, HEADERS_TOO_LARGE, "headers_too_large")
            return
        if len(name) in _FRAMING_LENGTHS:
            lowered = name.lower()
            if lowered == b"content-length":
                self.length = int(value)  # llhttp checked the digits and refuses a second one
            elif lowered == b"transfer-encoding":
                coding = value.lower()
                if coding == b"chunked":
                    self.length = None
                elif coding != b"identity":
                    self._malformed()
                    return
        self.requests[-1].requestHeaders.addRawHeader(name, value)
        self._receivedHeaderCount += 1

    def _head_done(self, method: bytes, version: str, keep_alive: bool, upgrade: bool) -> None:
        if self._target is None:
            self._target = self._url
        line = len(method) + len(self._url) + 10
        if line > self.MAX_LENGTH:
            self.refuse(414, URI_TOO_LONG, "uri_too_long")
            return
        self._command = method
        self._path = self._url
        self._version = _VERSIONS.get(version) or b"HTTP/" + version.encode("ascii")
        self.allHeadersReceived()
        if self._refused:
            return
        if not keep_alive:
            self.persistent = False  # llhttp reads nothing after this request: neither do we
        if upgrade:
            self._upgrade_transport = self.transport
            # llhttp leaves the body of an Upgrade/CONNECT request unread: read it below
            self._upgrade_held = self.length != 0

    def _body(self, data: bytes) -> None:
        self.requests[-1].handleContentChunk(data)

    def _complete(self) -> None:
        if not self._upgrade_held:
            self.allContentReceived()

    def _malformed(self) -> None:
        """Answer 400 and close, as twisted.web does for a request it cannot parse."""
        if self._refused or self.transport is None:
            return
        self._refused = True
        self.persistent = False
        self.dataReceived = self._discard  # type: ignore[method-assign]
        self._respondToBadRequestAndDisconnect()

    def _head_starts_chunk(self) -> bool:
        """Whether llhttp stopped in a head that began this chunk, with nothing queued."""
        return (self._in_head and not self._ended_here and self._head_bytes == 0
                and not self._handlingRequest and not self._events and not self._refused)

    def _reparse(self, data: bytes) -> None:
        """llhttp refused a head twisted.web's parser may take (it is stricter: raw non-ASCII
        bytes in the target, folded header lines, ``Transfer-Encoding: identity``): the
        connection goes on with twisted.web's parser from the head's first byte, so such a
        client gets what it got before -- the request, or twisted.web's own 400."""
        self.requests.pop()  # twisted.web's lineReceived makes its own
        self.length = 0
        self._receivedHeaderCount = self._receivedHeaderSize = 0
        self._target = None
        self._transferDecoder = None
        self._in_head = self._in_message = False
        self._parser = None
        self._legacy = True
        self.line_mode = 1
        self._legacy_data(data)

    def _head_too_large(self) -> None:
        """A head still arriving past every limit (one endless header line, say): refused
        before llhttp buffers more of it.  A long target was refused by ``_url_part``
        already, so what is too large here are the headers."""
        self._target = self._url
        self.refuse(431, HEADERS_TOO_LARGE, "headers_too_large")

    def setLineMode(self, extra: bytes = b"") -> None:
        """twisted.web calls this when an answer is done: the requests that arrived meanwhile
        are parsed now (the queued steps first, then the bytes held unparsed)."""
        if self._legacy:
            basic.LineReceiver.setLineMode(self, extra)
            return
        self.line_mode = 1
        events = self._events
        while events and not self._handlingRequest and not self._refused:
            step, args = events.pop(0)
            step(*args)
        if self._refused:
            events.clear()
            return
        if not extra:
            return
        if not self._legacy and (self._handlingRequest or events):
            self._dataBuffer.insert(0, extra)
        else:
            self.dataReceived(extra)

    # --- protocol upgrades ----------------------------------------------------------------

    def _upgraded(self, rest: bytes) -> None:
        """llhttp stopped after the head of an Upgrade (or CONNECT) request.

        A WebSocket resource (autobahn) took the transport over while the request was
        dispatched: the bytes after the head belong to it.  Otherwise the request was answered
        as plain HTTP, and the connection goes on with twisted.web's own line parser (which
        ignores Upgrade), reading the held request's body first when it has one."""
        self._parser = None
        self._legacy = True
        transport, self._upgrade_transport = self._upgrade_transport, None
        if self._refused:
            return
        if self._upgrade_held:
            self._upgrade_held = False
            request = self.requests[-1]
            if self.length is None:
                decoder: Any = _ChunkedTransferDecoder(request.handleContentChunk,
                                                       self._finishRequestBody)
            else:
                decoder = _IdentityTransferDecoder(self.length, request.handleContentChunk,
                                                   self._finishRequestBody)
            self._transferDecoder = decoder
            self._HTTPChannel__first_line = 0
            self.setRawMode()
        elif self.transport is None and transport is not None:
            self._successor = request_parser.successor_of(transport)
        if rest:
            self._legacy_data(rest)

    def _legacy_data(self, data: bytes) -> None:
        if self._successor is not None:
            self._successor.dataReceived(data)
        else:
            basic.LineReceiver.dataReceived(self, data)

    # --- twisted.web's line parser (after an Upgrade request only) ---------------------------

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
            self.refuse(414, URI_TOO_LONG, "uri_too_long")
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
        self._parser = None
        self._events.clear()
        super().connectionLost(reason)

    # --- the response: head and first body bytes in one send (tap.response_write) ----------

    def hold_head(self) -> None:
        """Keep the head ``writeHeaders`` makes until a body write carries it or
        ``release_head``: called by the request around its first ``write``."""
        self._holding_head = True

    def release_head(self) -> None:
        """Stop holding; a head no body write carried (HEAD, 204, an empty write) goes now."""
        self._holding_head = False
        head = self._held_head
        if head is not None:
            self._held_head = None
            if self.transport is not None:
                write_now(self.transport, head)

    def writeHeaders(self, version: bytes, code: bytes, reason: bytes, headers: Any) -> None:
        if not isinstance(headers, Headers):
            super().writeHeaders(version, code, reason, headers)
            return
        head = response_write.head_bytes(version, code, reason, headers)
        if self._holding_head:
            self._held_head = head
        else:
            write_now(self.transport, head)

    def write(self, data: bytes) -> None:
        head = self._held_head
        if head is not None:
            self._held_head = None
            data = head + data
        write_now(self.transport, data)

    def writeSequence(self, iovec: Any) -> None:
        head = self._held_head
        if head is not None:
            self._held_head = None
            write_now(self.transport, head + b"".join(iovec))
        else:
            write_now(self.transport, b"".join(iovec))


class LockgateSite(Site):
    """A Site speaking ``LockgateChannel`` with ``LockgateRequest``s."""

    protocol = LockgateChannel  # type: ignore[assignment]  # HTTP/1.1 only (no h2 installed)

    def __init__(self, resource: Any, **kwargs: Any) -> None:
        kwargs.setdefault("requestFactory", LockgateRequest)
        super().__init__(resource, **kwargs)
