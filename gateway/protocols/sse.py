"""Server-sent events: an incremental parser and the encoders, on the streaming hot path.

Every streamed answer passes through here twice (upstream bytes -> events for metering and
translation; events -> bytes for the client), so the parser works on whole buffers with
``bytes.split``/``bytes.find`` and never loops per byte.  It accepts what the WHATWG
event-stream format allows: ``\\n``, ``\\r\\n`` and bare ``\\r`` line endings, split anywhere
across network chunks; comments (``:`` lines); ``event``, ``data`` (multi-line, joined with
``\\n``), ``id`` and ``retry`` fields; a leading UTF-8 BOM.  A misbehaving upstream that never
ends a line or an event cannot make us buffer without bound: past ``max_event_bytes`` the
parser raises ``SSETooLarge``, carrying the events the same ``feed`` completed before the fault
(``events``): a relay fed one read's worth of chunks at once still delivers every whole event
that came before it.

Pure module: no networking, no Twisted.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

#: default cap on one buffered line / one event's data (generous: image streams carry base64)
DEFAULT_MAX_EVENT_BYTES = 16 * 1024 * 1024

_BOM = b"\xef\xbb\xbf"


class SSEError(ValueError):
    """The byte stream cannot be parsed as server-sent events.

    ``events``: the events the failing ``feed`` completed before the fault, in order."""

    events: Sequence[SSEEvent] = ()


class SSETooLarge(SSEError):
    """A line or an event grew past the configured cap."""


class SSEEvent(NamedTuple):
    """One dispatched event.  ``event`` is None when the stream gave no ``event:`` field."""

    data: bytes
    event: str | None = None
    id: str | None = None
    retry: int | None = None


class SSEParser:
    """Feed it chunks as they arrive; it returns the events completed by each chunk."""

    __slots__ = ("_cap", "_data", "_data_size", "_event", "_id", "_partial", "_retry",
                 "_skip_lf", "_started")

    def __init__(self, max_event_bytes: int = DEFAULT_MAX_EVENT_BYTES) -> None:
        self._cap = max_event_bytes
        self._partial = b""          # an unterminated line carried to the next chunk
        self._skip_lf = False        # the last chunk ended in "\r": a leading "\n" belongs to it
        self._started = False        # BOM check done
        self._data: list[bytes] = []
        self._data_size = 0
        self._event: str | None = None
        self._id: str | None = None
        self._retry: int | None = None

    @property
    def buffered(self) -> int:
        """Bytes held for an incomplete line or event (what a slow-drip upstream costs us)."""
        return len(self._partial) + self._data_size

    def feed(self, data: bytes) -> list[SSEEvent]:
        if not data:
            return []
        if self._skip_lf:
            self._skip_lf = False
            if data[:1] == b"\n":
                data = data[1:]
                if not data:
                    return []
        if self._partial:
            data = self._partial + data
            self._partial = b""
        if not self._started:
            if len(data) < 3 and _BOM.startswith(data):
                self._partial = data
                return []
            self._started = True
            if data.startswith(_BOM):
                data = data[3:]
        if b"\r" in data:
            if data[-1:] == b"\r":
                self._skip_lf = True
            data = data.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        lines = data.split(b"\n")
        rest = lines.pop()
        events: list[SSEEvent] = []
        for line in lines:
            if not line:
                if self._data:
                    events.append(self._dispatch())
                else:
                    self._event = None
                continue
            if line[0] == 58:  # ":" comment
                continue
            name, colon, value = line.partition(b":")
            if colon and value[:1] == b" ":
                value = value[1:]
            if name == b"data":
                self._data_size += len(value) + 1
                if self._data_size > self._cap:
                    raise _too_large(f"SSE event larger than {self._cap} bytes", events)
                self._data.append(value)
            elif name == b"event":
                self._event = value.decode("utf-8", "replace")
            elif name == b"id":
                if b"\0" not in value:
                    self._id = value.decode("utf-8", "replace")
            elif name == b"retry" and value.isdigit():
                self._retry = int(value)
            # any other field name is ignored, as the format requires
        if len(rest) > self._cap:
            raise _too_large(f"SSE line longer than {self._cap} bytes", events)
        self._partial = rest
        return events

    def _dispatch(self) -> SSEEvent:
        data = self._data[0] if len(self._data) == 1 else b"\n".join(self._data)
        event = SSEEvent(data, self._event, self._id, self._retry)
        self._data = []
        self._data_size = 0
        self._event = None
        self._retry = None
        return event


def _too_large(message: str, events: list[SSEEvent]) -> SSETooLarge:
    error = SSETooLarge(message)
    error.events = events
    return error


def encode_event(data: bytes | str, event: str | None = None, id: str | None = None) -> bytes:
    """One event on the wire; multi-line data becomes several ``data:`` lines."""
    payload = data.encode() if isinstance(data, str) else data
    head = b""
    if event is not None:
        head = b"event: " + event.encode() + b"\n"
    if id is not None:
        head += b"id: " + id.encode() + b"\n"
    if b"\n" not in payload and b"\r" not in payload:
        return head + b"data: " + payload + b"\n\n"
    lines = payload.replace(b"\r\n", b"\n").replace(b"\r", b"\n").split(b"\n")
    return head + b"".join(b"data: " + line + b"\n" for line in lines) + b"\n"


def comment(text: str = "") -> bytes:
    """A comment block (clients ignore it; proxies see traffic). Used for heartbeats."""
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    return "".join(f": {line}\n" if line else ":\n" for line in lines).encode() + b"\n"


#: the heartbeat sent on quiet streams
PING = comment("ping")
#: the OpenAI-family end-of-stream marker
DONE = encode_event(b"[DONE]")
