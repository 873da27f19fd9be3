"""Responses streams: upstream events -> neutral events, neutral events -> Responses events.

The decoder reads the typed events of the Responses API (``response.created``,
``response.output_text.delta``, ``response.output_item.added`` for function calls,
``response.function_call_arguments.delta``, ``response.completed`` / ``response.incomplete`` /
``response.failed``, ``error``) and ignores the rest.

The encoder emits the event sequence official SDKs expect (§9.4): ``response.created``,
``response.in_progress``, per output item ``output_item.added`` -> deltas -> ``…done`` ->
``output_item.done``, and finally ``response.completed`` (or ``response.incomplete``) with
usage.  Every event carries ``sequence_number``.  The ``…done`` events and the final response
object must repeat the produced text and arguments, so the encoder keeps the *generated output*
(bounded by the output limit) -- never the raw upstream stream.

Reasoning: upstream ``response.reasoning_summary_text.delta`` (and ``reasoning_text.delta``)
become ``ReasoningDelta`` events (summary parts after the first are joined by a blank line);
for the client, reasoning is one ``reasoning`` output item with one summary part:
``output_item.added`` -> ``reasoning_summary_part.added`` -> ``reasoning_summary_text.delta``
… -> ``reasoning_summary_text.done`` -> ``reasoning_summary_part.done`` ->
``output_item.done``.
"""

from __future__ import annotations

from typing import Any

import orjson

from gateway.billing.usage import Usage
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
    now_seconds,
)
from gateway.protocols.responses import (
    call_item,
    finish_from_status,
    message_item,
    reasoning_item,
    response_id_for,
    response_object,
    status_for,
)
from gateway.protocols.sse import encode_event
from gateway.protocols.usage import extract_usage, responses_usage

_TERMINAL = ("response.completed", "response.incomplete")


def error_frames(message: str, type: str, code: str | None, sequence: int = 0) -> list[bytes]:
    """The Responses family's in-stream error: one ``error`` event."""
    payload = {"type": "error", "code": code or type, "message": message, "param": None,
               "sequence_number": sequence}
    return [encode_event(orjson.dumps(payload), event="error")]


class ResponsesStreamDecoder:
    """Upstream Responses events -> neutral events; ``usage`` from the terminal event."""

    def __init__(self) -> None:
        self.usage: Usage | None = None
        self._tools: dict[Any, int] = {}   # output_index / item id -> neutral tool index
        self._tool_count = 0
        self._summary: tuple[Any, Any] | None = None  # (item id, summary index) last seen

    def decode(self, data: bytes, event: str | None = None) -> list[StreamEvent]:
        try:
            payload = orjson.loads(data)
        except orjson.JSONDecodeError as exc:
            raise UpstreamFormatError("unreadable Responses event") from exc
        if not isinstance(payload, dict):
            raise UpstreamFormatError("Responses event is not an object")
        kind = payload.get("type") or event
        if kind in ("response.output_text.delta", "response.refusal.delta"):
            delta = payload.get("delta")
            return [TextDelta(delta)] if isinstance(delta, str) and delta else []
        if kind in ("response.reasoning_summary_text.delta", "response.reasoning_text.delta"):
            delta = payload.get("delta")
            if not isinstance(delta, str) or not delta:
                return []
            key = (payload.get("item_id"), payload.get("summary_index"))
            if self._summary is not None and self._summary != key:
                delta = "\n\n" + delta
            self._summary = key
            return [ReasoningDelta(delta)]
        if kind == "response.function_call_arguments.delta":
            index = self._tools.get(payload.get("item_id"),
                                    self._tools.get(payload.get("output_index")))
            delta = payload.get("delta")
            if index is None or not isinstance(delta, str) or not delta:
                return []
            return [ToolArgsDelta(index, delta)]
        if kind == "response.output_item.added":
            return self._item_added(payload)
        response = payload.get("response")
        response = response if isinstance(response, dict) else {}
        if kind == "response.created":
            created = response.get("created_at")
            return [Start(str(response.get("id") or ""),
                          int(created) if isinstance(created, int | float) else now_seconds())]
        if kind in _TERMINAL:
            events: list[StreamEvent] = []
            reason: FinishReason = finish_from_status(response.get("status"),
                                                      response.get("incomplete_details"))
            if reason == "stop" and self._tool_count:
                reason = "tool_calls"
            events.append(Finish(reason))
            usage = extract_usage("responses", response) if response else None
            if usage is not None:
                self.usage = usage
                events.append(UsageReport(usage))
            events.append(End())
            return events
        if kind == "response.failed":
            error = response.get("error")
            error = error if isinstance(error, dict) else {}
            usage = extract_usage("responses", response) if response else None
            if usage is not None:
                self.usage = usage
            return [Failure(str(error.get("message") or "upstream response failed"),
                            "upstream_error", _code(error.get("code")))]
        if kind == "error":
            return [Failure(str(payload.get("message") or "upstream error"), "upstream_error",
                            _code(payload.get("code")))]
        return []

    def _item_added(self, payload: dict[str, Any]) -> list[StreamEvent]:
        item = payload.get("item")
        if not isinstance(item, dict) or item.get("type") != "function_call":
            return []
        index = self._tool_count
        self._tool_count += 1
        for key in (payload.get("output_index"), item.get("id")):
            if key is not None:
                self._tools[key] = index
        call_id = str(item.get("call_id") or new_id("call_"))
        events: list[StreamEvent] = [ToolCallStart(index, call_id, str(item.get("name") or ""))]
        arguments = item.get("arguments")
        if isinstance(arguments, str) and arguments:
            events.append(ToolArgsDelta(index, arguments))
        return events


