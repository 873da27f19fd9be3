"""Messages streams: upstream events -> neutral events, neutral events -> Messages events.

Usage in a Messages stream comes in two parts (§10.1): ``message_start`` carries the input side
(``input_tokens`` without cache, cache reads and writes) and ``message_delta`` the cumulative
``output_tokens`` (newer APIs repeat the input fields there).  The decoder merges the two raw
objects before normalising, so billing sees one complete report.

The encoder writes the event sequence the Messages SDKs accumulate: ``message_start``, per
block ``content_block_start`` / ``content_block_delta`` / ``content_block_stop``, then one
``message_delta`` (stop reason + full usage) and ``message_stop``.  Because chat upstreams
report usage after their finish chunk, the ``message_delta`` is written at the end, when both
are known.  Only small state is kept (block indexes, the stop reason), never the text.

Thinking: upstream ``thinking`` blocks (``thinking_delta``, ``signature_delta``) become
``ReasoningDelta`` events; ``redacted_thinking`` is opaque and dropped (it only passes through
to a Messages client of a Messages channel).  Reasoning from other formats is written as a
``thinking`` block with an empty ``signature`` (no ``signature_delta``: none would be valid).
"""

from __future__ import annotations

from typing import Any

import orjson

from gateway.billing.usage import Usage
from gateway.errors import messages_type
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
from gateway.protocols.messages import STOP_REASONS, messages_usage, stop_reason, thinking_block
from gateway.protocols.sse import encode_event
from gateway.protocols.usage import extract_usage, merge_usage_objects

_ERROR_TYPES = frozenset({"invalid_request_error", "authentication_error", "permission_error",
                          "not_found_error", "request_too_large", "rate_limit_error",
                          "api_error", "overloaded_error"})


def error_frames(message: str, type: str) -> list[bytes]:
    """The Messages in-stream error: one ``error`` event."""
    kind = type if type in _ERROR_TYPES else messages_type(502)
    payload = {"type": "error", "error": {"type": kind, "message": message}}
    return [encode_event(orjson.dumps(payload), "error")]


def _event(payload: dict[str, Any]) -> bytes:
    return encode_event(orjson.dumps(payload), payload["type"])


class MessagesStreamDecoder:
    """Upstream Messages events -> neutral events; ``usage`` merges start and delta reports."""

    def __init__(self) -> None:
        self.usage: Usage | None = None
        self._raw_usage: dict[str, Any] = {}
        self._tools: dict[int, int] = {}  # block index -> tool call index

    def decode(self, data: bytes, event: str | None = None) -> list[StreamEvent]:
        try:
            payload = orjson.loads(data)
        except orjson.JSONDecodeError as exc:
            raise UpstreamFormatError("unreadable Messages event") from exc
        if not isinstance(payload, dict):
            raise UpstreamFormatError("Messages event is not an object")
        kind = payload.get("type") or event
        if kind == "message_start":
            message = payload.get("message") or {}
            self._add_usage(message.get("usage"))
            return [Start(str(message.get("id") or ""), now_seconds())]
        if kind == "content_block_start":
            block = payload.get("content_block") or {}
            if block.get("type") == "tool_use":
                index = len(self._tools)
                self._tools[int(payload.get("index", 0))] = index
                return [ToolCallStart(index, str(block.get("id") or new_id("toolu_")),
                                      str(block.get("name") or ""))]
            if block.get("type") == "text" and block.get("text"):
                return [TextDelta(str(block["text"]))]
            if block.get("type") == "thinking" and (block.get("thinking")
                                                    or block.get("signature")):
                return [ReasoningDelta(str(block.get("thinking") or ""),
                                       block.get("signature") or None)]
            return []
        if kind == "content_block_delta":
            delta = payload.get("delta") or {}
            if delta.get("type") == "text_delta" and delta.get("text"):
                return [TextDelta(str(delta["text"]))]
            if delta.get("type") == "thinking_delta" and delta.get("thinking"):
                return [ReasoningDelta(str(delta["thinking"]))]
            if delta.get("type") == "signature_delta" and delta.get("signature"):
                return [ReasoningDelta("", str(delta["signature"]))]
            if delta.get("type") == "input_json_delta" and delta.get("partial_json"):
                tool = self._tools.get(int(payload.get("index", 0)))
                if tool is not None:
                    return [ToolArgsDelta(tool, str(delta["partial_json"]))]
            return []
        if kind == "message_delta":
            events: list[StreamEvent] = []
            reason = (payload.get("delta") or {}).get("stop_reason")
            if reason:
                events.append(Finish(STOP_REASONS.get(str(reason), "stop")))
            if self._add_usage(payload.get("usage")) and self.usage is not None:
                events.append(UsageReport(self.usage))
            return events
        if kind == "message_stop":
            return [End()]
        if kind == "error":
            error = payload.get("error") or {}
            return [Failure(str(error.get("message") or "upstream error"),
                            str(error.get("type") or "upstream_error"))]
        return []  # ping, content_block_stop, redacted thinking and unknown events

    def _add_usage(self, usage: Any) -> bool:
        if not isinstance(usage, dict):
            return False
        self._raw_usage = merge_usage_objects(self._raw_usage, usage)
        found = extract_usage("messages", self._raw_usage)
        if found is not None:
            self.usage = found
        return found is not None


