"""Chat mode (agents contract §1.7): the loop tied to one HTTP request, at most 8 rounds.

Why separate from runs: chat mode has no run record and no persisted events -- its events go
to the caller's SSE stream (or nowhere, for a JSON answer) -- but when a ``session_id`` is
given the session is saved first with an empty assistant message that receives the answer (or
the error text) at the end.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from twisted.internet.defer import Deferred, ensureDeferred
from twisted.python.failure import Failure

from gateway.assistant.conversation_setup import (
    build_tools,
    first_messages,
    session_columns,
    session_messages,
)
from gateway.assistant.mcp_tools import McpClientFactory, McpUnavailable
from gateway.assistant.preparation import Prepared
from gateway.assistant.run_loop import CHAT_LIMITS, EventSink, LoopFailed, ModelCaller, RunLoop
from gateway.context import GatewayContext
from gateway.store.assistant.run_outcomes import update_message
from gateway.store.assistant.sessions import save_session

#: the whole chat-mode request (§1.7)
CHAT_TIMEOUT = 120.0


@dataclass
class ChatCompletion:
    ctx: GatewayContext
    user_id: int
    prepared: Prepared
    call_model: ModelCaller
    mcp: McpClientFactory | None
    loop: RunLoop | None = None
    message_id: str = ""

    async def save_session(self) -> None:
        """Persist the request's messages and the empty answer (409s raise ``Refused``)."""
        request = self.prepared.request
        if not request.session_id:
            return
        messages, self.message_id = session_messages(self.prepared)
        now = self.ctx.now()
        await self.ctx.db.transaction(lambda conn: save_session(
            conn, self.user_id, request.session_id, session_columns(self.prepared), messages,
            now))

    def guarded(self, sink: EventSink) -> Deferred[dict[str, Any]]:
        """``run(sink)`` for a web route.  Cancelling the result -- Klein does when the client
        hangs up -- goes through ``cancel()``: the model call in flight is abandoned like a
        client hang-up (its upstream closed at once, what was delivered settled once) rather
        than a ``CancelledError`` thrown into the gateway call's relay, which would leave the
        upstream streaming to nobody.  The cancelled result fails with ``CancelledError``."""
        guard: Deferred[dict[str, Any]] = Deferred(lambda _d: self.cancel())

        def relay(result: Any) -> None:
            if guard.called:
                return None  # cancelled first: the loop's own end is not news
            if isinstance(result, Failure):
                guard.errback(result)
            else:
                guard.callback(result)
            return None

        ensureDeferred(self.run(sink)).addBoth(relay)
        return guard

    async def run(self, sink: EventSink) -> dict[str, Any]:
        """The completion result; ``LoopFailed`` (with the answer's status) on failure."""
        timer = self.ctx.clock.callLater(CHAT_TIMEOUT, self.cancel, True)
        try:
            result = await self._run(sink)
        except LoopFailed as failure:
            await self._store({"content": failure.message}, only_if_empty=True)
            raise
        finally:
            if timer.active():
                timer.cancel()
        message = result["message"]
        await self._store({"content": message["content"],
                           "content_parts": message["content_parts"],
                           "tool_calls": result.get("tool_call_details", [])})
        return result

    async def _run(self, sink: EventSink) -> dict[str, Any]:
        await sink.emit("status", {"message": "loading_tools"})
        try:
            tools = await build_tools(self.prepared, self.mcp)
        except McpUnavailable as exc:
            raise LoopFailed(str(exc), 502) from None
        request = self.prepared.request
        self.loop = RunLoop(
            limits=replace(CHAT_LIMITS, stream=request.stream), call_model=self.call_model,
            tools=tools, sink=sink, clock=self.ctx.clock,
            messages=first_messages(self.prepared, tools),
            model_options=request.model_options(self.prepared.model))
        outcome = await self.loop.run()
        return outcome.result(self.message_id)

    def cancel(self, timed_out: bool = False) -> None:
        if self.loop is not None:
            self.loop.cancel(timed_out=timed_out)

    async def _store(self, values: dict[str, Any], *, only_if_empty: bool = False) -> None:
        if not self.message_id:
            return
        session_id, now = self.prepared.request.session_id, self.ctx.now()
        await self.ctx.db.transaction(lambda conn: update_message(
            conn, session_id, self.message_id, values, now, only_if_empty=only_if_empty))
