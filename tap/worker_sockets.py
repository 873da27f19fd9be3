"""The listening sockets of ``--workers N``: opened once by the supervisor, one per worker.

Why these sockets, of the two ways the issue allows:

- One socket inherited by every worker shares one accept queue, and the kernel wakes every
  worker for each connection; Twisted's port then accepts up to a hundred connections per
  wake-up, so whichever worker wakes first takes a burst -- with keep-alive clients (64
  connections opened at once) one worker ends up with most of the load.
- ``SO_REUSEPORT`` sockets, one per worker bound to the same address, each have their own accept
  queue and the kernel spreads new connections over them by a hash of the addresses: an even
  spread.  But sockets each worker binds itself come and go with the worker: connections queued
  on a dying worker's socket are reset, and any process of the same user may join the group.

So the supervisor binds N ``SO_REUSEPORT`` sockets per ``--listen`` endpoint before any worker
runs (privileged ports and ``port 0`` work once, the address is taken by us alone) and hands
worker i its socket i by inheritance (``AdoptedStreamServerEndpoint`` in the worker).  The
supervisor keeps its copy open: connections that arrive while worker i restarts wait in its
queue and are served by the new worker i instead of being refused.

Only TCP endpoints can be shared this way (``tcp:``, ``tcp6:``); other endpoint kinds are
refused with a clear message when ``--workers`` is above 1.
"""

from __future__ import annotations

import socket
from dataclasses import dataclass

DEFAULT_BACKLOG = 50


class UnsupportedEndpoint(ValueError):
    """An endpoint string ``--workers`` cannot share between processes."""


@dataclass(frozen=True)
class TCPEndpoint:
    """The parts of a ``tcp:`` / ``tcp6:`` server endpoint string that matter here."""

    family: int
    port: int
    interface: str
    backlog: int

    def with_port(self, port: int) -> str:
        """The endpoint string of the same listener on another port."""
        kind = "tcp6" if self.family == socket.AF_INET6 else "tcp"
        interface = self.interface.replace(":", "\\:")
        return f"{kind}:{port}:interface={interface}:backlog={self.backlog}"


def _split(description: str) -> list[str]:
    """Split on ``:`` except where escaped with a backslash (as endpoint strings do)."""
    parts, current, escaped = [], [], False
    for char in description:
        if escaped:
            current.append(char)
            escaped = False
        elif char == "\\":
            escaped = True
        elif char == ":":
            parts.append("".join(current))
            current = []
        else:
            current.append(char)
    parts.append("".join(current))
    return parts


def parse_tcp(description: str) -> TCPEndpoint:
    """``tcp:8080:interface=127.0.0.1`` (or ``tcp:port=8080``, ``tcp6:``, a bare port)."""
    parts = _split(description.strip())
    if len(parts) == 1 and parts[0].isdigit():
        parts = ["tcp", parts[0]]
    kind, args = parts[0].lower(), parts[1:]
    if kind not in ("tcp", "tcp6"):
        raise UnsupportedEndpoint(
            f"--workers above 1 shares tcp: listeners only, not {description!r}")
    family = socket.AF_INET6 if kind == "tcp6" else socket.AF_INET
    options: dict[str, str] = {}
    positional: list[str] = []
    for arg in args:
        name, equals, value = arg.partition("=")
        if equals:
            options[name] = value
        else:
            positional.append(arg)
    if positional:
        options.setdefault("port", positional[0])
    unknown = set(options) - {"port", "interface", "backlog"}
    if unknown:
        raise UnsupportedEndpoint(f"{description!r}: {', '.join(sorted(unknown))} is not "
                                  "supported with --workers above 1")
    try:
        port = int(options["port"])
        backlog = int(options.get("backlog", DEFAULT_BACKLOG))
    except (KeyError, ValueError) as exc:
        raise UnsupportedEndpoint(f"{description!r}: needs a numeric port") from exc
    interface = options.get("interface", "::" if family == socket.AF_INET6 else "0.0.0.0")  # noqa: S104 - as tcp: means
    return TCPEndpoint(family, port, interface, backlog)


def open_shared(endpoint: TCPEndpoint, count: int) -> list[socket.socket]:
    """``count`` listening ``SO_REUSEPORT`` sockets on one address (port 0: one chosen port)."""
    sockets: list[socket.socket] = []
    port = endpoint.port
    try:
        for _ in range(count):
            sock = socket.socket(endpoint.family, socket.SOCK_STREAM)
            sockets.append(sock)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
            sock.bind((endpoint.interface, port))
            sock.listen(endpoint.backlog)
            port = sock.getsockname()[1]
    except OSError:
        for sock in sockets:
            sock.close()
        raise
    return sockets
