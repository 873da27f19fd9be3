"""How the assistant calls a model: one internal /v1 call per round, streamed or not.

Why a factory: the run loop, the approval checker and studio members all call "the model" for
one user without caring how; this module picks the call.  Without a delta handler it is the
plain ``InternalChat`` (a JSON answer).  With one it is a ``StreamedModelCall``: the gateway's
streaming path feeds a ``StreamedAnswer`` that reports each content delta as it arrives and
assembles the round's answer; an in-stream error (after the first byte nothing can fail over)
becomes the round's error with the gateway's message.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from gateway.assistant.streamed_answer import DeltaHandler, StreamedAnswer
from gateway.context import GatewayContext
from gateway.errors import GatewayError
from gateway.v1.internal_call import ChatAnswer, InternalChat, InternalStreamedChat

#: the stream ended without ``[DONE]`` and without an error chunk (e.g. cut by a stop)
STREAM_CUT = "Upstream stream ended before completion"


class StreamedModelCall:
    """One streamed round; ``stream`` holds what arrived (also after a cancel)."""

    def __init__(self, ctx: GatewayContext, user_id: int, body: dict[str, Any],
                 on_delta: DeltaHandler) -> None:
        self.stream = StreamedAnswer(on_delta)
        # the usage chunk too: the assembled answer carries the streamed usage
        options = body.get("stream_options")
        body = {**body, "stream_options": {**(options if isinstance(options, dict) else {}),
                                           "include_usage": True}}
        self._call = InternalStreamedChat(ctx, user_id, body, self.stream.feed)

    async def answer(self) -> ChatAnswer:
        answer = await self._call.answer()
        if not answer.streamed or answer.error is not None:
            return answer
        stream = self.stream
        if stream.error is None and stream.completed:
            return replace(answer, body=stream.body())
        error = GatewayError(502, stream.error or STREAM_CUT, type="upstream_error")
        return replace(answer, status=error.status, error=error)

    def cancel(self) -> None:
        self._call.cancel()


class ModelCalls:
    """The model calls of one user (billed to them, like their own /v1 calls)."""

    def __init__(self, ctx: GatewayContext, user_id: int) -> None:
        self.ctx = ctx
        self.user_id = user_id

    def __call__(self, body: dict[str, Any], on_delta: DeltaHandler | None = None
                 ) -> InternalChat | StreamedModelCall:
        if on_delta is None:
            return InternalChat(self.ctx, self.user_id, body)
        return StreamedModelCall(self.ctx, self.user_id, body, on_delta)
