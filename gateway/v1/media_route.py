"""Media relays: moderations, speech, transcriptions, image generation and edits (contract §12).

No protocol translation: the client body goes to the same path upstream with ``model`` replaced
by the upstream model (JSON or multipart), and the answer comes back as the upstream sent it
(speech audio is streamed through, not buffered).  Only ``compat``/``responses`` channels serve
these; only the first target is used (no failover outside the text routes, §5.5).  Usage is the
upstream's when reported, else the estimates of §10.3.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import orjson

from gateway import errors
from gateway.billing.usage import Usage
from gateway.catalog.snapshot import normalize_model_name
from gateway.channels.channel_types import normalise_channel_type
from gateway.channels.http import (
    BodyTooLarge,
    UpstreamError,
    UpstreamResponse,
)
from gateway.channels.relay import BytesRelay, StreamWriter
from gateway.channels.upstream_url import auth_headers, join, relayable_headers
from gateway.context import GatewayContext
from gateway.errors import GatewayError
from gateway.protocols.estimate import estimate_tokens, tokens_for_bytes
from gateway.protocols.usage import extract_usage
from gateway.v1.call import GatewayCall
from gateway.v1.multipart import MultipartError, Part, build, field, parse
from gateway.v1.outcome import ClientLeft, Outcome, Served, StreamFailed, UpstreamFailed
from gateway.v1.request_io import read_body, write_json_bytes
from gateway.v1.tasks.images import store_image_task, task_answer

MAX_ANSWER = 64 << 20
TRANSCRIPTION_FILE_LIMIT = 25 << 20
ONE_MILLION = 1_000_000
OPENAI_TYPES = ("compat", "responses")


@dataclass(frozen=True)
class MediaRoute:
    path: str
    default_model: str | None
    multipart: bool = False
    #: stream the upstream body through as it arrives (audio)
    stream_bytes: bool = False
    #: (request fields, answer bytes, upload bytes) -> estimated usage
    estimate: Callable[[dict[str, Any], bytes, int], Usage] | None = None


def _text_of(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return " ".join(_text_of(item) for item in value)
    if isinstance(value, dict):
        return " ".join(_text_of(v) for k, v in value.items() if k in ("text", "input"))
    return ""


def _moderation(fields: dict[str, Any], answer: bytes, _upload: int) -> Usage:
    return Usage(input=estimate_tokens(_text_of(fields.get("input"))),
                 output=estimate_tokens(answer), estimated=True)


def _speech(fields: dict[str, Any], answer: bytes, _upload: int) -> Usage:
    text_tokens = estimate_tokens(_text_of(fields.get("input")))
    audio_out = max(1, len(answer) // 1000)
    return Usage(input=text_tokens, audio_in=0, output=audio_out, audio_out=audio_out,
                 estimated=True)


def _transcription(fields: dict[str, Any], answer: bytes, upload: int) -> Usage:
    audio = tokens_for_bytes(upload)
    prompt = estimate_tokens(_text_of(fields.get("prompt")))
    return Usage(input=audio + prompt, audio_in=audio, output=estimate_tokens(answer),
                 estimated=True)


def _images(fields: dict[str, Any], answer: bytes, _upload: int) -> Usage:
    count = 1
    try:
        data = orjson.loads(answer).get("data")
        if isinstance(data, list) and data:
            count = len(data)
    except (orjson.JSONDecodeError, AttributeError):
        for name in ("n", "num_images", "count"):
            if isinstance(fields.get(name), int) and fields[name] > 0:
                count = fields[name]
                break
    prompt = _text_of(fields.get("prompt")) + " " + _text_of(fields.get("negative_prompt"))
    images = count * ONE_MILLION
    return Usage(input=estimate_tokens(prompt), output=images, image_out=images,
                 estimated=True)


ROUTES = {
    "moderations": MediaRoute("/v1/moderations", "omni-moderation-latest",
                              estimate=_moderation),
    "speech": MediaRoute("/v1/audio/speech", "gpt-4o-mini-tts", stream_bytes=True,
                         estimate=_speech),
    "transcriptions": MediaRoute("/v1/audio/transcriptions", "whisper-1", multipart=True,
                                 estimate=_transcription),
    "images": MediaRoute("/v1/images/generations", None, estimate=_images),
    "image_edits": MediaRoute("/v1/images/edits", None, multipart=True, estimate=_images),
}


class MediaCall(GatewayCall):
    def __init__(self, ctx: GatewayContext, request: Any, route: MediaRoute) -> None:
        super().__init__(ctx, request, route.path)
        self.route = route
        self.fields: dict[str, Any] = {}
        self.upload_bytes = 0
        #: the upstream answered with a task: charged in the task's own transaction
        self.task_stored = False

    async def _serve(self) -> Outcome:
        caller = await self._caller()
        raw = read_body(self.request, self.ctx.max_body_bytes)
        parts, model = self._read(raw)
        model = normalize_model_name(model)
        self._check_model(caller, model)
        attempts = (await self._plan(caller, model))[:1]
        priced = attempts[0]
        channel = priced.candidate.channel
        channel_type = normalise_channel_type(channel.type)
        if channel_type not in OPENAI_TYPES:
            raise errors.unsupported_upstream(
                f"unsupported upstream protocol: {channel_type}")
        self.input_tokens = self._estimate(b"").input
        await self._admit(caller, attempts, self.input_tokens, None)
        self.log.priced = priced
        upstream_model = priced.candidate.upstream_model
        if parts is not None:
            parts = [Part(p.name, upstream_model.encode(), None, None) if (
                p.name == "model" and not p.is_file) else p for p in parts]
            content_type, body = build(parts)
        else:
            body = orjson.dumps({**self.fields, "model": upstream_model})
            content_type = b"application/json"
        url = join(channel.base_url, self.route.path)
        headers = {b"content-type": [content_type], b"user-agent": [b"Lockgate"]}
        headers.update(auth_headers(channel_type, channel.api_key))
        response = await self._open_upstream(channel, url, headers, body,
                                             self.ctx.timeouts.first_byte)
        if response.code >= 400:
            return await self._refusal(channel, response)  # final: one target only
        self.ctx.health.record_success(channel.id)
        if self.route.stream_bytes:
            return await self._stream(response)
        return await self._whole(response)

    def _read(self, raw: bytes) -> tuple[list[Part] | None, str]:
        if self.route.multipart:
            try:
                parts = parse(self.request.getHeader(b"content-type") or b"", raw)
            except MultipartError as exc:
                raise errors.invalid_request(str(exc)) from None
            files = [p for p in parts if p.is_file]
            if self.route.path.endswith("/transcriptions") and not any(
                    p.name == "file" for p in files):
                raise errors.invalid_request("file is required", "file")
            if self.route.path.endswith("/edits") and not any(
                    p.name in ("image", "image[]") for p in files):
                raise errors.invalid_request("image is required", "image")
            self.upload_bytes = sum(len(p.data) for p in files)
            if self.route.path.endswith("/transcriptions") and (
                    self.upload_bytes > TRANSCRIPTION_FILE_LIMIT):
                raise errors.body_too_large(TRANSCRIPTION_FILE_LIMIT)
            self.fields = {p.name: p.data.decode("utf-8", "replace") for p in parts
                           if not p.is_file}
            model = field(parts, "model") or self.route.default_model
            if not model:
                raise errors.model_not_specified()
            return parts, model
        try:
            body = orjson.loads(raw)
        except orjson.JSONDecodeError:
            raise errors.invalid_body() from None
        if not isinstance(body, dict):
            raise errors.invalid_body()
        self.fields = body
        model = body.get("model") or body.get("model_name") or self.route.default_model
        if not isinstance(model, str) or not model.strip():
            raise errors.model_not_specified()
        return None, model

    def _estimate(self, answer: bytes) -> Usage:
        assert self.route.estimate is not None
        return self.route.estimate(self.fields, answer, self.upload_bytes)

    async def _whole(self, response: UpstreamResponse) -> Outcome:
        try:
            answer = await response.read_all(MAX_ANSWER,
                                             idle_timeout=self.ctx.timeouts.stream_idle)
        except (UpstreamError, BodyTooLarge):
            return UpstreamFailed(errors.upstream_read_failed())
        measured = None
        with contextlib.suppress(orjson.JSONDecodeError, AttributeError):
            parsed = orjson.loads(answer)
            if isinstance(parsed, dict):
                measured = extract_usage("openai", parsed)
        usage = measured or self._estimate(answer)
        self.log.first_byte_at = self.ctx.clock.seconds()
        task = task_answer(answer) if self.route.path == "/v1/images/generations" else None
        if task is not None:
            created = await store_image_task(self, self.fields, task, usage)
            self.task_stored = True
            write_json_bytes(self.request, 200, created)
            return Served(usage)
        write_json_bytes(self.request, response.code, answer,
                         [h for h in relayable_headers(response.headers)])
        return Served(usage)

    def _settle(self, outcome: Outcome) -> None:
        if not self.task_stored:  # a stored task was charged in its own transaction
            super()._settle(outcome)

    async def _stream(self, response: UpstreamResponse) -> Outcome:
        writer = StreamWriter(self.request, self.ctx.clock, heartbeat_interval=None)
        self.writer = writer
        writer.set_response(response.code, relayable_headers(response.headers))
        size = 0

        def count(chunk: bytes) -> None:
            nonlocal size
            size += len(chunk)

        relay = BytesRelay(writer, response, count)
        response.deliver(relay, idle_timeout=self.ctx.timeouts.stream_idle)
        failure: Exception | None = None
        metrics = self.ctx.metrics
        family = metrics.stream_opened(self.request.path) if metrics is not None else ""
        try:
            await relay.done
        except Exception as exc:
            failure = exc
        finally:
            if metrics is not None:
                metrics.stream_closed(family)
        self.log.first_byte_at = writer.first_byte_at
        usage = self._estimate(b"") if size == 0 else Usage(
            input=self.input_tokens, output=max(1, size // 1000),
            audio_out=max(1, size // 1000), estimated=True)
        if failure is None:
            writer.finish()
            return Served(usage)
        if not writer.started and not writer.closed_by_client:
            self.writer = None
            return UpstreamFailed(GatewayError(502, "Upstream request failed",
                                               type="upstream_error"))
        writer.finish()
        if writer.closed_by_client:
            return ClientLeft(usage, delivered=writer.started)
        return StreamFailed(usage, type(failure).__name__)
