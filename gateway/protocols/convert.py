"""The converting translator: client format -> neutral -> upstream format, and back.

One class serves every "conv" cell of the §9.1 matrix.  Each wire format contributes a
``ClientFormat`` (decode the client request, encode answers and stream events for the client)
and/or an ``UpstreamFormat`` (encode the upstream request, decode its answers and events).
Adding the Messages or Google family means adding their two format records to the tables in
``translate.py``; this class does not change.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

import orjson

from gateway.billing.usage import Usage
from gateway.protocols.conversation import Conversation
from gateway.protocols.errors import UpstreamFormatError
from gateway.protocols.estimate import tokens_for_bytes
from gateway.protocols.events import (
    End,
    ReasoningDelta,
    Reply,
    StreamEvent,
    TextDelta,
    ToolArgsDelta,
    ToolCallStart,
    UpstreamEvent,
)
from gateway.protocols.kept_json import kept_dumps
from gateway.protocols.request import ClientRequest


class StreamDecoder(Protocol):
    """Upstream stream events -> neutral events; keeps the usage the upstream reported."""

    usage: Usage | None

    def decode(self, data: bytes, event: str | None = None) -> list[StreamEvent]: ...


class StreamEncoder(Protocol):
    """Neutral events -> client frames; ``close``/``error`` end the client stream once."""

    def encode(self, event: StreamEvent) -> list[bytes]: ...

    def close(self) -> list[bytes]: ...

    def error(self, message: str, type: str, code: str | None) -> list[bytes]: ...


@dataclass(frozen=True)
class ClientFormat:
    """What a client-side format contributes to a conversion."""

    decode_request: Callable[[dict[str, Any]], Conversation]
    #: (reply, client model name, client request body) -> answer body
    encode_reply: Callable[[Reply, str, dict[str, Any]], dict[str, Any]]
    stream_encoder: Callable[[ClientRequest], StreamEncoder]


@dataclass(frozen=True)
class UpstreamFormat:
    """What a channel-side format contributes: its endpoint and its codecs."""

    path: bytes
    #: (conversation, upstream model name) -> upstream request body
    encode_request: Callable[[Conversation, str], dict[str, Any]]
    decode_reply: Callable[[Any], Reply]
    stream_decoder: Callable[[], StreamDecoder]


class ConvertingTranslator:
    """Per-request translator between two different formats (see ``translate.Translator``)."""

    def __init__(self, request: ClientRequest, upstream_model: str, client: ClientFormat,
                 upstream: UpstreamFormat) -> None:
        self.request = request
        self.upstream_model = upstream_model
        self.usage: Usage | None = None
        self.completed = False
        self._client = client
        self._upstream = upstream
        # decoding and encoding happen now so that an unconvertible request fails before
        # anything is reserved or sent (ProtocolError, 400)
        conversation = client.decode_request(request.body)
        self._body = kept_dumps(upstream.encode_request(conversation, upstream_model))
        self._decoder: StreamDecoder | None = None
        self._encoder: StreamEncoder | None = None
        self._text_bytes = 0

    def upstream_path(self) -> bytes:
        return self._upstream.path

    def upstream_body(self) -> bytes:
        return self._body

    def response(self, status: int, body: bytes) -> bytes:
        try:
            parsed = orjson.loads(body)
        except orjson.JSONDecodeError as exc:
            raise UpstreamFormatError("upstream answer is not JSON") from exc
        try:
            reply = self._upstream.decode_reply(parsed)
        except (AttributeError, TypeError, ValueError, KeyError) as exc:
            raise UpstreamFormatError("unexpected upstream answer shape") from exc
        self.usage = reply.usage
        self.completed = True
        for text in (reply.text, reply.refusal, reply.reasoning):
            if text:
                self._text_bytes += len(text.encode())
        for call in reply.tool_calls:
            self._text_bytes += len(call.name.encode()) + len(call.arguments.encode())
        return orjson.dumps(self._client.encode_reply(reply, self.request.model,
                                                      self.request.body))

    def _codec(self) -> tuple[StreamDecoder, StreamEncoder]:
        if self._decoder is None or self._encoder is None:
            self._decoder = self._upstream.stream_decoder()
            self._encoder = self._client.stream_encoder(self.request)
        return self._decoder, self._encoder

    def stream_event(self, event: UpstreamEvent) -> list[bytes]:
        decoder, encoder = self._codec()
        frames: list[bytes] = []
        try:
            decoded = decoder.decode(event.data, event.event)
        except (AttributeError, TypeError, ValueError, KeyError) as exc:
            raise UpstreamFormatError("unexpected upstream event shape") from exc
        for neutral in decoded:
            if isinstance(neutral, TextDelta | ReasoningDelta):
                self._text_bytes += len(neutral.text.encode())
            elif isinstance(neutral, ToolArgsDelta):
                self._text_bytes += len(neutral.arguments.encode())
            elif isinstance(neutral, ToolCallStart):
                self._text_bytes += len(neutral.name.encode())
            elif isinstance(neutral, End):
                self.completed = True
            frames.extend(encoder.encode(neutral))
        if decoder.usage is not None:
            self.usage = decoder.usage
        return frames

    def finish(self) -> list[bytes]:
        return self._codec()[1].close()

    def error_frames(self, message: str, type: str, code: str | None) -> list[bytes]:
        return self._codec()[1].error(message, type, code)

    def relayed_text_tokens(self) -> int:
        return tokens_for_bytes(self._text_bytes)
