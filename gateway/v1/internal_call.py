"""One chat completion made by Lockgate itself (the assistant's model rounds), through /v1.

Why not a separate client: a model call of an assistant run must be routed, failed over,
rate limited, reserved, metered and settled exactly like a client's ``POST
/v1/chat/completions`` and appear in the usage logs (agents contract §1.8 "Billing").  So this
module runs the very same ``TextCall`` with two narrow substitutions and nothing else:

- the caller is the run's user (a login-JWT caller: no key, no key quota) instead of a
  credential from request headers -- the gateway switch and the global limit still apply;
- the "request" is an in-memory ``InternalRequest`` that collects the answer, and the error
  exit records the ``GatewayError`` instead of rendering it.

``InternalStreamedChat`` is the same call with ``"stream": true``: the gateway's own streaming
path (failover before the first byte, held headers, exactly-once settlement with the streamed
usage, a hang-up that ends the upstream at once) writes the OpenAI chat SSE into a
``StreamedInternalRequest``, which hands each write to the caller as it happens.

The settled record's cost is kept, so a run's cost is the exact sum of its calls' costs.
"""

from __future__ import annotations

import io
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import orjson
from twisted.internet.defer import Deferred
from twisted.internet.error import ConnectionDone
from twisted.python.failure import Failure
from twisted.web.http_headers import Headers

from gateway import errors
from gateway.auth import Caller
from gateway.context import GatewayContext
from gateway.errors import GatewayError
from gateway.limits import global_identity
from gateway.protocols.request import CHAT
from gateway.v1.call import limiter_verdict
from gateway.v1.outcome import Outcome, settlement_record
from gateway.v1.text_route import TextCall

ENDPOINT = "/v1/chat/completions"
#: the user agent of every internal call (visible in the usage logs)
USER_AGENT = b"lockgate-assistant"


class InternalRequest:
    """The part of ``twisted.web.server.Request`` a non-streamed ``TextCall`` touches: the
    body goes in, the status and the JSON answer are collected."""

    def __init__(self, body: bytes) -> None:
        self.content = io.BytesIO(body)
        self.requestHeaders = Headers({b"user-agent": [USER_AGENT],
                                       b"content-type": [b"application/json"]})
        self.responseHeaders = Headers()
        self.method = b"POST"
        self.path = self.uri = ENDPOINT.encode()
        self.code = 200
        self.finished = False
        self.written: list[bytes] = []
        self._gone: Deferred[None] = Deferred()
        self.lockgate_model = ""

    def getHeader(self, name: bytes) -> bytes | None:
        values = self.requestHeaders.getRawHeaders(name)
        return values[-1] if values else None

    def notifyFinish(self) -> Deferred[None]:
        return self._gone

    def setResponseCode(self, code: int) -> None:
        self.code = code

    def setHeader(self, name: bytes, value: bytes) -> None:
        self.responseHeaders.setRawHeaders(name, [value])

    def write(self, data: bytes) -> None:
        self.written.append(data)

    def finish(self) -> None:
        self.finished = True

    def abandon(self) -> None:
        """What a client hang-up is to a real request: the call stops its upstream at once."""
        if not self._gone.called:
            self._gone.errback(Failure(ConnectionDone("the assistant run was stopped")))


class _InternalTextCall(TextCall):
    def __init__(self, ctx: GatewayContext, request: InternalRequest, user_id: int) -> None:
        super().__init__(ctx, request, CHAT, ENDPOINT)
        self.user_id = user_id
        self.error: GatewayError | None = None
        self.cost_nanos = 0

    async def _caller(self) -> Caller:
        ctx = self.ctx
        if not ctx.settings.flag("token_api_enabled"):
            raise errors.gateway_disabled()
        user = await ctx.users.get(self.user_id)
        if user is None or not user.enabled:
            raise errors.user_not_found()
        self.log.user_id, self.log.api_key_id, self.log.ip = user.id, None, ""
        verdict = await limiter_verdict(ctx.limiter.check_global(
            global_identity(None, user.id, "")))
        if verdict.error is not None:
            raise verdict.error
        return Caller(user=user, key=None, ip="")

    def _answer_error(self, error: GatewayError) -> None:
        self.error = error

    def _settle(self, outcome: Outcome) -> None:
        ctx = self.ctx
        if self.log.user_id == 0:
            return
        record = settlement_record(self.log, outcome, ctx.clock.seconds(), ctx.now())
        self.cost_nanos = record.cost_nanos
        ctx.settler.settle_and_forget(self.reservation, record)


