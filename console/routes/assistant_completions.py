"""``POST /api/user/advanced-chat/completions`` (agents contract §1.7).

Chat mode answers in the request (JSON, or the exact SSE sequence with ``stream=true``);
assistant mode saves the session, queues a run and answers 202 at once.  Validation failures
before a stream starts are ordinary JSON errors with the contract's messages.
"""

from __future__ import annotations

from typing import Any

import orjson
from twisted.internet.defer import CancelledError, Deferred, ensureDeferred
from twisted.logger import Logger

from console.context import ConsoleContext
from console.http import ApiError, make_app, read_object, write_json
from gateway.assistant.chat_completion import ChatCompletion
from gateway.assistant.completion_request import read_completion
from gateway.assistant.preparation import Prepared, prepare
from gateway.assistant.run_loop import LoopCancelled, LoopFailed
from gateway.assistant.run_service import RunService
from gateway.store.assistant.refused import Refused

log = Logger()

#: messages may carry long histories
BODY_LIMIT = 16 << 20
SSE_HEADERS = ((b"content-type", b"text/event-stream"), (b"cache-control", b"no-cache"),
               (b"connection", b"keep-alive"), (b"x-accel-buffering", b"no"))


def sse_frame(event: str, payload: Any) -> bytes:
    return b"event: " + event.encode() + b"\ndata: " + orjson.dumps(payload) + b"\n\n"


class _Quiet:
    """Chat mode answered as JSON: the loop's events go nowhere."""

    async def emit(self, event: str, payload: dict[str, Any]) -> None:
        return None


class _SseSink:
    def __init__(self, request: Any) -> None:
        self.request = request
        self.gone = False

    async def emit(self, event: str, payload: dict[str, Any]) -> None:
        if not self.gone:
            self.request.write(sse_frame(event, payload))


def refused_body(refusal: Refused) -> dict[str, Any]:
    return {"error": refusal.message, **refusal.extra}


class CompletionRoutes:
    app = make_app()

    def __init__(self, ctx: ConsoleContext, runs: RunService) -> None:
        self.ctx = ctx
        self.runs = runs

    @app.route("/", methods=["POST"])
    def complete(self, request: Any) -> Deferred[bytes]:
        return ensureDeferred(self._complete(request))

    async def _complete(self, request: Any) -> bytes:
        try:
            user = await self.ctx.sessions.user(request)
            completion = read_completion(read_object(request, limit=BODY_LIMIT))
            settings = self.runs.settings
            if completion.background and not settings.assistant_mode_enabled:
                raise ApiError(403, "Assistant mode is disabled")
            if not settings.enabled:
                raise ApiError(403, "Agent chat is disabled")
            user_id, now = user["id"], self.ctx.now()

            def prepared_in(conn: Any) -> Prepared:
                return prepare(conn, user_id, completion, settings, now)

            if completion.background:  # prepared in the run's starting transaction
                return write_json(request, 202, await self.runs.start_run(user_id, prepared_in))
            prepared = await self.ctx.db.transaction(prepared_in)
            chat = ChatCompletion(self.runs.ctx, user_id, prepared,
                                  self.runs.model_caller(user_id), self.runs.mcp)
            await chat.save_session()
        except ApiError as error:
            return write_json(request, error.status, error.body())
        except Refused as refusal:
            return write_json(request, refusal.status, refused_body(refusal))
        if completion.stream:
            return await self._stream(request, chat)
        request.notifyFinish().addErrback(lambda _f: chat.cancel())
        try:
            result = await chat.guarded(_Quiet())
        except LoopFailed as failure:
            return write_json(request, failure.status, {"error": failure.message})
        except (LoopCancelled, CancelledError):
            return b""
        return write_json(request, 200, result)

    async def _stream(self, request: Any, chat: ChatCompletion) -> bytes:
        sink = _SseSink(request)

        def gone(_failure: Any) -> None:
            sink.gone = True
            chat.cancel()

        request.notifyFinish().addErrback(gone)
        request.setResponseCode(200)
        for name, value in SSE_HEADERS:
            request.setHeader(name, value)
        await sink.emit("status", {"message": "stream_started"})
        try:
            result = await chat.guarded(sink)
        except LoopFailed as failure:
            await sink.emit("error", {"error": failure.message})
            return b""
        except (LoopCancelled, CancelledError):
            return b""
        except Exception:
            log.failure("chat completion stream failed")
            await sink.emit("error", {"error": "Internal server error"})
            return b""
        await sink.emit("done", result)
        return b""
