"""Same-format translators (contract §8.2 "pass", §15.1): the body goes upstream verbatim with
only ``model`` swapped, the answer comes back with ``model`` set to the client's name.

Streams are the hot path, so a chunk is only parsed when it may carry usage (it mentions
``"usage"`` with a non-null value, or is a Responses terminal event); the model name is swapped
and the relayed text measured with byte searches (``bytescan``).  Micro-benchmark (this
machine, a typical 330-byte chat chunk with a model swap): ~1.3 µs per chunk, against ~4 µs
for an ``orjson`` loads + dumps round trip; see tests/gateway/protocols/test_passthrough.py.
"""

from __future__ import annotations

import re
from typing import Any

import orjson

from gateway.billing.usage import Usage
from gateway.protocols import bytescan
from gateway.protocols.chat_stream import error_frames as chat_error_frames
from gateway.protocols.estimate import tokens_for_bytes
from gateway.protocols.events import UpstreamEvent
from gateway.protocols.request import ClientRequest
from gateway.protocols.responses_stream import error_frames as responses_error_frames
from gateway.protocols.usage import extract_usage
from gateway.sse import DONE, encode_event

_MODEL_KEY = b'"model":'
_USAGE_OBJECT = b'"usage":{'
_USAGE_OBJECT_SPACED = b'"usage": {'


def _text_values(*keys: str) -> re.Pattern[bytes]:
    """Matches the string values of ``keys`` (escapes included, compact or spaced JSON);
    ``findall`` measures a chunk's relayed text in one C-level call."""
    names = "|".join(re.escape(key) for key in keys)
    return re.compile(rb'"(?:' + names.encode() + rb')": ?"([^"\\]*(?:\\.[^"\\]*)*)"')


class _Passthrough:
    """Shared body handling; subclasses say which keys hold relayed text."""

    path: bytes = b""
    protocol = "chat"
    #: the string values that are relayed text: in stream events, in a whole answer
    text_values: re.Pattern[bytes] = _text_values("content")
    body_text_values: re.Pattern[bytes] = _text_values("content")
    completed: bool

    def __init__(self, request: ClientRequest, upstream_model: str) -> None:
        self.request = request
        self.upstream_model = upstream_model
        self.usage: Usage | None = None
        self.completed = False
        self._client_model = orjson.dumps(request.model)
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
        return orjson.dumps({**self.request.body, **changes})

    def response(self, status: int, body: bytes) -> bytes:
        """A non-stream answer: usage read, text measured, ``model`` = the client's name."""
        try:
            parsed = orjson.loads(body)
        except orjson.JSONDecodeError:
            self._text_bytes += len(body)
            return body
        if not isinstance(parsed, dict):
            self._text_bytes += len(body)
            return body
        self.usage = extract_usage(self.protocol, parsed)
        self._text_bytes += sum(map(len, self.body_text_values.findall(body)))
        if parsed.get("model") == self.request.model or "model" not in parsed:
            return body
        parsed["model"] = self.request.model
        return orjson.dumps(parsed)

    def _measure(self, data: bytes) -> None:
        self._text_bytes += sum(map(len, self.text_values.findall(data)))

    def _swap_model(self, data: bytes) -> bytes:
        """The client's model name in place of the upstream's: a plain ``bytes.replace`` of
        the field as the upstream spelled it, learnt from the first chunk that carries it."""
        field = self._model_field
        if field and field in data:
            return data.replace(field, self._model_swap, 1) if self._model_swap else data
        if _MODEL_KEY not in data:
            return data
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
    text_values = body_text_values = _text_values("content", "refusal", "arguments")

    def _body_changes(self) -> dict[str, Any]:
        changes = super()._body_changes()
        if self.request.stream:
            options = self.request.body.get("stream_options") or {}
            if options.get("include_usage") is not True:
                changes["stream_options"] = {**options, "include_usage": True}
        return changes

    def stream_event(self, event: UpstreamEvent) -> list[bytes]:
        data = event.data
        if self.completed:
            return []
        if data == b"[DONE]":
            self.completed = True
            return [DONE]
        self._measure(data)
        if _USAGE_OBJECT in data or _USAGE_OBJECT_SPACED in data:
            try:
                chunk = orjson.loads(data)
            except orjson.JSONDecodeError:
                chunk = None
            if isinstance(chunk, dict) and isinstance(chunk.get("usage"), dict):
                found = extract_usage(self.protocol, chunk["usage"])
                if found is not None:
                    self.usage = found
                if not self.request.wants_usage_in_stream and not chunk.get("choices"):
                    return []  # the usage-only chunk we asked for, not the client
        return [encode_event(self._swap_model(data), event.event)]

    def finish(self) -> list[bytes]:
        if self.completed:
            return []
        self.completed = True
        return [DONE]

    def error_frames(self, message: str, type: str, code: str | None) -> list[bytes]:
        if self.completed:
            return []
        self.completed = True
        return chat_error_frames(message, type, code)


class CompletionsPassthrough(ChatPassthrough):
    """Legacy completions client -> ``compat`` channel ``/v1/completions`` (§8.2)."""

    path = b"/v1/completions"
    text_values = body_text_values = _text_values("text")


class ResponsesPassthrough(_Passthrough):
    """Responses client -> ``responses`` channel."""

    path = b"/v1/responses"
    protocol = "responses"
    text_values = _text_values("delta")
    body_text_values = _text_values("text", "arguments")
    _TERMINAL = (b'"response.completed"', b'"response.incomplete"', b'"response.failed"')

    def __init__(self, request: ClientRequest, upstream_model: str) -> None:
        super().__init__(request, upstream_model)
        self._sequence = 0

    def stream_event(self, event: UpstreamEvent) -> list[bytes]:
        data = event.data
        if self.completed:
            return []
        self._sequence += 1
        if b'.delta"' in data:
            self._measure(data)
            return [encode_event(data, event.event)]
        if any(marker in data for marker in self._TERMINAL):
            try:
                payload = orjson.loads(data)
            except orjson.JSONDecodeError:
                payload = None
            if isinstance(payload, dict):
                found = extract_usage(self.protocol, payload)
                if found is not None:
                    self.usage = found
                if payload.get("type") in ("response.completed", "response.incomplete",
                                           "response.failed"):
                    self.completed = True
        return [encode_event(self._swap_model(data), event.event)]

    def finish(self) -> list[bytes]:
        self.completed = True
        return []

    def error_frames(self, message: str, type: str, code: str | None) -> list[bytes]:
        if self.completed:
            return []
        self.completed = True
        return responses_error_frames(message, type, code, self._sequence)
