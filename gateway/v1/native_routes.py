"""The Messages and model-action text routes (contract §1, §8.1): the /v1 text pipeline with
the client's own error envelope and request reading.

``POST /v1/messages`` and ``POST /v1[beta]/models/<model>:<action>`` run exactly the pipeline
of ``TextCall`` (authentication, limits, reservation, failover, relay, settlement); only how
the request is read and how errors are worded differ, so their official SDKs raise their typed
errors.  The model-action path is parsed here because the route table matches exact paths:
``gateway.resource`` hands every ``POST`` under ``/v1/models/`` and ``/v1beta/models/`` to
``model_action``.  A malformed segment or an unsupported action answers 404 -- after
authentication and the global limit, as §1 says.

Google streams: with ``alt=sse`` the answer is SSE; without it, a JSON array of the same chunks
streamed as they come (``[`` chunk ``,`` chunk ... ``]``, ``Content-Type: application/json``),
which is what Google serves there (§8.1).  Either way the idle heartbeat is a bare newline:
the google-genai SDK reads an SSE comment line as a broken JSON chunk, while a blank line is
ignored by SSE readers and is JSON whitespace.
"""

from __future__ import annotations

from typing import Any

from gateway import errors
from gateway.billing.usage import Usage
from gateway.context import GatewayContext
from gateway.errors import GatewayError
from gateway.protocols import fields, google, messages
from gateway.protocols.errors import ProtocolError
from gateway.protocols.events import UpstreamEvent
from gateway.protocols.request import ClientRequest
from gateway.protocols.sse import SSEParser
from gateway.protocols.translate import Translator
from gateway.v1 import model_action_relay
from gateway.v1.model_action_relay import ModelActionRelayCall
from gateway.v1.outcome import Outcome
from gateway.v1.text_route import TextCall

JSON_STREAM_HEADERS = [(b"content-type", b"application/json; charset=utf-8"),
                       (b"cache-control", b"no-cache"), (b"x-accel-buffering", b"no")]

MESSAGES_ENDPOINT = "/v1/messages"
FORWARDED_MESSAGES_HEADERS = (b"anthropic-beta", b"anthropic-version")
MODEL_PREFIXES = (b"/v1/models/", b"/v1beta/models/")


class MessagesCall(TextCall):
    """``POST /v1/messages``: Messages request, Messages error envelope."""

    family = errors.MESSAGES

    def __init__(self, ctx: GatewayContext, request: Any) -> None:
        super().__init__(ctx, request, "messages", MESSAGES_ENDPOINT)

    def _parse(self, body: bytes) -> ClientRequest:
        try:
            parsed = fields.parse_object(body)
            model = fields.model_name(parsed)
            stream, max_output, estimate = messages.read_request(parsed)
        except ProtocolError as exc:
            raise GatewayError(exc.status, exc.message, type=exc.type, param=exc.param) from None
        return ClientRequest("messages", model, stream, True, max_output, estimate, parsed, body)

    def _forwarded_headers(self, channel_type: str) -> dict[bytes, list[bytes]] | None:
        """``anthropic-beta`` and the client's ``anthropic-version`` go to messages channels."""
        if channel_type != "messages":
            return None
        forwarded = {name: values for name in FORWARDED_MESSAGES_HEADERS
                     if (values := self.request.requestHeaders.getRawHeaders(name))}
        return forwarded or None


class ModelActionCall(TextCall):
    """``POST /v1[beta]/models/<model>:<action>``: model and stream flag from the path."""

    family = errors.MODELACTION
    heartbeat = b"\n"

    def __init__(self, ctx: GatewayContext, request: Any, endpoint: str,
                 target: tuple[str, str] | None) -> None:
        super().__init__(ctx, request, "google", endpoint)
        self.target = target if target is not None and target[1] in google.ACTIONS else None
        self.json_array = (request.args.get(b"alt") or [b""])[0] != b"sse"
        if self.json_array:
            self.stream_headers = JSON_STREAM_HEADERS

    def _translator(self, channel_type: str, client_request: ClientRequest,
                    upstream_model: str) -> Translator:
        translator = super()._translator(channel_type, client_request, upstream_model)
        if client_request.stream and self.json_array:
            return JsonArrayStream(translator)
        return translator

    async def _serve(self) -> Outcome:
        if self.target is None:
            await self._caller()
            raise errors.not_found()
        return await super()._serve()

    def _parse(self, body: bytes) -> ClientRequest:
        assert self.target is not None
        model, action = self.target
        try:
            parsed = fields.parse_object(body)
            max_output, estimate = google.read_request(parsed)
        except ProtocolError as exc:
            raise GatewayError(exc.status, exc.message, type=exc.type, param=exc.param) from None
        stream = action == "streamGenerateContent"
        return ClientRequest("google", model, stream, True, max_output, estimate, parsed, body)


class JsonArrayStream:
    """A Google stream's SSE chunks re-framed as the elements of one streamed JSON array."""

    def __init__(self, inner: Translator) -> None:
        self.inner = inner
        self._parser = SSEParser()
        self._opened = False
        self._closed = False

    @property
    def usage(self) -> Usage | None:
        return self.inner.usage

    @usage.setter
    def usage(self, value: Usage | None) -> None:
        self.inner.usage = value

    @property
    def completed(self) -> bool:
        return self.inner.completed

    @completed.setter
    def completed(self, value: bool) -> None:
        self.inner.completed = value

    def upstream_path(self) -> bytes:
        return self.inner.upstream_path()

    def upstream_body(self) -> bytes:
        return self.inner.upstream_body()

    def response(self, status: int, body: bytes) -> bytes:
        return self.inner.response(status, body)

    def relayed_text_tokens(self) -> int:
        return self.inner.relayed_text_tokens()

    def _elements(self, frames: list[bytes]) -> list[bytes]:
        out: list[bytes] = []
        if self._closed:
            return out
        for event in self._parser.feed(b"".join(frames)):
            if event.data:
                out.append((b",\n" if self._opened else b"[") + event.data)
                self._opened = True
        return out

    def _close(self, frames: list[bytes]) -> list[bytes]:
        out = self._elements(frames)
        if not self._closed:
            self._closed = True
            out.append(b"]" if self._opened else b"[]")
        return out

    def stream_event(self, event: UpstreamEvent) -> list[bytes]:
        return self._elements(self.inner.stream_event(event))

    def finish(self) -> list[bytes]:
        return self._close(self.inner.finish())

    def error_frames(self, message: str, type: str, code: str | None) -> list[bytes]:
        return self._close(self.inner.error_frames(message, type, code))


async def messages_call(ctx: GatewayContext, request: Any) -> None:
    await MessagesCall(ctx, request).run()


async def model_action(ctx: GatewayContext, request: Any) -> None:
    """Every ``POST`` under ``/v1/models/`` or ``/v1beta/models/``."""
    path: bytes = request.path.rstrip(b"/")
    prefix = next(p for p in MODEL_PREFIXES if path.startswith(p))
    segment = path[len(prefix):].decode("utf-8", "replace")
    target = google.parse_model_action(segment)
    endpoint = path.decode("utf-8", "replace")
    if target is not None and target[1] in model_action_relay.ACTIONS:
        await ModelActionRelayCall(ctx, request, endpoint, *target).run()
        return
    await ModelActionCall(ctx, request, endpoint, target).run()
