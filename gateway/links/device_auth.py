"""Who is calling a device endpoint (agents contract §2.2): the device whose token hashes to
what the request carries.

Token sources, in order: ``X-Connector-Token``, ``Authorization: Bearer``, and -- on the
WebSocket endpoint only, for clients that cannot set headers ([P-19]) -- ``?token=``.
"""

from __future__ import annotations

from typing import Any

from gateway.links.ids import token_hash
from gateway.links.token_lookups import TokenLookups
from gateway.store import devices as device_store
from gateway.store.devices import DeviceRow
from gateway.store.pool import DBRunner

MISSING = "Connector token is required"
INVALID = "Invalid connector token"


class DeviceAuthError(Exception):
    """401 with the contract's message."""


def request_token(request: Any, *, allow_query: bool) -> str:
    header = (request.getHeader(b"x-connector-token") or b"").decode("utf-8", "replace")
    if header.strip():
        return header.strip()
    authorization = (request.getHeader(b"authorization") or b"").decode("utf-8", "replace")
    scheme, _, value = authorization.partition(" ")
    if scheme.lower() == "bearer" and value.strip():
        return value.strip()
    if allow_query:
        values = request.args.get(b"token") or []
        if values and values[0].strip():
            return values[0].strip().decode("utf-8", "replace")
    return ""


async def authenticate(db: DBRunner, request: Any, *, allow_query: bool = False,
                       lookups: TokenLookups | None = None) -> DeviceRow:
    """The device the request's token belongs to; ``lookups`` reads it together with the
    other lookups of the moment (``token_lookups``)."""
    token = request_token(request, allow_query=allow_query)
    if not token:
        raise DeviceAuthError(MISSING)
    if lookups is not None:
        device = await lookups.find(token_hash(token))
    else:
        device = await db.transaction(device_store.find_by_token_hash, token_hash(token))
    if device is None:
        raise DeviceAuthError(INVALID)
    return device
