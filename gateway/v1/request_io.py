"""Reading client bodies and writing whole (non-streamed) answers on the /v1 routes."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from gateway import errors
from gateway.errors import GatewayError


def read_body(request: Any, limit: int) -> bytes:
    """The request body; 413 past ``limit`` (checked from Content-Length first)."""
    length = request.getHeader(b"content-length")
    if length is not None and length.isdigit() and int(length) > limit:
        raise errors.body_too_large(limit)
    content = request.content
    content.seek(0, 2)
    if content.tell() > limit:
        raise errors.body_too_large(limit)
    content.seek(0)
    return content.read()


def release_body(request: Any) -> None:
    """Drop twisted.web's buffer of the request body once it was read: a stream keeps its
    request for its whole life, and the parsed request keeps what the call still needs."""
    content = request.content
    if content is not None:
        content.close()
        request.content = None


def write_json_bytes(request: Any, status: int, body: bytes,
                     headers: Iterable[tuple[bytes, bytes]] = ()) -> None:
    if getattr(request, "_disconnected", False) or request.finished:
        return
    request.setResponseCode(status)
    for name, value in headers:
        request.responseHeaders.setRawHeaders(name, [value])
    if not request.responseHeaders.hasHeader(b"content-type"):
        request.setHeader(b"content-type", b"application/json")
    request.setHeader(b"content-length", str(len(body)).encode())
    request.write(body)
    request.finish()


def write_error(request: Any, family: str, error: GatewayError) -> None:
    status, headers, body = errors.render(family, error)
    write_json_bytes(request, status, body,
                     [(k.encode(), str(v).encode()) for k, v in headers.items()])
