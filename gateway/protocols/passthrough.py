"""Same-format translators (contract §8.2 "pass", §15.1): the body goes upstream verbatim with
only ``model`` swapped, the answer comes back with ``model`` set to the client's name.

Streams are the hot path.  Each chunk is parsed once with ``orjson.loads`` (to read usage and
measure the relayed text) but never re-serialised: the bytes go out as received, with the
model name swapped by a plain ``bytes.replace`` of the ``"model":"…"`` field as the upstream
spelled it (learnt from the first chunk).  About 2 µs per chunk here -- on par with a loads/
dumps round trip and faster than pure-Python byte scanning; see the micro-benchmark note in
tests/gateway/protocols/test_passthrough.py.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any

import orjson

from gateway.billing.usage import Usage
from gateway.protocols import bytescan
from gateway.protocols.chat_stream import error_frames as chat_error_frames
from gateway.protocols.errors import UpstreamFormatError
from gateway.protocols.estimate import tokens_for_bytes
from gateway.protocols.events import UpstreamEvent
from gateway.protocols.google import decode_candidate
from gateway.protocols.google import upstream_path as google_upstream_path
from gateway.protocols.google_stream import error_frames as google_error_frames
from gateway.protocols.kept_json import kept_dumps
from gateway.protocols.messages_stream import error_frames as messages_error_frames
from gateway.protocols.request import ClientRequest
from gateway.protocols.responses_stream import error_frames as responses_error_frames
from gateway.protocols.sse import DONE, encode_event
from gateway.protocols.usage import extract_usage, merge_usage_objects

_MODEL_KEY = b'"model":'


def _size(text: Any) -> int:
    return len(text.encode()) if isinstance(text, str) else 0


class _Passthrough(ABC):
    """Shared body handling and model swap; subclasses measure their own text fields."""

    path: bytes = b""
    protocol = "chat"
    completed: bool

    def __init__(self, request: ClientRequest, upstream_model: str) -> None:
        self.request = request
        self.upstream_model = upstream_model
        self.usage: Usage | None = None
        #: the upstream ended the answer successfully (not after an error event)
        self.completed = False
        self._closed = False       # the client stream has its final frame
        self._failed = False       # the upstream reported an error inside the stream
        self._client_model = kept_dumps(request.model)
        self._model_field = b""    # the exact '"model":"<upstream name>"' last seen
        self._model_swap = b""     # its replacement, or b"" when nothing needs changing
        self._text_bytes = 0

    def upstream_path(self) -> bytes:
        return self.path

    def _body_changes(self) -> dict[str, Any]:
        changes: dict[str, Any] = {}
        if self.request.body.get("model") != self.upstream_model:
            changes["model"] = self.upstream_model
        return changes

    def upstream_body(self) -> bytes:
        changes = self._body_changes()
        if not changes:
            return self.request.raw
        # kept by the upstream request until the stream ends
        return kept_dumps({**self.request.body, **changes})

    @abstractmethod
    def _body_text(self, parsed: dict[str, Any]) -> int:
        """Bytes of answer text in a parsed non-stream body (the missing-usage estimate)."""

    def response(self, status: int, body: bytes) -> bytes:
        """A non-stream answer: usage read, text measured, ``model`` = the client's name."""
        try:
            parsed = orjson.loads(body)
        except orjson.JSONDecodeError:
            parsed = None
        if not isinstance(parsed, dict):
            self._text_bytes += len(body)
            return body
        self.usage = extract_usage(self.protocol, parsed)
        try:
            self._text_bytes += self._body_text(parsed)
        except (AttributeError, TypeError):
            self._text_bytes += len(body)
        self.completed = True
        if parsed.get("model") == self.request.model or "model" not in parsed:
            return body
        parsed["model"] = self.request.model
        return orjson.dumps(parsed)

    def _swap_model(self, data: bytes) -> bytes:
        """The client's model name in place of the upstream's, without re-serialising."""
        field = self._model_field
        if field and field in data:
            return data.replace(field, self._model_swap, 1) if self._model_swap else data
        found = bytescan.string_value_field(data, _MODEL_KEY)
        if found is None:
            return data
        self._model_field = found
        swapped = bytescan.replace_string_value(found, _MODEL_KEY, self._client_model)
        self._model_swap = b"" if swapped == found else swapped
        return data.replace(found, swapped, 1)

    def relayed_text_tokens(self) -> int:
        return tokens_for_bytes(self._text_bytes)