def _code(value: Any) -> str | None:
    return None if value is None else str(value)


class _OpenCall:
    """A function-call output item still receiving argument deltas."""

    __slots__ = ("arguments", "call_id", "item_id", "name", "output_index")

    def __init__(self, output_index: int, item_id: str, call_id: str, name: str) -> None:
        self.output_index = output_index
        self.item_id = item_id
        self.call_id = call_id
        self.name = name
        self.arguments: list[str] = []


class ResponsesStreamEncoder:
    """Neutral events -> Responses events for the client (``model`` = the client's name)."""

    def __init__(self, model: str, request: dict[str, Any]) -> None:
        self._model = model
        self._request = request
        self._sequence = 0
        self._id = ""
        self._created = 0
        self._started = False
        self._done = False
        self._output: list[dict[str, Any] | None] = []
        self._message: tuple[int, str, list[str]] | None = None
        self._reasoning: tuple[int, str, list[str]] | None = None
        self._calls: dict[int, _OpenCall] = {}
        self._finish: FinishReason = "stop"
        self._usage: Usage | None = None

    def _event(self, kind: str, **fields: Any) -> bytes:
        payload = {"type": kind, **fields, "sequence_number": self._sequence}
        self._sequence += 1
        return encode_event(orjson.dumps(payload), event=kind)

    def _response(self, status: str, finish: FinishReason | None = None) -> dict[str, Any]:
        usage = responses_usage(self._usage) if self._usage and status != "in_progress" else None
        output = [item for item in self._output if item is not None] \
            if status != "in_progress" else []
        return response_object(self._id, self._created, self._model, self._request, status,
                               output, finish, usage)

    def _start(self, upstream_id: str = "", created: int = 0) -> list[bytes]:
        if self._started:
            return []
        self._started = True
        self._id = response_id_for(upstream_id)
        self._created = created or now_seconds()
        return [self._event("response.created", response=self._response("in_progress")),
                self._event("response.in_progress", response=self._response("in_progress"))]

    def encode(self, event: StreamEvent) -> list[bytes]:
        if self._done:
            return []
        if isinstance(event, Start):
            return self._start(event.id, event.created)
        if isinstance(event, Finish):
            self._finish = event.reason
            return []
        if isinstance(event, UsageReport):
            self._usage = event.usage
            return []
        if isinstance(event, End):
            return self.close()
        if isinstance(event, Failure):
            return self.error(event.message, event.type, event.code)
        frames = self._start()
        if isinstance(event, TextDelta):
            frames.extend(self._close_reasoning())
            frames.extend(self._text(event.text))
        elif isinstance(event, ReasoningDelta):
            if event.text:
                frames.extend(self._close_message())
                frames.extend(self._think(event.text))
        elif isinstance(event, ToolCallStart):
            frames.extend(self._close_reasoning())
            frames.extend(self._close_message())
            frames.extend(self._open_call(event.index, event.id, event.name))
        elif isinstance(event, ToolArgsDelta):
            call = self._calls.get(event.index)
            if call is None:
                frames.extend(self._open_call(event.index, new_id("call_"), ""))
                call = self._calls[event.index]
            call.arguments.append(event.arguments)
            frames.append(self._event("response.function_call_arguments.delta",
                                      item_id=call.item_id, output_index=call.output_index,
                                      delta=event.arguments))
        return frames

    def _text(self, text: str) -> list[bytes]:
        frames: list[bytes] = []
        if self._message is None:
            index, item_id = len(self._output), new_id("msg_")
            self._output.append(None)
            self._message = (index, item_id, [])
            item = message_item(item_id, None, status="in_progress")
            frames.append(self._event("response.output_item.added", output_index=index,
                                      item=item))
            frames.append(self._event("response.content_part.added", item_id=item_id,
                                      output_index=index, content_index=0,
                                      part={"type": "output_text", "text": "",
                                            "annotations": [], "logprobs": []}))
        index, item_id, pieces = self._message
        pieces.append(text)
        frames.append(self._event("response.output_text.delta", item_id=item_id,
                                  output_index=index, content_index=0, delta=text,
                                  logprobs=[]))
        return frames

    def _think(self, text: str) -> list[bytes]:
        frames: list[bytes] = []
        if self._reasoning is None:
            index, item_id = len(self._output), new_id("rs_")
            self._output.append(None)
            self._reasoning = (index, item_id, [])
            frames.append(self._event("response.output_item.added", output_index=index,
                                      item=reasoning_item(item_id, [], "in_progress")))
            frames.append(self._event("response.reasoning_summary_part.added", item_id=item_id,
                                      output_index=index, summary_index=0,
                                      part={"type": "summary_text", "text": ""}))
        index, item_id, pieces = self._reasoning
        pieces.append(text)
        frames.append(self._event("response.reasoning_summary_text.delta", item_id=item_id,
                                  output_index=index, summary_index=0, delta=text))
        return frames

    def _close_reasoning(self) -> list[bytes]:
        if self._reasoning is None:
            return []
        index, item_id, pieces = self._reasoning
        self._reasoning = None
        text = "".join(pieces)
        item = reasoning_item(item_id, [text])
        self._output[index] = item
        return [
            self._event("response.reasoning_summary_text.done", item_id=item_id,
                        output_index=index, summary_index=0, text=text),
            self._event("response.reasoning_summary_part.done", item_id=item_id,
                        output_index=index, summary_index=0, part=item["summary"][0]),
            self._event("response.output_item.done", output_index=index, item=item),
        ]

    def _close_message(self) -> list[bytes]:
        if self._message is None:
            return []
        index, item_id, pieces = self._message
        self._message = None
        text = "".join(pieces)
        item = message_item(item_id, text)
        self._output[index] = item
        return [
            self._event("response.output_text.done", item_id=item_id, output_index=index,
                        content_index=0, text=text, logprobs=[]),
            self._event("response.content_part.done", item_id=item_id, output_index=index,
                        content_index=0, part=item["content"][0]),
            self._event("response.output_item.done", output_index=index, item=item),
        ]

    def _open_call(self, index: int, call_id: str, name: str) -> list[bytes]:
        if index in self._calls:
            return []
        output_index = len(self._output)
        self._output.append(None)
        call = _OpenCall(output_index, new_id("fc_"), call_id, name)
        self._calls[index] = call
        item = call_item(call.item_id, ToolCall(call_id, name, ""), status="in_progress")
        return [self._event("response.output_item.added", output_index=output_index, item=item)]

    def _close_calls(self) -> list[bytes]:
        frames = []
        for call in self._calls.values():
            if self._output[call.output_index] is not None:
                continue
            arguments = "".join(call.arguments)
            item = call_item(call.item_id, ToolCall(call.call_id, call.name, arguments))
            self._output[call.output_index] = item
            frames.append(self._event("response.function_call_arguments.done",
                                      item_id=call.item_id, output_index=call.output_index,
                                      name=call.name, arguments=arguments))
            frames.append(self._event("response.output_item.done",
                                      output_index=call.output_index, item=item))
        return frames

    def close(self) -> list[bytes]:
        """Close open items and send the terminal ``response.completed``/``incomplete``."""
        if self._done:
            return []
        frames = self._start()
        frames.extend(self._close_reasoning())
        frames.extend(self._close_message())
        frames.extend(self._close_calls())
        self._done = True
        status = status_for(self._finish)
        kind = "response.completed" if status == "completed" else "response.incomplete"
        frames.append(self._event(kind, response=self._response(status, self._finish)))
        return frames

    def error(self, message: str, type: str, code: str | None) -> list[bytes]:
        if self._done:
            return []
        self._done = True
        frames = error_frames(message, type, code, self._sequence)
        self._sequence += 1
        return frames
