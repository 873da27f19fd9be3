"""How large a request body each route family may send, and how it is told "too large".

The limit is known from the path alone, before a byte of the body is read, so the channel can
refuse a declared ``Content-Length`` at once and stop a chunked body at the cap (issue 15,
finding 3).  Routes keep their own, possibly smaller, limits on top of these.
"""

from __future__ import annotations

from dataclasses import dataclass

import orjson

from console.http import TYPE_BY_STATUS
from gateway import errors
from gateway.errors import GatewayError

MIB = 1 << 20
CONSOLE_LIMIT = 1 * MIB
#: settings import and the model/price sync documents a browser fetched for the admin
IMPORT_LIMIT = 20 * MIB
PAYMENT_NOTIFY_LIMIT = 1 * MIB
GATEWAY_LIMIT = 128 * MIB

_IMPORT_PATHS = (b"/api/settings/import", b"/api/models/sync/", b"/api/models/prices/sync/")
_GATEWAY_PREFIXES = (b"/v1/", b"/v1beta/")

#: the reason phrases of the statuses the edge answers itself
REASONS = {400: b"Bad Request", 413: b"Content Too Large", 414: b"URI Too Long",
           431: b"Request Header Fields Too Large"}


@dataclass(frozen=True)
class Family:
    """A route family: its body cap, and whether it answers in the gateway's error shapes."""

    limit: int
    gateway: bool


def family_of(path: bytes | None) -> Family:
    """The family of a request target (query string allowed); console when unknown."""
    bare = (path or b"").split(b"?", 1)[0]
    if bare.startswith(_GATEWAY_PREFIXES) or bare in (b"/v1", b"/v1beta"):
        return Family(GATEWAY_LIMIT, gateway=True)
    if bare.startswith(_IMPORT_PATHS):
        return Family(IMPORT_LIMIT, gateway=False)
    if bare.startswith(b"/api/payment/"):
        return Family(PAYMENT_NOTIFY_LIMIT, gateway=False)
    return Family(CONSOLE_LIMIT, gateway=False)


def error_body(path: bytes | None, status: int, message: str, code: str) -> bytes:
    """The JSON error answer in the family's shape (gateway: the protocol's native one)."""
    if family_of(path).gateway:
        bare = (path or b"").split(b"?", 1)[0].decode("latin-1")
        error = GatewayError(status, message, type="invalid_request_error", code=code)
        return errors.render(errors.family_for_path(bare), error)[2]
    return orjson.dumps({"error": message, "type": TYPE_BY_STATUS.get(status, code)})


def raw_response(path: bytes | None, status: int, message: str, code: str) -> bytes:
    """A whole HTTP/1.1 answer that closes the connection, for refusals made while parsing."""
    body = error_body(path, status, message, code)
    head = (b"HTTP/1.1 %d %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n"
            b"Cache-Control: no-store\r\nConnection: close\r\n\r\n"
            % (status, REASONS.get(status, b"Error"), len(body)))
    return head + body