class ChatPassthrough(_Passthrough):
    """chat client -> ``compat`` channel (also the base of legacy completions)."""

    path = b"/v1/chat/completions"

    def _body_changes(self) -> dict[str, Any]:
        changes = super()._body_changes()
        if self.request.stream:
            options = self.request.body.get("stream_options") or {}
            if options.get("include_usage") is not True:
                changes["stream_options"] = {**options, "include_usage": True}
        return changes

    def _body_text(self, parsed: dict[str, Any]) -> int:
        size = 0
        for choice in parsed.get("choices") or ():
            message = choice.get("message") if isinstance(choice, dict) else None
            if isinstance(message, dict):
                size += _size(message.get("content")) + _size(message.get("refusal"))
                size += self._calls_text(message.get("tool_calls"))
        return size

    @staticmethod
    def _calls_text(calls: Any) -> int:
        size = 0
        for call in calls or ():
            function = call.get("function") if isinstance(call, dict) else None
            if isinstance(function, dict):
                size += _size(function.get("name")) + _size(function.get("arguments"))
        return size

    def _chunk_text(self, choices: list[Any]) -> int:
        size = 0
        for choice in choices:
            delta = choice.get("delta")
            if delta:
                text = delta.get("content")
                if text:
                    size += len(text.encode())
                if len(delta) > 1:
                    size += _size(delta.get("refusal")) + self._calls_text(delta.get("tool_calls"))
        return size

    def stream_event(self, event: UpstreamEvent) -> list[bytes]:
        # written flat: this runs once per relayed chunk
        data = event.data
        if self._closed:
            return []
        if data == b"[DONE]":
            self._closed = True
            self.completed = not self._failed
            return [DONE]
        try:
            chunk = orjson.loads(data)
        except orjson.JSONDecodeError:
            return [encode_event(data, event.event)]
        if type(chunk) is dict:
            if "error" in chunk:
                self._failed = True
            choices = chunk.get("choices")
            if choices:
                try:  # noqa: SIM105 -- zero-cost try; contextlib.suppress is not, per chunk
                    self._text_bytes += self._chunk_text(choices)
                except (AttributeError, TypeError):
                    pass  # an odd chunk is relayed untouched, just not measured
            usage = chunk.get("usage")
            if type(usage) is dict:
                found = extract_usage(self.protocol, usage)
                if found is not None:
                    self.usage = found
                if not self.request.wants_usage_in_stream and not choices:
                    return []  # the usage-only chunk we asked for, not the client
        field = self._model_field
        if field and field in data:
            if self._model_swap:
                data = data.replace(field, self._model_swap, 1)
        else:
            data = self._swap_model(data)
        if event.event is None and b"\n" not in data:
            return [b"data: " + data + b"\n\n"]
        return [encode_event(data, event.event)]

    def finish(self) -> list[bytes]:
        if self._closed:
            return []
        self._closed = True
        return [DONE]

    def error_frames(self, message: str, type: str, code: str | None) -> list[bytes]:
        if self._closed:
            return []
        self._closed = True
        if self._failed:
            return [DONE]  # the upstream's own error chunk went out: one error event only
        return chat_error_frames(message, type, code)


class CompletionsPassthrough(ChatPassthrough):
    """Legacy completions client -> ``compat`` channel ``/v1/completions`` (§8.2)."""

    path = b"/v1/completions"

    def _body_text(self, parsed: dict[str, Any]) -> int:
        return sum(_size(c.get("text")) for c in parsed.get("choices") or ()
                   if isinstance(c, dict))

    def _chunk_text(self, choices: list[Any]) -> int:
        return sum(_size(c.get("text")) for c in choices if isinstance(c, dict))


_TEXT_DELTAS = frozenset({"response.output_text.delta", "response.refusal.delta",
                          "response.function_call_arguments.delta",
                          "response.reasoning_summary_text.delta",
                          "response.reasoning_text.delta"})
_TERMINAL = frozenset({"response.completed", "response.incomplete", "response.failed"})


class ResponsesPassthrough(_Passthrough):
    """Responses client -> ``responses`` channel."""

    path = b"/v1/responses"
    protocol = "responses"

    def __init__(self, request: ClientRequest, upstream_model: str) -> None:
        super().__init__(request, upstream_model)
        self._sequence = 0

    def _body_text(self, parsed: dict[str, Any]) -> int:
        size = 0
        for item in parsed.get("output") or ():
            if not isinstance(item, dict):
                continue
            size += _size(item.get("arguments"))
            for part in item.get("content") or ():
                if isinstance(part, dict):
                    size += _size(part.get("text")) + _size(part.get("refusal"))
        return size

    def stream_event(self, event: UpstreamEvent) -> list[bytes]:
        data = event.data
        if self._closed:
            return []
        self._sequence += 1
        try:
            payload = orjson.loads(data)
        except orjson.JSONDecodeError:
            return [encode_event(data, event.event)]
        if isinstance(payload, dict):
            kind = payload.get("type")
            if type(kind) is not str:
                kind = None
            if kind in _TEXT_DELTAS:
                self._text_bytes += _size(payload.get("delta"))
                return [encode_event(data, event.event)]
            if kind in _TERMINAL:
                self._closed = True
                self.completed = kind != "response.failed"
                found = extract_usage(self.protocol, payload)
                if found is not None:
                    self.usage = found
            if "response" not in payload:
                return [encode_event(data, event.event)]
        return [encode_event(self._swap_model(data), event.event)]

    def finish(self) -> list[bytes]:
        self._closed = True
        return []

    def error_frames(self, message: str, type: str, code: str | None) -> list[bytes]:
        if self._closed:
            return []
        self._closed = True
        return responses_error_frames(message, type, code, self._sequence)


