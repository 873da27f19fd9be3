"""``GET /api/advanced-chat/connectors/ws``: the WebSocket endpoint, inside the same Site and
listeners as everything else (the console's connector route group hands the request here).

The WebSocket upgrade is authenticated before it happens: the token is checked against the
database first and a failure answers a plain HTTP 401 with the JSON error body (never an
upgraded socket).  Only then is the request handed to autobahn's ``WebSocketResource``.
"""

from __future__ import annotations

from typing import Any

import orjson
from autobahn.twisted.resource import WebSocketResource
from twisted.internet.defer import ensureDeferred
from twisted.internet.error import ConnectionDone
from twisted.logger import Logger
from twisted.python.failure import Failure
from twisted.web.resource import Resource
from twisted.web.server import NOT_DONE_YET

from gateway.links.device_auth import DeviceAuthError, authenticate
from gateway.links.token_lookups import TokenLookups
from gateway.links.websocket import DeviceLinkFactory
from gateway.store.devices import DeviceRow
from gateway.store.pool import DBRunner

log = Logger()


def write_error(request: Any, status: int, message: str) -> bytes:
    request.setResponseCode(status)
    request.setHeader(b"content-type", b"application/json")
    request.setHeader(b"cache-control", b"no-store")
    return orjson.dumps({"error": message,
                         "type": {401: "unauthorized", 500: "internal"}.get(status,
                                                                           "invalid_request")})


class LinkEndpoint(Resource):
    """``GET …/connectors/ws``: authenticate, then upgrade."""

    isLeaf = True

    def __init__(self, db: DBRunner, factory: DeviceLinkFactory) -> None:
        super().__init__()
        self.db = db
        self.factory = factory
        self._ws = WebSocketResource(factory)
        #: many links opening at once read their tokens together
        self.lookups = TokenLookups(db)

    def render_GET(self, request: Any) -> Any:
        d = ensureDeferred(authenticate(self.db, request, allow_query=True,
                                        lookups=self.lookups))
        d.addCallbacks(lambda device: self._upgrade(request, device),
                       lambda failure: self._deny(request, failure))
        d.addErrback(lambda failure: log.failure("link handshake failed", failure))
        return NOT_DONE_YET

    def _deny(self, request: Any, failure: Failure) -> None:
        if request._disconnected:
            return
        if failure.check(DeviceAuthError):
            body = write_error(request, 401, str(failure.value))
        else:
            log.failure("link authentication failed", failure)
            body = write_error(request, 500, "Internal server error")
        request.write(body)
        request.finish()

    def _upgrade(self, request: Any, device: DeviceRow) -> None:
        if request._disconnected:
            return
        if (request.getHeader(b"upgrade") or b"").lower() != b"websocket":
            request.write(write_error(request, 400, "WebSocket upgrade required"))
            request.finish()
            return
        self.factory.admitted = device
        try:
            answer = self._ws.render(request)
        finally:
            self.factory.admitted = None
        if answer is not NOT_DONE_YET:
            request.write(answer)
            request.finish()
            return
        # the socket now belongs to the WebSocket: the HTTP request is over for the Site's
        # bookkeeping (in-flight counts), without writing anything on it
        request.connectionLost(Failure(ConnectionDone("upgraded to WebSocket")))
