"""Write on a plain TCP transport at once when nothing is waiting to be written.

Used for a link's frames, for the gateway's HTTP answers (``tap.http_channel``) and for the
requests the lean upstream client sends (``gateway.channels.lean_connection``).

Why: Twisted's ``write`` appends the bytes to the transport's buffer and asks the reactor to
watch the socket for room; the next pass of the reactor loop sends them and stops watching:
two ``epoll_ctl`` calls and one more loop pass for every frame -- for every heartbeat ack, 100
times a second at 2,000 idle links, and on every dispatched task.  When the transport has
nothing buffered, the kernel's send buffer nearly always has room, so one ``send()`` now does
the same job.

Everything else takes Twisted's path unchanged: a TLS transport, bytes already buffered (what is
sent here never overtakes them), a connection that is closing or closed, and whatever a partial
or failed ``send()`` left (appended to the buffer, so its errors surface exactly as before).
"""

from __future__ import annotations

from typing import Any

from twisted.internet import tcp

#: a plain TCP connection's transport, accepted or connected (a TLS one is a wrapper, not these)
_PLAIN_TCP = (tcp.Server, tcp.Client)


def write_now(transport: Any, data: bytes) -> None:
    """``transport.write(data)``, sending straight away where that changes nothing else."""
    if (type(transport) in _PLAIN_TCP and not transport.TLS and transport.connected
            and not transport.disconnecting and not transport._writeDisconnecting
            and not transport._writeDisconnected and not transport.dataBuffer
            and not transport._tempDataBuffer):
        try:
            sent = transport.socket.send(data)
        except OSError:
            # no room (EAGAIN) or a broken connection: Twisted's write finds out and acts
            sent = 0
        if sent == len(data):
            return
        data = data[sent:]
    transport.write(data)