class MessagesStreamEncoder:
    """Neutral events -> Messages events for the client (``model`` = the client's name)."""

    def __init__(self, model: str) -> None:
        self._model = model
        self._started = False
        self._done = False
        self._next_block = 0
        self._open: list[int] = []
        self._text_block: int | None = None
        self._thinking_block: int | None = None
        self._tool_blocks: dict[int, int] = {}
        self._tool_seen = False
        self._reason: FinishReason = "stop"
        self._usage = Usage()

    def _start(self, upstream_id: str = "") -> list[bytes]:
        if self._started:
            return []
        self._started = True
        ident = upstream_id if upstream_id.startswith("msg") else new_id("msg_")
        return [_event({"type": "message_start", "message": {
            "id": ident, "type": "message", "role": "assistant", "model": self._model,
            "content": [], "stop_reason": None, "stop_sequence": None,
            "usage": {"input_tokens": 0, "output_tokens": 0}}})]

    def _open_block(self, block: dict[str, Any]) -> tuple[int, bytes]:
        index = self._next_block
        self._next_block += 1
        self._open.append(index)
        return index, _event({"type": "content_block_start", "index": index,
                              "content_block": block})

    def _close_blocks(self) -> list[bytes]:
        frames = [_event({"type": "content_block_stop", "index": i}) for i in self._open]
        self._open.clear()
        self._text_block = None
        self._thinking_block = None
        return frames

    def encode(self, event: StreamEvent) -> list[bytes]:
        if self._done:
            return []
        if isinstance(event, Start):
            return self._start(event.id)
        if isinstance(event, End):
            return self.close()
        if isinstance(event, Failure):
            return self.error(event.message, event.type, event.code)
        if isinstance(event, UsageReport):
            self._usage = event.usage
            return []
        frames = self._start()
        if isinstance(event, TextDelta):
            if self._text_block is None:
                frames.extend(self._close_blocks())
                index, frame = self._open_block({"type": "text", "text": ""})
                self._text_block = index
                frames.append(frame)
            frames.append(_event({"type": "content_block_delta", "index": self._text_block,
                                  "delta": {"type": "text_delta", "text": event.text}}))
        elif isinstance(event, ReasoningDelta):
            if not event.text:
                return frames  # a signature alone: foreign, never forwarded
            if self._thinking_block is None:
                frames.extend(self._close_blocks())
                index, frame = self._open_block(thinking_block(""))
                self._thinking_block = index
                frames.append(frame)
            frames.append(_event({"type": "content_block_delta", "index": self._thinking_block,
                                  "delta": {"type": "thinking_delta", "thinking": event.text}}))
        elif isinstance(event, ToolCallStart):
            self._tool_seen = True
            frames.extend(self._close_blocks())
            index, frame = self._open_block({"type": "tool_use", "id": event.id,
                                             "name": event.name, "input": {}})
            self._tool_blocks[event.index] = index
            frames.append(frame)
        elif isinstance(event, ToolArgsDelta):
            block = self._tool_blocks.get(event.index)
            if block is not None and block in self._open:
                frames.append(_event({"type": "content_block_delta", "index": block,
                                      "delta": {"type": "input_json_delta",
                                                "partial_json": event.arguments}}))
        elif isinstance(event, Finish):
            self._reason = event.reason
        return frames

    def close(self) -> list[bytes]:
        """Close open blocks, then ``message_delta`` (stop reason, usage) and ``message_stop``."""
        if self._done:
            return []
        frames = self._start()
        self._done = True
        frames.extend(self._close_blocks())
        reason = self._reason
        if reason == "stop" and self._tool_seen:
            reason = "tool_calls"
        frames.append(_event({"type": "message_delta",
                              "delta": {"stop_reason": stop_reason(reason),
                                        "stop_sequence": None},
                              "usage": messages_usage(self._usage)}))
        frames.append(_event({"type": "message_stop"}))
        return frames

    def error(self, message: str, type: str, code: str | None) -> list[bytes]:
        if self._done:
            return []
        self._done = True
        return error_frames(message, type)
