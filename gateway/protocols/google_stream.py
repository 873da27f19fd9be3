"""Google ``streamGenerateContent?alt=sse`` streams: chunks -> neutral events and back.

A Google stream is a series of ``data:`` GenerateContentResponse chunks with no end marker:
the chunk carrying ``finishReason`` is the last one that matters (it also carries the final
``usageMetadata``), so the decoder reports the end there.  Usage metadata is cumulative;
the last one seen wins.

Google sends function calls whole (§9.4: "args not streamed"), so the encoder keeps the
arguments of the calls in progress (small JSON objects, not the answer text) and writes each
call as one ``functionCall`` part in the closing chunk, together with ``finishReason`` and
``usageMetadata``.  Text goes out chunk by chunk as it arrives; so does reasoning, as
``thought: true`` parts (upstream thought parts become ``ReasoningDelta`` events).
"""

from __future__ import annotations

from typing import Any

import orjson

from gateway.billing.usage import Usage
from gateway.errors import modelaction_status
from gateway.protocols import fields
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
    ToolCall,
    ToolCallStart,
    UsageReport,
    new_id,
)
from gateway.protocols.google import (
    FINISH_REASONS,
    decode_candidate,
    decode_thoughts,
    finish_reason,
    function_call_part,
    google_usage,
    thought_part,
)
from gateway.protocols.sse import encode_event
from gateway.protocols.usage import extract_usage


def error_frames(message: str, status: int = 502) -> list[bytes]:
    """The model-action in-stream error: one ``data: {"error": {code, message, status}}``."""
    payload = {"error": {"code": status, "message": message,
                         "status": modelaction_status(status)}}
    return [encode_event(orjson.dumps(payload))]


class GoogleStreamDecoder:
    """Upstream Google chunks -> neutral events; ``usage`` keeps the last usageMetadata."""

    def __init__(self) -> None:
        self.usage: Usage | None = None
        self._started = False
        self._calls = 0

    def decode(self, data: bytes, event: str | None = None) -> list[StreamEvent]:
        try:
            chunk = orjson.loads(data)
        except orjson.JSONDecodeError as exc:
            raise UpstreamFormatError("unreadable Google chunk") from exc
        if isinstance(chunk, list):  # a JSON-array stream element
            chunk = chunk[0] if chunk else {}
        if not isinstance(chunk, dict):
            raise UpstreamFormatError("Google chunk is not an object")
        error = chunk.get("error")
        if isinstance(error, dict):
            return [Failure(str(error.get("message") or "upstream error"),
                            str(error.get("status") or "upstream_error"))]
        events: list[StreamEvent] = []
        if not self._started:
            self._started = True
            events.append(Start(str(chunk.get("responseId") or ""), 0))
        texts, calls, reason = decode_candidate(chunk)
        thoughts, signature = decode_thoughts(chunk)
        events.extend(ReasoningDelta(t) for t in thoughts)
        if signature is not None:
            events.append(ReasoningDelta("", signature))
        events.extend(TextDelta(t) for t in texts if t)
        for call in calls:
            index = self._calls
            self._calls += 1
            events.append(ToolCallStart(index, str(call.get("id") or new_id("call_")),
                                        str(call.get("name") or "")))
            events.append(ToolArgsDelta(index, fields.json_text(call.get("args") or {})))
        found = extract_usage("modelaction", chunk) if "usageMetadata" in chunk else None
        if found is not None:
            self.usage = found
        if reason is not None:
            events.append(Finish(FINISH_REASONS.get(reason, "stop")))
            if self.usage is not None:
                events.append(UsageReport(self.usage))
            events.append(End())
        return events


class GoogleStreamEncoder:
    """Neutral events -> Google SSE chunks for the client (``modelVersion`` = its name)."""

    def __init__(self, model: str) -> None:
        self._model = model
        self._id = ""
        self._done = False
        self._calls: dict[int, list[str]] = {}  # index -> [id, name, arguments]
        self._reason: FinishReason = "stop"
        self._usage: Usage | None = None

    def _chunk(self, parts: list[dict[str, Any]], finish: str | None = None) -> bytes:
        candidate: dict[str, Any] = {"content": {"role": "model", "parts": parts}, "index": 0}
        if finish is not None:
            candidate["finishReason"] = finish
        chunk: dict[str, Any] = {"candidates": [candidate], "modelVersion": self._model,
                                 "responseId": self._id or self._new_id()}
        if finish is not None and self._usage is not None:
            chunk["usageMetadata"] = google_usage(self._usage)
        return encode_event(orjson.dumps(chunk))

    def _new_id(self) -> str:
        self._id = new_id("")
        return self._id

    def encode(self, event: StreamEvent) -> list[bytes]:
        if self._done:
            return []
        if isinstance(event, Start):
            self._id = self._id or event.id
        elif isinstance(event, TextDelta):
            return [self._chunk([{"text": event.text}])]
        elif isinstance(event, ReasoningDelta):
            return [self._chunk([thought_part(event.text)])] if event.text else []
        elif isinstance(event, ToolCallStart):
            self._calls[event.index] = [event.id, event.name, ""]
        elif isinstance(event, ToolArgsDelta):
            if event.index in self._calls:
                self._calls[event.index][2] += event.arguments
        elif isinstance(event, Finish):
            self._reason = event.reason
        elif isinstance(event, UsageReport):
            self._usage = event.usage
        elif isinstance(event, End):
            return self.close()
        elif isinstance(event, Failure):
            return self.error(event.message, event.type, event.code)
        return []

    def close(self) -> list[bytes]:
        """The closing chunk: whole function calls, ``finishReason`` and ``usageMetadata``."""
        if self._done:
            return []
        self._done = True
        parts = [function_call_part(ToolCall(i, n, a))
                 for i, n, a in (self._calls[k] for k in sorted(self._calls))]
        reason = "tool_calls" if self._calls and self._reason == "stop" else self._reason
        return [self._chunk(parts, finish_reason(reason))]

    def error(self, message: str, type: str, code: str | None) -> list[bytes]:
        if self._done:
            return []
        self._done = True
        return error_frames(message)
