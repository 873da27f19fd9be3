"""``make_translator``: the per-request object the gateway pipeline drives (contract §8-§9).

Pipeline usage (one ``Translator`` per upstream attempt)::

    request = parse_client_request("chat", body)     # 400 ProtocolError on bad input
    translator = make_translator("chat", channel_type, request, upstream_model)
                                                     # 400 ProtocolError if unconvertible
    POST {base}{translator.upstream_path()} with translator.upstream_body()
    non-stream 2xx:  client_body = translator.response(status, upstream_body)
                                                     # UpstreamFormatError -> 502
    stream:          for each upstream SSEEvent: write(*translator.stream_event(event))
                     at upstream EOF: write(*translator.finish())
                     failure after the first byte: write(*translator.error_frames(msg, type, code))
    metering:        translator.usage (None = upstream reported none)
                     else estimate output from translator.relayed_text_tokens()
                     translator.completed: the upstream ended the answer successfully
                     (its end marker arrived; False after an upstream error event or
                     when the stream was cut short)

Pairs served: (chat, compat), (completions, compat), (responses, responses) pass through with
only ``model`` swapped (streams to compat channels also ask for ``include_usage``);
(chat, responses), (responses, compat) and (completions, responses) convert both ways,
streams included; ``stream_event`` may raise ``UpstreamFormatError`` on an unreadable event of
a converted stream.  The Messages (``messages``) and Google (``google``) client families pass
through to ``messages`` / ``modelaction`` channels and convert to and from every other text
channel type, streams included.  Any other pair answers 400 ``unsupported upstream protocol``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Protocol

from gateway.billing.usage import Usage
from gateway.channels.channel_types import normalise_channel_type
from gateway.protocols import chat, completions, google, messages, responses
from gateway.protocols.chat_stream import ChatStreamDecoder, ChatStreamEncoder
from gateway.protocols.convert import ClientFormat, ConvertingTranslator, UpstreamFormat
from gateway.protocols.errors import ProtocolError
from gateway.protocols.events import UpstreamEvent
from gateway.protocols.google_stream import GoogleStreamDecoder, GoogleStreamEncoder
from gateway.protocols.messages_stream import MessagesStreamDecoder, MessagesStreamEncoder
from gateway.protocols.passthrough import (
    ChatPassthrough,
    CompletionsPassthrough,
    GooglePassthrough,
    MessagesPassthrough,
    ResponsesPassthrough,
)
from gateway.protocols.request import ClientRequest
from gateway.protocols.responses_stream import ResponsesStreamDecoder, ResponsesStreamEncoder


class Translator(Protocol):
    """One request's translation between the client's format and the channel's."""

    usage: Usage | None
    completed: bool

    def upstream_path(self) -> bytes: ...

    def upstream_body(self) -> bytes: ...

    def response(self, status: int, body: bytes) -> bytes: ...

    def stream_event(self, event: UpstreamEvent) -> list[bytes]: ...

    def finish(self) -> list[bytes]: ...

    def error_frames(self, message: str, type: str, code: str | None) -> list[bytes]: ...

    def relayed_text_tokens(self) -> int: ...


CLIENT_FORMATS: dict[str, ClientFormat] = {
    "chat": ClientFormat(
        decode_request=chat.to_conversation,
        encode_reply=lambda reply, model, _request: chat.encode_reply(reply, model),
        stream_encoder=lambda request: ChatStreamEncoder(request.model,
                                                         request.wants_usage_in_stream)),
    "completions": ClientFormat(
        decode_request=completions.to_conversation,
        encode_reply=completions.encode_reply,
        stream_encoder=lambda request: completions.CompletionsStreamEncoder(
            request.model, request.wants_usage_in_stream)),
    "responses": ClientFormat(
        decode_request=responses.to_conversation,
        encode_reply=responses.encode_reply,
        stream_encoder=lambda request: ResponsesStreamEncoder(request.model, request.body)),
    "messages": ClientFormat(
        decode_request=messages.to_conversation,
        encode_reply=messages.encode_reply,
        stream_encoder=lambda request: MessagesStreamEncoder(request.model)),
    # the stream flag of a Google request is in its path: see make_translator
    "google": ClientFormat(
        decode_request=google.to_conversation,
        encode_reply=google.encode_reply,
        stream_encoder=lambda request: GoogleStreamEncoder(request.model)),
}

UPSTREAM_FORMATS: dict[str, UpstreamFormat] = {
    "compat": UpstreamFormat(b"/v1/chat/completions", chat.from_conversation,
                             chat.decode_reply, ChatStreamDecoder),
    "responses": UpstreamFormat(b"/v1/responses", responses.from_conversation,
                                responses.decode_reply, ResponsesStreamDecoder),
    "messages": UpstreamFormat(b"/v1/messages", messages.from_conversation,
                               messages.decode_reply, MessagesStreamDecoder),
    # the path depends on the model and the stream flag: see _GoogleUpstream
    "modelaction": UpstreamFormat(b"", google.from_conversation, google.decode_reply,
                                  GoogleStreamDecoder),
}

_PASSTHROUGH: dict[tuple[str, str], Callable[[ClientRequest, str], Translator]] = {
    ("chat", "compat"): ChatPassthrough,
    ("completions", "compat"): CompletionsPassthrough,
    ("responses", "responses"): ResponsesPassthrough,
    ("messages", "messages"): MessagesPassthrough,
    ("google", "modelaction"): GooglePassthrough,
}


class _GoogleUpstream(ConvertingTranslator):
    """A conversion to a ``modelaction`` channel: the model and the stream flag are in the
    upstream path, not the body."""

    def upstream_path(self) -> bytes:
        return google.upstream_path(self.upstream_model, self.request.stream)


#: stored channel types already normalised (a channel's type is read on every request)
_CHANNEL_TYPES: dict[str, str] = {}


def make_translator(client_family: str, channel_protocol: str, request: ClientRequest,
                    upstream_model: str) -> Translator:
    """The translator for ``request`` sent to a channel of type ``channel_protocol``.

    Raises ``ProtocolError`` (400) when the pair is not served or the request cannot be
    expressed in the channel's format.
    """
    channel = _CHANNEL_TYPES.get(channel_protocol)
    if channel is None:
        channel = normalise_channel_type(channel_protocol)
        if len(_CHANNEL_TYPES) < 256:
            _CHANNEL_TYPES[channel_protocol] = channel
    passthrough = _PASSTHROUGH.get((client_family, channel))
    if passthrough is not None:
        return passthrough(request, upstream_model)
    client = CLIENT_FORMATS.get(client_family)
    upstream = UPSTREAM_FORMATS.get(channel)
    if client is None or upstream is None:
        raise ProtocolError(400, f"unsupported upstream protocol: {channel}", "invalid_request")
    if client_family == "google":
        client = replace(client, decode_request=lambda body: google.to_conversation(
            body, stream=request.stream))
    if channel == "modelaction":
        return _GoogleUpstream(request, upstream_model, client, upstream)
    return ConvertingTranslator(request, upstream_model, client, upstream)
