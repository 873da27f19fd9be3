"""An upstream answer's headers, as the lean client (``gateway.channels.lean_pool``) parses them.

Why not ``twisted.web.http_headers.Headers``: it normalises every name as it is added, and an
upstream answer's headers are mostly never read.  Here a header costs one ``dict`` lookup on
arrival; the canonical capitalisation callers of Agent expect is computed only when all headers
are listed (``getAllRawHeaders``), and cached per name.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from twisted.web.http_headers import Headers

_canonical_names: dict[bytes, bytes] = {}


def canonical_name(lower: bytes) -> bytes:
    """Twisted's canonical capitalisation of a header name (``content-type`` ->
    ``Content-Type``, ``etag`` -> ``ETag``), cached: upstreams send the same few names."""
    name = _canonical_names.get(lower)
    if name is None:
        name = next(iter(Headers({lower: [b""]}).getAllRawHeaders()))[0]
        if len(_canonical_names) < 4096:
            _canonical_names[lower] = name
    return name



class ResponseHeaders:
    """The response headers with the read side of ``twisted.web.http_headers.Headers``."""

    __slots__ = ("_raw",)

    def __init__(self) -> None:
        #: lower-case name -> values, in arrival order
        self._raw: dict[bytes, list[bytes]] = {}

    def add(self, lower: bytes, value: bytes) -> None:
        values = self._raw.get(lower)
        if values is None:
            self._raw[lower] = [value]
        else:
            values.append(value)

    def getRawHeaders(self, name: bytes | str, default: Any = None) -> Any:
        key = name.lower() if isinstance(name, bytes) else name.lower().encode("latin-1")
        values = self._raw.get(key)
        return default if values is None else values

    def hasHeader(self, name: bytes | str) -> bool:
        return self.getRawHeaders(name) is not None

    def getAllRawHeaders(self) -> Iterator[tuple[bytes, list[bytes]]]:
        for lower, values in self._raw.items():
            yield canonical_name(lower), values
