"""The model/tool loop of a chat completion or an assistant run (agents contract §1.7, §1.8).

Why one loop for both modes: chat mode and assistant mode differ only in limits (8 vs 20
rounds, retries or not, text events or not) and in where events go (an SSE response vs
persisted run events).  Both are parameters -- ``LoopLimits`` and an ``EventSink`` -- so the
order of events, the tool statuses and the truncation rule exist once.

Each round is one internal /v1 call (``ModelCaller``), so it is routed, reserved and settled
like any gateway call; the loop adds up the settled costs to the nano-unit.  With ``stream`` on
(chat ``stream=true``, [P-8] runs) the call is streamed and each content delta becomes a
``text`` event as it arrives (``text_deltas``); a round whose gateway answer was not a stream
keeps the one ``{delta, round}`` event of its whole content.  ``cancel()`` ends
the loop at once: the model call in flight is abandoned (like a client hang-up: the upstream
socket closes, only what was produced is billed) and a waiting tool or retry delay is cancelled.
"""

from __future__ import annotations

from collections.abc import Awaitable
from dataclasses import dataclass, field
from typing import Any, Protocol

import orjson
from twisted.internet.defer import CancelledError, Deferred, ensureDeferred
from twisted.internet.task import deferLater

from gateway.assistant import tool_set as ts
from gateway.assistant.streamed_answer import DeltaHandler
from gateway.assistant.text_deltas import TextDeltas
from gateway.billing.money import format_nanos
from gateway.errors import GatewayError
from gateway.v1.internal_call import ChatAnswer

MAX_RETRIES = 10
FIRST_RETRY_DELAY = 0.5
MAX_RETRY_DELAY = 30.0
TIMED_OUT = "Assistant run timed out"


class EventSink(Protocol):
    async def emit(self, event: str, payload: dict[str, Any]) -> None: ...


class ModelCall(Protocol):
    async def answer(self) -> ChatAnswer: ...

    def cancel(self) -> None: ...


class ModelCaller(Protocol):
    """Makes one round's model call; with ``on_delta`` a streamed one that reports content
    deltas as they arrive."""

    def __call__(self, body: dict[str, Any], on_delta: DeltaHandler | None = None
                 ) -> ModelCall: ...


@dataclass(frozen=True)
class LoopLimits:
    mode: str
    max_rounds: int
    retries: bool
    #: emit ``text`` events (chat SSE; assistant runs with streaming on; member transcripts)
    text_events: bool
    #: streamed ``text`` deltas carry ``round`` (run events, §1.10) or not (chat SSE, §1.7);
    #: a round the upstream did not stream always gets ``{delta, round}``
    text_round: bool = True
    #: each round is a streamed call whose content deltas are ``text`` events as they come
    stream: bool = False


CHAT_LIMITS = LoopLimits(mode="chat", max_rounds=8, retries=False, text_events=True,
                         text_round=False)


class LoopFailed(Exception):
    """The loop cannot finish; ``status`` is the HTTP status chat mode answers with."""

    def __init__(self, message: str, status: int = 500) -> None:
        super().__init__(message)
        self.message = message
        self.status = status


class LoopCancelled(Exception):
    """Stopped from outside (stop, a new message, shutdown): ends silently."""


@dataclass
class LoopOutcome:
    content: str
    parts: list[dict[str, Any]]
    details: list[dict[str, Any]]
    cost_nanos: int
    rounds: int

    def result(self, message_id: str = "") -> dict[str, Any]:
        """The completion result object of §1.7 (``message.id`` only when there is one)."""
        message: dict[str, Any] = {"role": "assistant", "content": self.content,
                                   "content_parts": self.parts}
        if message_id:
            message = {"id": message_id, **message}
        answer: dict[str, Any] = {"message": message, "cost": format_nanos(self.cost_nanos),
                                  "tool_calls": len(self.details)}
        if self.details:
            answer["tool_call_details"] = self.details
        return answer


def retryable(error: GatewayError) -> bool:
    """§1.8 step 7: 408, 429, or a 5xx that means the upstream failed us."""
    if error.status in (408, 429):
        return True
    return error.status >= 500 and (
        error.message == "Upstream request failed"
        or error.message.startswith(("Failed to read upstream", "Failed to parse upstream")))


