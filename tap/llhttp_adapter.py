"""llhttp's parser callbacks turned into twisted.web's own channel steps, in twisted.web's order.

Requests are parsed by httptools (llhttp, in C; ``tap.request_parser``) instead of
twisted.web's line-by-line Python parser, which cost about a tenth of a /v1 call's CPU (issue
22).  Everything else stays twisted.web's channel, driven as its own parser drives it: a
request is created when its first byte arrives, its headers go to ``requestHeaders`` as
``headerReceived`` would put them, ``allHeadersReceived`` (persistence, ``Expect:
100-continue``, the caps of ``tap.request_refusals``) runs when the head is in, body pieces go
to ``handleContentChunk`` as they arrive, and ``allContentReceived`` dispatches the request.

A request pipelined behind one still being answered waits: what llhttp already parsed of it is
kept as queued steps, what arrives later stays unparsed in ``_dataBuffer`` (the client paused
past ``_optimisticEagerReadSize``), and both are replayed in order when ``requestDone``
switches back to "line mode".  Where llhttp stops (the head of an Upgrade request, a head it
refuses that twisted.web's parser may take) ``tap.parser_handover`` goes on.

The parser is made when bytes arrive and dropped while a request is answered between
requests, so an open stream keeps none.  The callbacks and steps run once per field and
request: they are written out, each with its own refusal check, rather than routed through a
shared dispatcher that would add a call to each.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from httptools import HttpParserCallbackError, HttpParserError, HttpParserUpgrade
from twisted.protocols import basic
from twisted.web.iweb import INonQueuedRequestFactory

from tap import request_parser
from tap.parser_handover import ParserHandover

#: a request line's bytes besides the target, at the least: "GET", two spaces, "HTTP/1.1"
_SHORTEST_LINE_REST = 13
#: len(b"content-length"), len(b"transfer-encoding"): the headers that frame a body
_FRAMING_LENGTHS = (14, 17)
_VERSIONS = {"1.1": b"HTTP/1.1", "1.0": b"HTTP/1.0"}

#: this part's per-connection attributes (slotted by ``LockgateChannel``) and their first
#: values; ``_events`` too, a list of its own per connection
STATE: dict[str, Any] = {"_parser": None, "_feeding": False, "_in_head": False,
                         "_in_message": False, "_head_bytes": 0, "_chunk_size": 0,
                         "_ended_here": False, "_url": b""}


class LlhttpAdapter(ParserHandover):
    """The channel reading its requests with llhttp.

    ``_events``: the steps parsed ahead of the request being answered, waiting their turn.
    ``_feeding``: llhttp is in ``feed_data``.  ``_in_message`` / ``_in_head``: llhttp is in a
    request / its head.  ``_head_bytes``: what the current head took of the chunks so far (to
    stop an endless head).  ``_chunk_size`` / ``_ended_here``: the size of the chunk being fed
    and whether a request ended in it.  ``_url``: the target's bytes so far."""

    __slots__ = ()

    _parser: Any
    _events: list[tuple[Callable[..., None], tuple[Any, ...]]]
    _feeding: bool
    _in_head: bool
    _in_message: bool
    _head_bytes: int
    _chunk_size: int
    _ended_here: bool
    _url: bytes

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
        if self._handlingRequest:
            self._pause_past_eager_read(0)

    def _pause_past_eager_read(self, parsed: int) -> None:
        """Pause the client once what waits behind the request being answered (``parsed``
        bytes kept as queued steps, and the bytes held unparsed) passes
        ``_optimisticEagerReadSize``, as twisted.web does."""
        if not self._waitingForTransport and (
                parsed + sum(map(len, self._dataBuffer)) > self._optimisticEagerReadSize):
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
            self._parser = None  # llhttp reads nothing after an Upgrade head
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
                self._in_head = self._in_message = False
                self._parser = None
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
            if self._events:
                self._pause_past_eager_read(len(data))
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

    def _head_starts_chunk(self) -> bool:
        """Whether llhttp stopped in a head that began this chunk, with nothing queued."""
        return (self._in_head and not self._ended_here and self._head_bytes == 0
                and not self._handlingRequest and not self._events and not self._refused)

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
            self.uri_too_long()

    def _header(self, name: bytes, value: bytes) -> None:
        if self._target is None:
            self._target = self._url
            self._receivedHeaderSize = len(self._url) + _SHORTEST_LINE_REST
        if self._receivedHeaderCount >= self.maxHeaders:
            self.too_many_headers()
            return
        value = value.strip(b" \t")
        size = self._receivedHeaderSize = self._receivedHeaderSize + len(name) + 1 + len(value)
        if size > self.totalHeadersSize:
            self.headers_too_large()
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
            self.uri_too_long()
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
            # llhttp leaves the body of an Upgrade/CONNECT request unread: the hand-over reads it
            self._upgrade_held = self.length != 0

    def _body(self, data: bytes) -> None:
        self.requests[-1].handleContentChunk(data)

    def _complete(self) -> None:
        if not self._upgrade_held:
            self.allContentReceived()

    def _head_too_large(self) -> None:
        """A head still arriving past every limit (one endless header line, say): refused
        before llhttp buffers more of it.  A long target was refused by ``_url_part``
        already, so what is too large here are the headers."""
        self._target = self._url
        self.headers_too_large()