_MESSAGES_TEXT = frozenset({"text_delta", "input_json_delta", "thinking_delta"})


class MessagesPassthrough(_Passthrough):
    """Messages client -> ``messages`` channel: usage from ``message_start`` + ``message_delta``,
    the answer complete at ``message_stop``."""

    path = b"/v1/messages"
    protocol = "messages"

    def __init__(self, request: ClientRequest, upstream_model: str) -> None:
        super().__init__(request, upstream_model)
        self._raw_usage: dict[str, Any] = {}

    def _body_text(self, parsed: dict[str, Any]) -> int:
        size = 0
        for block in parsed.get("content") or ():
            if isinstance(block, dict):
                size += _size(block.get("text")) + _size(block.get("thinking"))
                if isinstance(block.get("input"), dict):
                    size += len(orjson.dumps(block["input"]))
        return size

    def _add_usage(self, usage: Any) -> None:
        if isinstance(usage, dict):
            self._raw_usage = merge_usage_objects(self._raw_usage, usage)
            found = extract_usage(self.protocol, self._raw_usage)
            if found is not None:
                self.usage = found

    def stream_event(self, event: UpstreamEvent) -> list[bytes]:
        data = event.data
        if self._closed:
            return []
        try:
            payload = orjson.loads(data)
        except orjson.JSONDecodeError:
            return [encode_event(data, event.event)]
        if isinstance(payload, dict):
            kind = payload.get("type")
            if kind == "content_block_delta":
                delta = payload.get("delta")
                if isinstance(delta, dict) and delta.get("type") in _MESSAGES_TEXT:
                    self._text_bytes += sum(_size(delta.get(k)) for k in (
                        "text", "partial_json", "thinking"))
                return [encode_event(data, event.event)]
            if kind == "message_start":
                message = payload.get("message")
                if isinstance(message, dict):
                    self._add_usage(message.get("usage"))
                return [encode_event(self._swap_model(data), event.event)]
            if kind == "message_delta":
                self._add_usage(payload.get("usage"))
            elif kind == "message_stop":
                self._closed = True
                self.completed = not self._failed
            elif kind == "error":
                self._failed = True
                self._closed = True
        return [encode_event(data, event.event)]

    def finish(self) -> list[bytes]:
        self._closed = True
        return []

    def error_frames(self, message: str, type: str, code: str | None) -> list[bytes]:
        if self._closed:
            return []
        self._closed = True
        return messages_error_frames(message, type)


class GooglePassthrough(_Passthrough):
    """Google client -> ``modelaction`` channel: the body goes verbatim (the model is in the
    path), ``modelVersion`` becomes the client's model name, usage is the last
    ``usageMetadata`` and the answer is complete once a chunk carries ``finishReason``."""

    protocol = "modelaction"

    def upstream_path(self) -> bytes:
        return google_upstream_path(self.upstream_model, self.request.stream)

    def upstream_body(self) -> bytes:
        return self.request.raw

    def _body_text(self, parsed: dict[str, Any]) -> int:
        texts, calls, _reason = decode_candidate(parsed)
        return sum(len(t.encode()) for t in texts) + sum(len(orjson.dumps(c)) for c in calls)

    def response(self, status: int, body: bytes) -> bytes:
        answer = super().response(status, body)
        try:
            parsed = orjson.loads(answer)
        except orjson.JSONDecodeError:
            return answer
        if isinstance(parsed, dict) and "modelVersion" in parsed:
            parsed["modelVersion"] = self.request.model
            return orjson.dumps(parsed)
        return answer

    def stream_event(self, event: UpstreamEvent) -> list[bytes]:
        if self._closed:
            return []
        try:
            chunk = orjson.loads(event.data)
        except orjson.JSONDecodeError:
            return [encode_event(event.data, event.event)]
        if not isinstance(chunk, dict):
            return [encode_event(event.data, event.event)]
        if "error" in chunk:
            self._failed = True
            self._closed = True
            return [encode_event(event.data, event.event)]
        try:
            self._text_bytes += self._body_text(chunk)
            _texts, _calls, reason = decode_candidate(chunk)
        except (AttributeError, TypeError, UpstreamFormatError):
            reason = None
        found = extract_usage(self.protocol, chunk) if "usageMetadata" in chunk else None
        if found is not None:
            self.usage = found
        if reason is not None:
            self.completed = True
        if "modelVersion" in chunk:
            chunk["modelVersion"] = self.request.model
        return [encode_event(orjson.dumps(chunk), event.event)]

    def finish(self) -> list[bytes]:
        self._closed = True
        return []

    def error_frames(self, message: str, type: str, code: str | None) -> list[bytes]:
        if self._closed:
            return []
        self._closed = True
        return google_error_frames(message)