@dataclass
class RunLoop:
    limits: LoopLimits
    call_model: ModelCaller
    tools: ts.ToolSet
    sink: EventSink
    clock: Any
    #: the conversation so far (system prompt first); the loop appends to it
    messages: list[dict[str, Any]]
    #: model, max_tokens, temperature, reasoning_effort of every round's request
    model_options: dict[str, Any]
    #: the real reactor: streamed deltas of one reactor turn become one event (None: each
    #: delta is its own event at once)
    reactor: Any = None
    cost_nanos: int = 0
    details: list[dict[str, Any]] = field(default_factory=list)
    current_round: int = 0
    _cancelled: bool = False
    _timed_out: bool = False
    _model_call: ModelCall | None = None
    _waiting: Deferred[Any] | None = None

    def cancel(self, *, timed_out: bool = False) -> None:
        self._cancelled = True
        self._timed_out = self._timed_out or timed_out
        if self._model_call is not None:
            self._model_call.cancel()
        if self._waiting is not None:
            self._waiting.cancel()

    def _check(self) -> None:
        if self._timed_out:
            raise LoopFailed(TIMED_OUT, 504)
        if self._cancelled:
            raise LoopCancelled()

    async def _wait(self, pending: Awaitable[Any]) -> Any:
        """Await ``pending`` so that ``cancel()`` interrupts it -- including a cancel that
        came while the loop was busy elsewhere (then nothing is awaited at all)."""
        waiting: Deferred[Any] = (pending if isinstance(pending, Deferred)
                                  else ensureDeferred(pending))  # type: ignore[arg-type]
        if self._cancelled:
            waiting.cancel()
            waiting.addErrback(lambda _f: None)
            self._check()
        self._waiting = waiting
        try:
            return await waiting
        except CancelledError:
            self._check()
            raise
        finally:
            self._waiting = None

    async def run(self) -> LoopOutcome:
        parts: list[dict[str, Any]] = []
        content = ""
        for round_number in range(1, self.limits.max_rounds + 1):
            self._check()
            self.current_round = round_number
            await self.sink.emit("status", {"message": "model_round", "round": round_number,
                                            "mode": self.limits.mode})
            message, streamed = await self._model_round(round_number)
            content = message.get("content") or ""
            if not isinstance(content, str):
                content = ""
            if content:
                parts.append({"round": round_number, "content": content})
                if self.limits.text_events and not streamed:
                    await self.sink.emit("text", {"delta": content, "round": round_number})
            calls = [c for c in message.get("tool_calls") or [] if isinstance(c, dict)]
            if not calls:
                break
            self.messages.append({"role": "assistant", "content": content or None,
                                  "tool_calls": calls})
            for call in calls:
                ended = await self._tool_call(call, round_number)
                if ended is not None:
                    content = ended
                    parts.append({"round": round_number, "content": ended})
                    return LoopOutcome(content, parts, self.details, self.cost_nanos,
                                       round_number)
        self._check()
        return LoopOutcome(content, parts, self.details, self.cost_nanos, self.current_round)

    # --- model rounds -----------------------------------------------------------------------

    async def _model_round(self, round_number: int) -> tuple[dict[str, Any], bool]:
        """The round's assistant message, and whether its text already went out as deltas."""
        body = {**self.model_options, "messages": self.messages}
        if len(self.tools):
            body["tools"] = self.tools.specs()
        attempt = 0
        streamed_text = False
        while True:
            self._check()  # a stop may have come while the last event was written
            deltas: TextDeltas | None = None
            if self.limits.stream:
                deltas = TextDeltas(self.sink, round_number, with_round=self.limits.text_round,
                                    reactor=self.reactor)
                call = self.call_model(body, deltas.add)
            else:
                call = self.call_model(body)
            self._model_call = call
            try:
                answer = await call.answer()
            finally:
                self._model_call = None
                if deltas is not None:
                    await deltas.close(drop=self._cancelled)
            self.cost_nanos += answer.cost_nanos
            self._check()
            streamed_text = streamed_text or (deltas is not None and deltas.received > 0)
            if answer.error is None and answer.body is not None:
                return _first_message(answer.body), answer.streamed
            error = answer.error or GatewayError(502, "Failed to parse upstream response",
                                                  type="upstream_error")
            if not (self.limits.retries and retryable(error) and attempt < MAX_RETRIES
                    and not streamed_text):
                raise LoopFailed(error.message, error.status)
            attempt += 1
            await self.sink.emit("status", {
                "message": "retrying", "attempt": attempt, "max": MAX_RETRIES,
                "error": error.message, "status": error.status,
                "model": self.model_options.get("model", "")})
            delay = min(MAX_RETRY_DELAY, FIRST_RETRY_DELAY * (2 ** (attempt - 1)))
            await self._wait(deferLater(self.clock, delay, lambda: None))
            self._check()

    # --- tools ------------------------------------------------------------------------------

    async def _tool_call(self, call: dict[str, Any], round_number: int) -> str | None:
        """Run one call sequentially; the text the turn ends with when the tool ends it."""
        function = call.get("function") or {}
        name = str(function.get("name") or "")
        call_id = str(call.get("id") or f"call_{len(self.details) + 1}")
        raw = function.get("arguments") or "{}"
        tool = self.tools.get(name)
        detail: dict[str, Any] = {
            "id": call_id, "round": round_number, "name": name,
            "server": tool.server if tool else "", "tool": tool.tool if tool else name,
            "status": ts.RUNNING, "arguments": {}, "result": ""}
        arguments, problem = _arguments(raw)
        detail["arguments"] = arguments if problem is None else raw
        self.details.append(detail)
        early: tuple[str, str] | None = None
        if tool is None:
            early = ts.MISSING, f"Tool not found: {name}"
        elif problem is not None:
            early = ts.INVALID_ARGUMENTS, f"Invalid tool arguments: {problem}"
        elif tool.precreate is not None:
            early = await self._precreate(tool, arguments, call_id, detail)
        await self.sink.emit("tool_call", dict(detail))
        ended: str | None = None
        if early is not None:
            status, text = early
        else:
            assert tool is not None
            status, text, ended = await self._execute(tool, arguments, call_id, detail)
        detail["status"], detail["result"] = status, ts.clip(text)
        await self.sink.emit("tool_call", dict(detail))
        self.messages.append({"role": "tool", "tool_call_id": call_id,
                              "content": detail["result"]})
        return ended

    async def _precreate(self, tool: ts.Tool, arguments: dict[str, Any], call_id: str,
                         detail: dict[str, Any]) -> tuple[str, str] | None:
        """Let the tool set up what it waits on; a refusal here is the call's final status."""
        assert tool.precreate is not None
        try:
            shown = await self._wait(tool.precreate(arguments, call_id))
        except (LoopCancelled, LoopFailed, CancelledError):
            raise
        except ts.BadArguments as exc:
            return ts.INVALID_ARGUMENTS, f"Invalid tool arguments: {exc}"
        except ts.ToolFailed as exc:
            return ts.ERROR, exc.text
        if shown is not None:
            detail["status"], detail["arguments"] = ts.APPROVAL_REQUIRED, shown
        return None

    async def _execute(self, tool: ts.Tool, arguments: dict[str, Any], call_id: str,
                       detail: dict[str, Any]) -> tuple[str, str, str | None]:
        try:
            result = await self._wait(tool.run(arguments, call_id))
        except (LoopCancelled, LoopFailed, CancelledError):
            raise
        except ts.BadArguments as exc:
            return ts.INVALID_ARGUMENTS, f"Invalid tool arguments: {exc}", None
        except ts.ToolFailed as exc:
            return ts.ERROR, exc.text, None
        except Exception as exc:
            self._check()
            return ts.ERROR, f"Tool call failed: {exc}", None
        self._check()
        if result.arguments is not None:
            detail["arguments"] = result.arguments
        return ts.OK, result.text, (result.final_text if result.ends_turn else None)


def _arguments(raw: Any) -> tuple[dict[str, Any], str | None]:
    if isinstance(raw, dict):
        return raw, None
    try:
        parsed = orjson.loads(raw if isinstance(raw, (str, bytes)) else b"")
    except orjson.JSONDecodeError as exc:
        return {}, str(exc)
    if not isinstance(parsed, dict):
        return {}, "arguments must be a JSON object"
    return parsed, None


def _first_message(body: dict[str, Any]) -> dict[str, Any]:
    choices = body.get("choices")
    if isinstance(choices, list) and choices and isinstance(choices[0], dict):
        message = choices[0].get("message")
        if isinstance(message, dict):
            return message
    raise LoopFailed("Failed to parse upstream response", 502)
