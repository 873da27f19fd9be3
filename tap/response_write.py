"""A response's head as twisted.web writes it, for ``LockgateChannel`` to send with its body.

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
"""

from __future__ import annotations

from twisted.web.http_headers import Headers


def head_bytes(version: bytes, code: bytes, reason: bytes, headers: Headers) -> bytes:
    """The status line and header block exactly as ``HTTPChannel.writeHeaders`` writes them."""
    parts = [version, b" ", code, b" ", reason, b"\r\n"]
    for name, values in headers.getAllRawHeaders():
        for value in values:
            parts += (name, b": ", value, b"\r\n")
    parts.append(b"\r\n")
    return b"".join(parts)
