"""Where llhttp stops reading a connection: the Upgrade hand-over and twisted.web's own parser.

llhttp (``tap.llhttp_adapter``) reads no further than the head of an Upgrade (or CONNECT)
request, and refuses some heads twisted.web's parser takes (raw non-ASCII bytes in the
target, folded header lines, ``Transfer-Encoding: identity``).  In both cases the connection
goes on as it did before llhttp: the bytes after an Upgrade head belong to the WebSocket
resource that took the transport over, if one did; otherwise twisted.web's line parser
(``lineReceived`` and friends, with the same limits and refusals as llhttp's path,
``tap.request_refusals``) reads the rest of the connection.
"""

from __future__ import annotations

from typing import Any

from twisted.protocols import basic
from twisted.web.http import _ChunkedTransferDecoder, _IdentityTransferDecoder

from tap import request_parser
from tap.request_refusals import RefusingChannel

#: this part's per-connection attributes (slotted by ``LockgateChannel``) and their first values
STATE: dict[str, Any] = {"_legacy": False, "_successor": None, "_upgrade_held": False,
                         "_upgrade_transport": None}


class ParserHandover(RefusingChannel):
    """The channel once llhttp has stopped: a WebSocket successor or twisted.web's parser.

    ``_legacy``: twisted.web's parser reads this connection from now on.  ``_successor``: the
    protocol a WebSocket resource connected to the transport (it gets the bytes).
    ``_upgrade_held``: an Upgrade request's body llhttp left unread, read here instead.
    ``_upgrade_transport``: the transport as it was when an Upgrade head came in (a WebSocket
    resource takes it from the channel while the request is dispatched)."""

    __slots__ = ()

    _legacy: bool
    _successor: Any
    _upgrade_held: bool
    _upgrade_transport: Any

    def _upgraded(self, rest: bytes) -> None:
        """llhttp stopped after the head of an Upgrade (or CONNECT) request.

        A WebSocket resource (autobahn) took the transport over while the request was
        dispatched: the bytes after the head belong to it.  Otherwise the request was answered
        as plain HTTP, and the connection goes on with twisted.web's own line parser (which
        ignores Upgrade), reading the held request's body first when it has one."""
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

    def _reparse(self, data: bytes) -> None:
        """llhttp refused a head twisted.web's parser may take: the connection goes on with
        twisted.web's parser from the head's first byte, so such a client gets what it got
        before -- the request, or twisted.web's own 400."""
        self.requests.pop()  # twisted.web's lineReceived makes its own
        self.length = 0
        self._receivedHeaderCount = self._receivedHeaderSize = 0
        self._target = None
        self._transferDecoder = None
        self._legacy = True
        self.line_mode = 1
        self._legacy_data(data)

    def _legacy_data(self, data: bytes) -> None:
        if self._successor is not None:
            self._successor.dataReceived(data)
        else:
            basic.LineReceiver.dataReceived(self, data)

    # --- twisted.web's line parser, bounded --------------------------------------------------

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
            self.uri_too_long()
        else:
            self.headers_too_large()

    def headerReceived(self, line: bytes) -> bool:
        if self._receivedHeaderCount >= self.maxHeaders:
            self.too_many_headers()
            return False
        return bool(super().headerReceived(line))
