"""The /v1 and /v1beta resource: a plain twisted.web Resource (no Klein on the hot path).

Dispatch is one dict lookup on (method, path).  Unknown paths answer 404 before any
authentication, as the contract says.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import Any

from twisted.logger import Logger
from twisted.web.resource import Resource
from twisted.web.server import NOT_DONE_YET

from gateway import errors
from gateway.context import GatewayContext
from gateway.errors import GatewayError
from gateway.v1 import account_routes, media_route, native_routes, upload_route
from gateway.v1.call import new_request_id
from gateway.v1.call_task import run_call
from gateway.v1.media_route import MediaCall
from gateway.v1.request_io import write_error, write_json_bytes
from gateway.v1.text_route import TextCall

log = Logger()

Handler = Callable[[GatewayContext, Any], Coroutine[Any, Any, None]]


def _text(family: str, endpoint: str) -> Handler:
    def handle(ctx: GatewayContext, request: Any) -> Coroutine[Any, Any, None]:
        # the call's own coroutine, not one more around it
        return TextCall(ctx, request, family, endpoint).run()

    return handle


def _media(name: str) -> Handler:
    route = media_route.ROUTES[name]

    def handle(ctx: GatewayContext, request: Any) -> Coroutine[Any, Any, None]:
        return MediaCall(ctx, request, route).run()

    return handle


def _json(fn: Callable[[GatewayContext, Any], Coroutine[Any, Any, bytes]]) -> Handler:
    async def handle(ctx: GatewayContext, request: Any) -> None:
        try:
            body = await fn(ctx, request)
        except GatewayError as error:
            write_error(request, errors.OPENAI, error)
            return
        except Exception:
            log.failure("unhandled error on {path}", path=request.path)
            write_error(request, errors.OPENAI, errors.internal())
            return
        write_json_bytes(request, 200, body)

    return handle


ROUTES: dict[tuple[bytes, bytes], Handler] = {
    (b"POST", b"/v1/chat/completions"): _text("chat", "/v1/chat/completions"),
    (b"POST", b"/v1/completions"): _text("completions", "/v1/completions"),
    (b"POST", b"/v1/responses"): _text("responses", "/v1/responses"),
    (b"POST", b"/v1/moderations"): _media("moderations"),
    (b"POST", b"/v1/audio/speech"): _media("speech"),
    (b"POST", b"/v1/audio/transcriptions"): _media("transcriptions"),
    (b"POST", b"/v1/images/generations"): _media("images"),
    (b"POST", b"/v1/images/edits"): _media("image_edits"),
    (b"POST", b"/v1/uploads/images"): _json(upload_route.upload_image),
    (b"GET", b"/v1/models"): _json(account_routes.models),
    (b"GET", b"/v1/balance"): _json(account_routes.key_balance),
    (b"GET", b"/v1/user/balance"): _json(account_routes.user_balance),
    (b"POST", b"/v1/messages"): native_routes.messages_call,
}

#: (method, path prefix) -> handler, tried when no exact route matches (Google model actions)
PREFIX_ROUTES: list[tuple[bytes, bytes, Handler]] = [
    (b"POST", prefix, native_routes.model_action) for prefix in native_routes.MODEL_PREFIXES]

#: handlers that construct a metered call (``GatewayCall``) before anything else: the call
#: sets ``X-Request-Id`` to its own id at once, so ``render`` need not draw one for them
NAMES_ITS_CALL = frozenset(
    handler for (_, path), handler in ROUTES.items() if path in (
        b"/v1/chat/completions", b"/v1/completions", b"/v1/responses", b"/v1/moderations",
        b"/v1/audio/speech", b"/v1/audio/transcriptions", b"/v1/images/generations",
        b"/v1/images/edits", b"/v1/messages"))


class GatewayResource(Resource):
    isLeaf = True

    def __init__(self, ctx: GatewayContext, routes: dict[tuple[bytes, bytes], Handler] | None
                 = None, *, fallback: Callable[[bytes, bytes], Handler | None] | None = None
                 ) -> None:
        super().__init__()
        self.ctx = ctx
        self.routes = dict(ROUTES)
        self.routes.update(routes or {})
        #: paths with parameters (task ids): asked when the exact table has no entry
        self.fallback = fallback

    def render(self, request: Any) -> Any:
        path = request.path.rstrip(b"/") or b"/"
        handler = self.routes.get((request.method, path))
        if handler is None and self.fallback is not None:
            handler = self.fallback(request.method, path)
        if handler is None:
            handler = next((h for method, prefix, h in PREFIX_ROUTES
                            if request.method == method and path.startswith(prefix)), None)
        if handler not in NAMES_ITS_CALL:
            # every /v1 answer names its call (console contract §6.3.1); a metered call sets
            # its own id, the one its usage-log row carries
            request.setHeader(b"x-request-id", new_request_id().encode())
        if handler is None:
            family = errors.family_for_path(path.decode("utf-8", "replace"))
            write_error(request, family, errors.not_found())
            return NOT_DONE_YET
        calls = self.ctx.calls
        run_call(handler(self.ctx, request), calls.started, calls.ended)
        return NOT_DONE_YET
