"""The limits a ``LockgateChannel`` puts on a request, and how it refuses one past them.

twisted.web buffers a whole request body before any resource sees it, and drops the connection
without an answer when a header line is longer than 16 KiB.  A Lockgate channel

- refuses a declared ``Content-Length`` above the route family's cap as soon as the headers are
  in (413, before reading the body);
- stops a chunked body at the cap (``LockgateRequest`` counts what it buffers and calls
  ``body_over_limit``);
- answers 431 when the headers exceed ``totalHeadersSize`` or ``maxHeaders``, or one header
  line exceeds ``MAX_LENGTH`` (414 when it is the request line);
- answers 400 and closes for a request it cannot parse, as twisted.web does;

each time in the family's error shape (``tap.body_limits``).  After a refusal the rest of the
client's upload is read and thrown away for at most ``LINGER`` seconds (so the client gets to
read the answer instead of a reset) and the connection is then closed.

Both request parsers (``tap.llhttp_adapter``, ``tap.parser_handover``) find the limits crossed;
the statuses, messages and the refusing itself live here, once.
"""

from __future__ import annotations

from typing import Any

from twisted.web.http import HTTPChannel

from tap import body_limits

#: seconds a refused connection keeps discarding the client's upload before it is cut
LINGER = 2.0

HEADERS_TOO_LARGE = "Request headers are too large"
TOO_MANY_HEADERS = "Too many request headers"
URI_TOO_LONG = "Request target is too long"

#: this part's per-connection attributes (slotted by ``LockgateChannel``) and their first values
STATE: dict[str, Any] = {"_refused": False, "_linger": None, "_target": None}


class RefusingChannel(HTTPChannel):
    """twisted.web's channel with the request limits enforced and refused in the family's shape.

    ``_target`` is the request target as far as it is known (``None`` between requests): it
    picks the route family, whose cap and error shape a refusal uses."""

    __slots__ = ()

    totalHeadersSize = 16384
    maxHeaders = 100

    _refused: bool
    _linger: Any
    _target: bytes | None

    def allHeadersReceived(self) -> None:
        family = body_limits.family_of(self._target)
        if self.length is not None and self.length > family.limit:
            self.body_over_limit(family.limit)
            return
        self.requests[-1].body_limit = family.limit
        super().allHeadersReceived()

    def allContentReceived(self) -> None:
        self._target = None
        super().allContentReceived()

    def rawDataReceived(self, data: bytes) -> None:
        if not self._refused:
            super().rawDataReceived(data)

    # --- the refusals ---------------------------------------------------------------------

    def body_over_limit(self, limit: int) -> None:
        """A declared or streamed body passes its family's cap (the request calls this for a
        streamed one)."""
        self.refuse(413, f"Request body exceeds maximum {limit} bytes", "body_too_large")

    def uri_too_long(self) -> None:
        self.refuse(414, URI_TOO_LONG, "uri_too_long")

    def headers_too_large(self) -> None:
        self.refuse(431, HEADERS_TOO_LARGE, "headers_too_large")

    def too_many_headers(self) -> None:
        self.refuse(431, TOO_MANY_HEADERS, "headers_too_large")

    def refuse(self, status: int, message: str, code: str) -> None:
        """Answer ``status`` now, discard whatever else the client sends, then close."""
        if not self._stop_reading():
            return
        self.setRawMode()  # no more line parsing of what is still buffered
        transport: Any = self.transport  # there: _stop_reading checked
        transport.write(body_limits.raw_response(self._target, status, message, code))
        lose_write = getattr(transport, "loseWriteConnection", None)
        if lose_write is None:
            transport.loseConnection()
            return
        lose_write()
        self._linger = self.callLater(LINGER, self._cut)

    def _malformed(self) -> None:
        """Answer 400 and close, as twisted.web does for a request it cannot parse."""
        if self._stop_reading():
            self._respondToBadRequestAndDisconnect()

    def _stop_reading(self) -> bool:
        """Mark the connection refused and have it drop what the client sends from now on;
        False (and nothing changed) when it was refused already or is gone."""
        if self._refused or self.transport is None:
            return False
        self._refused = True
        self.persistent = False
        self.dataReceived = self._discard  # type: ignore[method-assign]
        return True

    def _cut(self) -> None:
        transport: Any = self.transport
        if transport is not None:
            transport.abortConnection()

    def _discard(self, data: bytes) -> None:
        """The refused request's remaining upload: read (so the client can finish) and dropped."""
