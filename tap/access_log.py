"""Access-log lines in combined format, credentials removed, written in blocks.

Google-style clients may send the API key as ``?key=``; Twisted's default formatter would write
it to the log verbatim (gateway contract §3: never logged), so the query string is redacted.

Why not Twisted's default destination (``log.logfile``): every line then becomes a log event
that the twistd observer formats with its own timestamp and writes on its own -- about 6% of a
gateway request's CPU at full load.  ``BufferedAccessLog`` keeps finished lines in memory and
writes them with one ``os.write`` per second (or per 64 KiB), the way web servers buffer their
access logs; whatever is buffered is written when the listener stops.
"""

from __future__ import annotations

import os
import re
from typing import Any

from twisted.internet.address import IPv4Address, IPv6Address
from twisted.internet.interfaces import IDelayedCall, IReactorTime
from twisted.web.http import combinedLogFormatter

#: fields combinedLogFormatter writes as they are: printable ASCII except ``"`` and ``\``
_PLAIN = re.compile(rb'[ !#-\[\]-~]*')

_SECRET_QUERY = re.compile(rb"([?&](?:key|api_key|token|access_token)=)[^&#]*", re.IGNORECASE)

#: ``--access-log`` values that are not paths
STDOUT = "-"
OFF = "off"


def redact_uri(uri: bytes) -> bytes:
    if b"?" not in uri:
        return uri
    return _SECRET_QUERY.sub(rb"\1[redacted]", uri)


class _Redacted:
    """A read-only view of a request whose ``uri`` is redacted."""

    def __init__(self, request: Any) -> None:
        self._request = request
        self.uri = redact_uri(request.uri)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._request, name)


#: (peer host, method, uri, protocol, referrer, agent) -> the line's text around its
#: timestamp, code and length, or None when Twisted's formatter must write it.  A pure function
#: of its key -- the same few clients call the same few paths -- so it is never stale; bounded
_PARTS: dict[tuple[str, bytes, bytes, bytes, bytes, bytes], tuple[str, str, str] | None] = {}
_PARTS_MAX = 4096


def _line_parts(key: tuple[str, bytes, bytes, bytes, bytes, bytes]
                ) -> tuple[str, str, str] | None:
    host, method, uri, protocol, referrer, agent = key
    plain = _PLAIN.fullmatch
    if not (plain(uri) and plain(method) and plain(protocol) and plain(referrer)
            and plain(agent)):
        return None
    return (f'"{host}" - - ', f' "{method.decode()} {uri.decode()} {protocol.decode()}" ',
            f' "{referrer.decode()}" "{agent.decode()}"')


def redacting_log_formatter(timestamp: str, request: Any) -> str:
    """Twisted's combined-format line, query credentials redacted.

    The common line (a plain path, printable ASCII headers, an IP peer) is built here
    directly: Twisted's formatter escapes every field through ``repr``, which was a third of
    the access log's cost.  The checked, decoded text of a request's fields is kept per
    distinct set of them (``_PARTS``), so a repeated caller costs one lookup.  Anything else
    goes to Twisted's formatter, so lines are the same.
    """
    uri = request.uri
    if b"?" in uri:
        return combinedLogFormatter(timestamp, _Redacted(request))
    address = request.getClientAddress()
    if not isinstance(address, (IPv4Address, IPv6Address)):
        return combinedLogFormatter(timestamp, request)
    key = (address.host, request.method, uri, request.clientproto,
           request.getHeader(b"referer") or b"-", request.getHeader(b"user-agent") or b"-")
    try:
        parts = _PARTS[key]
    except KeyError:
        parts = _line_parts(key)
        if len(_PARTS) >= _PARTS_MAX:
            _PARTS.clear()
        _PARTS[key] = parts
    if parts is None:
        return combinedLogFormatter(timestamp, request)
    head, middle, tail = parts
    return f"{head}{timestamp}{middle}{request.code:d} {request.sentLength or '-'}{tail}"


class BufferedAccessLog:
    """A file-like sink for ``HTTPFactory.log``: lines are buffered and written in blocks.

    ``fd`` is written with ``os.write`` in whole lines only, so lines never interleave with
    another writer of the same file (the twistd log on standard output, say).
    """

    #: flush at least this often (seconds) ...
    INTERVAL = 1.0
    #: ... or as soon as this many bytes are waiting
    LIMIT = 64 << 10

    def __init__(self, fd: int, clock: IReactorTime, *, owns_fd: bool) -> None:
        self._fd = fd
        self._clock = clock
        self._owns_fd = owns_fd
        self._lines: list[bytes] = []
        self._size = 0
        self._timer: IDelayedCall | None = None

    @classmethod
    def open(cls, target: str, clock: IReactorTime) -> BufferedAccessLog:
        """``-`` = this process's standard output; anything else a file appended to."""
        if target == STDOUT:
            return cls(os.dup(1), clock, owns_fd=True)
        fd = os.open(target, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o640)
        return cls(fd, clock, owns_fd=True)

    def write(self, line: str) -> None:
        data = line.encode("utf-8", "replace")
        self._lines.append(data)
        self._size += len(data)
        if self._size >= self.LIMIT:
            self.flush()
        elif self._timer is None:
            self._timer = self._clock.callLater(self.INTERVAL, self.flush)

    def flush(self) -> None:
        if self._timer is not None:
            if self._timer.active():
                self._timer.cancel()
            self._timer = None
        if not self._lines:
            return
        data = b"".join(self._lines)
        self._lines.clear()
        self._size = 0
        view = memoryview(data)
        try:
            while view:
                view = view[os.write(self._fd, view):]
        except OSError:
            pass  # a closed or full log must not take the gateway down; the lines are lost

    def close(self) -> None:
        self.flush()
        if self._owns_fd:
            os.close(self._fd)
            self._owns_fd = False
