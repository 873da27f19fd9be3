"""A listen queue long enough for a burst of new connections.

Twisted's TCP and UNIX server endpoints default to a backlog of 50.  When hundreds of clients
connect at the same moment (a fleet of agents starting their streams, a load balancer
re-opening its pool) the kernel's accept queue overflows: the handshakes it drops are retried
by the clients after one second, then three, and those streams start seconds late although
the process was idle.  So every ``--listen`` endpoint that names no ``backlog`` gets
``LISTEN_BACKLOG`` (the kernel caps it at ``net.core.somaxconn``); an explicit ``backlog=``
is kept as given.
"""

from __future__ import annotations

from twisted.internet.endpoints import _parse

#: the accept queue asked for (Linux caps it at net.core.somaxconn, 4096 by default since 5.4)
LISTEN_BACKLOG = 4096
#: endpoint types whose server endpoint takes a ``backlog`` argument
_WITH_BACKLOG = ("tcp", "tcp6", "unix", "ssl")


def with_backlog(description: str, backlog: int = LISTEN_BACKLOG) -> str:
    """``description`` (a strports endpoint string) with ``backlog`` added when it is a
    TCP/UNIX/TLS listener that names none; anything else unchanged."""
    args, kwargs = _parse(description)
    if not args or args[0] not in _WITH_BACKLOG or "backlog" in kwargs:
        return description
    return f"{description}:backlog={backlog}"
