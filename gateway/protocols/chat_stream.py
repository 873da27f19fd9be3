"""Chat-completions streams: upstream chunks -> neutral events, neutral events -> chunks.

Both sides work one event at a time and keep only small state (ids, which tool indexes were
seen, whether ``[DONE]`` went out), never the text of the stream.

The encoder follows the chat chunk shapes of §9.4: a first chunk with ``role``, content and
tool-call deltas, a chunk carrying ``finish_reason``, a ``choices: []`` usage chunk only when
the client asked ``stream_options.include_usage`` (then every other chunk carries
``"usage": null`` as OpenAI's do), and ``data: [DONE]`` exactly once.  Reasoning travels as
``delta.reasoning_content`` both ways (``gateway.protocols.reasoning``).
"""

from __future__ import annotations

from typing import Any

import orjson

from gateway.billing.usage import Usage
from gateway.protocols.chat import FINISH_REASONS, reasoning_text
from gateway.protocols.errors import UpstreamFormatError
from gateway.protocols.events import (
    End,
    Failure,
    Finish,
    FinishReason,
    ReasoningDelta,
    Start,
    StreamEvent,
    TextDelta,
    ToolArgsDelta,
    ToolCallStart,
    UsageReport,
    new_id,
    now_seconds,
)
from gateway.protocols.sse import DONE, encode_event
from gateway.protocols.usage import chat_usage, extract_usage


def error_frames(message: str, type: str, code: str | None) -> list[bytes]:
    """The chat family's in-stream error: one ``{"error": …}`` chunk, then ``[DONE]``."""
    error = {"message": message, "type": type, "code": code, "param": None}
    return [encode_event(orjson.dumps({"error": error})), DONE]


class ChatStreamDecoder:
    """Upstream chat chunks (choice 0) -> neutral events; ``usage`` keeps the last report."""

    def __init__(self) -> None:
        self.usage: Usage | None = None
        self._started = False
        self._tools: set[int] = set()

    def decode(self, data: bytes, event: str | None = None) -> list[StreamEvent]:
        if data.strip() == b"[DONE]":
            return [End()]
        try:
            chunk = orjson.loads(data)
        except orjson.JSONDecodeError as exc:
            raise UpstreamFormatError("unreadable chat chunk") from exc
        if not isinstance(chunk, dict):
            raise UpstreamFormatError("chat chunk is not an object")
        error = chunk.get("error")
        if error:
            error = error if isinstance(error, dict) else {"message": str(error)}
            return [Failure(str(error.get("message") or "upstream error"),
                            str(error.get("type") or "upstream_error"),
                            str(error["code"]) if error.get("code") is not None else None)]
        events: list[StreamEvent] = []
        if not self._started:
            self._started = True
            created = chunk.get("created")
            events.append(Start(str(chunk.get("id") or ""),
                                int(created) if isinstance(created, int) else now_seconds()))
        for choice in chunk.get("choices") or ():
            if not isinstance(choice, dict) or choice.get("index", 0) != 0:
                continue
            self._choice(choice, events)
        usage = chunk.get("usage")
        if isinstance(usage, dict):
            found = extract_usage("chat", usage)
            if found is not None:
                self.usage = found
                events.append(UsageReport(found))
        return events

    def _choice(self, choice: dict[str, Any], events: list[StreamEvent]) -> None:
        delta = choice.get("delta")
        if isinstance(delta, dict):
            thought = reasoning_text(delta)
            if thought:
                events.append(ReasoningDelta(thought))
            for key in ("content", "refusal"):
                text = delta.get(key)
                if isinstance(text, str) and text:
                    events.append(TextDelta(text))
            for call in delta.get("tool_calls") or ():
                if not isinstance(call, dict):
                    continue
                index = call.get("index", 0)
                index = index if isinstance(index, int) else 0
                function = call.get("function")
                function = function if isinstance(function, dict) else {}
                if index not in self._tools:
                    self._tools.add(index)
                    events.append(ToolCallStart(index, str(call.get("id") or new_id("call_")),
                                                str(function.get("name") or "")))
                arguments = function.get("arguments")
                if isinstance(arguments, str) and arguments:
                    events.append(ToolArgsDelta(index, arguments))
        reason = choice.get("finish_reason")
        if reason:
            events.append(Finish(FINISH_REASONS.get(str(reason), "stop")))


class ChatStreamEncoder:
    """Neutral events -> chat chunks for the client (``model`` = the client's model name)."""

    object_name = "chat.completion.chunk"
    id_prefix = "chatcmpl-"

    def __init__(self, model: str, include_usage: bool) -> None:
        self._model = model
        self._include_usage = include_usage
        self._id = ""
        self._created = 0
        self._started = False
        self._tool_seen = False
        self._done = False

    def _choice(self, delta: dict[str, Any], finish: FinishReason | None) -> dict[str, Any]:
        return {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}

    def _opening(self) -> list[bytes]:
        return [self._chunk({"role": "assistant", "content": ""})]

    def _chunk(self, delta: dict[str, Any], finish: FinishReason | None = None) -> bytes:
        chunk: dict[str, Any] = {
            "id": self._id, "object": self.object_name, "created": self._created,
            "model": self._model, "choices": [self._choice(delta, finish)]}
        if self._include_usage:
            chunk["usage"] = None
        return encode_event(orjson.dumps(chunk))

    def _start(self, upstream_id: str = "", created: int = 0) -> list[bytes]:
        if self._started:
            return []
        self._started = True
        prefix = self.id_prefix
        self._id = upstream_id if upstream_id.startswith(prefix) else \
            prefix + (upstream_id or new_id(""))
        self._created = created or now_seconds()
        return self._opening()

    def encode(self, event: StreamEvent) -> list[bytes]:
        if self._done:
            return []
        if isinstance(event, Start):
            return self._start(event.id, event.created)
        if isinstance(event, End):
            return self.close()
        if isinstance(event, Failure):
            return self.error(event.message, event.type, event.code)
        if isinstance(event, UsageReport):
            if not self._include_usage:
                return []
            frames = self._start()
            chunk = {"id": self._id, "object": self.object_name,
                     "created": self._created, "model": self._model, "choices": [],
                     "usage": chat_usage(event.usage)}
            return [*frames, encode_event(orjson.dumps(chunk))]
        frames = self._start()
        if isinstance(event, TextDelta):
            frames.append(self._chunk({"content": event.text}))
        elif isinstance(event, ReasoningDelta):
            frames.extend(self._reasoning(event.text))
        elif isinstance(event, ToolCallStart):
            self._tool_seen = True
            frames.append(self._chunk({"tool_calls": [
                {"index": event.index, "id": event.id, "type": "function",
                 "function": {"name": event.name, "arguments": ""}}]}))
        elif isinstance(event, ToolArgsDelta):
            frames.append(self._chunk({"tool_calls": [
                {"index": event.index, "function": {"arguments": event.arguments}}]}))
        elif isinstance(event, Finish):
            reason = event.reason
            if reason == "stop" and self._tool_seen:
                reason = "tool_calls"
            frames.append(self._chunk({}, reason))
        return frames

    def _reasoning(self, text: str) -> list[bytes]:
        return [self._chunk({"reasoning_content": text})] if text else []

    def close(self) -> list[bytes]:
        """The end of the client stream: ``[DONE]`` unless it already went out."""
        if self._done:
            return []
        self._done = True
        return [DONE]

    def error(self, message: str, type: str, code: str | None) -> list[bytes]:
        if self._done:
            return []
        self._done = True
        return error_frames(message, type, code)