class StreamedInternalRequest(InternalRequest):
    """An ``InternalRequest`` a streamed ``TextCall`` can write to: it is a "connected client"
    for the ``StreamWriter`` (a channel, a producer slot, one ``notifyFinish`` Deferred per
    caller as twisted.web gives), and once the answer is an event stream every write goes to
    ``on_stream`` at once instead of being collected."""

    def __init__(self, body: bytes, on_stream: Callable[[bytes], None]) -> None:
        super().__init__(body)
        self.channel: object | None = self
        self.producer: Any = None
        self._on_stream = on_stream
        self._watchers: list[Deferred[None]] = []
        self._abandoned = False

    @property
    def streamed(self) -> bool:
        """The gateway answered with an event stream (not a JSON body or an error)."""
        kind = self.responseHeaders.getRawHeaders(b"content-type") or [b""]
        return kind[-1].startswith(b"text/event-stream")

    def notifyFinish(self) -> Deferred[None]:
        watcher: Deferred[None] = Deferred()
        if self.finished:
            watcher.callback(None)
        elif self._abandoned:
            watcher.errback(Failure(ConnectionDone("the assistant run was stopped")))
        else:
            self._watchers.append(watcher)
        return watcher

    def registerProducer(self, producer: Any, streaming: bool) -> None:
        self.producer = producer

    def unregisterProducer(self) -> None:
        self.producer = None

    def write(self, data: bytes) -> None:
        if self.streamed:
            self._on_stream(data)
        else:
            super().write(data)

    def finish(self) -> None:
        super().finish()
        watchers, self._watchers = self._watchers, []
        for watcher in watchers:
            watcher.callback(None)

    def abandon(self) -> None:
        if self._abandoned or self.finished:
            return
        self._abandoned = True
        self.channel = None
        watchers, self._watchers = self._watchers, []
        for watcher in watchers:
            watcher.errback(Failure(ConnectionDone("the assistant run was stopped")))


@dataclass(frozen=True)
class ChatAnswer:
    """What one internal call produced: the OpenAI chat answer (None on error), the error
    (status + message as the gateway would have answered), and the cost settled for it.
    ``streamed``: the answer went to the caller's stream reader as SSE (``body`` is None then;
    the reader assembles it)."""

    status: int
    body: dict[str, Any] | None
    error: GatewayError | None
    cost_nanos: int
    request_id: str
    streamed: bool = False


class InternalChat:
    """One internal chat completion; ``cancel()`` ends it like a client hang-up."""

    def __init__(self, ctx: GatewayContext, user_id: int, body: dict[str, Any]) -> None:
        payload = {**body, "stream": False}
        self._request = InternalRequest(orjson.dumps(payload))
        self._call = _InternalTextCall(ctx, self._request, user_id)

    async def answer(self) -> ChatAnswer:
        await self._call.run()
        return _collected(self._call, self._request)

    def cancel(self) -> None:
        self._request.abandon()


class InternalStreamedChat:
    """One internal chat completion with ``"stream": true``; the SSE the gateway writes goes to
    ``on_stream`` as it is written.  ``cancel()`` ends it like a client hang-up (the upstream
    closes at once; what was delivered is billed, once)."""

    def __init__(self, ctx: GatewayContext, user_id: int, body: dict[str, Any],
                 on_stream: Callable[[bytes], None]) -> None:
        payload = {**body, "stream": True}
        self._request = StreamedInternalRequest(orjson.dumps(payload), on_stream)
        self._call = _InternalTextCall(ctx, self._request, user_id)

    async def answer(self) -> ChatAnswer:
        await self._call.run()
        call, request = self._call, self._request
        if not request.streamed:
            return _collected(call, request)  # an error, or an upstream that did not stream
        return ChatAnswer(request.code, None, call.error, call.cost_nanos, call.log.request_id,
                          streamed=True)

    def cancel(self) -> None:
        self._request.abandon()


def _collected(call: _InternalTextCall, request: InternalRequest) -> ChatAnswer:
    """The answer of a call whose response was collected whole (a JSON body or an error)."""
    if call.error is None and request.code >= 400:
        call.error = errors.upstream_failed(request.code)
    body: dict[str, Any] | None = None
    if call.error is None:
        try:
            parsed = orjson.loads(b"".join(request.written))
        except orjson.JSONDecodeError:
            parsed = None
        if isinstance(parsed, dict):
            body = parsed
        else:
            call.error = GatewayError(502, "Failed to parse upstream response",
                                      type="upstream_error")
    status = call.error.status if call.error is not None else request.code
    return ChatAnswer(status, body, call.error, call.cost_nanos, call.log.request_id)
