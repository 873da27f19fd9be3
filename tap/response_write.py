"""The channel's write path: an answer's head goes out with its first body bytes, in one send.

Why: twisted.web's ``Request.write`` hands the channel the head (``writeSequence``) and then the
body (``write``); Twisted's transport buffers both and asks the reactor to watch the socket for
room, and the next pass of the reactor loop sends them and stops watching: two ``epoll_ctl``
calls, one more loop pass and a join of the buffered pieces for every answer (issue 22).  Here
the head is built as twisted.web builds it (same bytes, same order), held by the channel while
the request's first ``write`` runs, and goes out together with the body bytes of that write through
``socket_write.write_now``: one ``send()`` when the transport has nothing buffered, Twisted's
``write`` otherwise (TLS, bytes already waiting, a closing connection, a partial send).

A head is never held past the ``write`` that made it: a streamed answer's headers leave when
they did before, and a head with no body after it (HEAD, 204/304, an empty first write) is
sent at the end of that same call.

``HeadHolding`` is that part of ``LockgateChannel``; ``LockgateRequest.write`` holds and
releases the head around its first ``write``.
"""

from __future__ import annotations

from typing import Any

from twisted.web.http import HTTPChannel
from twisted.web.http_headers import Headers

from gateway.links.socket_write import write_now

#: this part's per-connection attributes (slotted by ``LockgateChannel``) and their first values
STATE: dict[str, Any] = {"_holding_head": False, "_held_head": None}


def head_bytes(version: bytes, code: bytes, reason: bytes, headers: Headers) -> bytes:
    """The status line and header block exactly as ``HTTPChannel.writeHeaders`` writes them."""
    parts = [version, b" ", code, b" ", reason, b"\r\n"]
    for name, values in headers.getAllRawHeaders():
        for value in values:
            parts += (name, b": ", value, b"\r\n")
    parts.append(b"\r\n")
    return b"".join(parts)


class HeadHolding(HTTPChannel):
    """The channel's write side: a held head goes out with the body bytes written next.

    ``_holding_head``: the request's first ``write`` is running.  ``_held_head``: the head
    ``writeHeaders`` made meanwhile, not sent yet."""

    __slots__ = ()

    _holding_head: bool
    _held_head: bytes | None

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
        head = head_bytes(version, code, reason, headers)
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
