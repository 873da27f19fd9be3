"""The /v1 text routes (chat completions, completions, responses): one function, top to bottom.

    authenticate -> global limit -> parse + validate -> resolve model -> candidates
    -> reserve (402) -> per-user-channel limit -> attempts (failover before the first byte)
    -> translate -> relay (stream or body) -> meter -> settle (finally, exactly once)

Settlement is queued, never awaited on the hot path: the reservation already holds the
worst-case cost, so the answer can go out at once and the group commit writes the ledger within
a few milliseconds (DESIGN.md, Money).  Each attempt ends in one ``Outcome``
(``gateway.v1.outcome``): its verdict decides whether the next candidate is tried, and
``GatewayCall.run`` answers once and settles it exactly once.
"""

from __future__ import annotations

from typing import Any

from gateway import errors, routing
from gateway.catalog.snapshot import normalize_model_name
from gateway.channels.channel_types import normalise_channel_type
from gateway.channels.http import (
    BodyTooLarge,
    CutByShutdown,
    UpstreamAborted,
    UpstreamError,
    UpstreamResponse,
    UpstreamTimeout,
)
from gateway.channels.relay import EventRelay, StreamWriter
from gateway.channels.upstream_url import join, json_headers, relayable_headers
from gateway.context import GatewayContext
from gateway.errors import GatewayError
from gateway.metering import Priced, fallback_usage
from gateway.protocols.errors import ProtocolError, UpstreamFormatError
from gateway.protocols.estimate import estimate_tokens
from gateway.protocols.request import ClientRequest, parse_client_request
from gateway.protocols.sse import PING
from gateway.protocols.translate import Translator, make_translator
from gateway.v1.call import ClientLeftError, GatewayCall
from gateway.v1.meta_resolution import route_meta
from gateway.v1.outcome import (
    RETRYABLE,
    ClientLeft,
    Cut,
    Outcome,
    Refused,
    Served,
    StreamEndedEarly,
    StreamFailed,
    UpstreamFailed,
    attempt_failed,
)
from gateway.v1.request_io import read_body, release_body, write_json_bytes

#: largest non-streamed upstream answer we buffer
MAX_UPSTREAM_BODY = 64 << 20
STREAM_HEADERS = [(b"content-type", b"text/event-stream; charset=utf-8"),
                  (b"cache-control", b"no-cache"), (b"x-accel-buffering", b"no")]


class TextCall(GatewayCall):
    #: response headers of a stream, and the bytes written when it idles (subclasses may
    #: change both: a Google client cannot read SSE comments)
    stream_headers = STREAM_HEADERS
    heartbeat = PING

    def __init__(self, ctx: GatewayContext, request: Any, protocol_family: str,
                 endpoint: str) -> None:
        super().__init__(ctx, request, endpoint)
        self.protocol_family = protocol_family

    async def _serve(self) -> Outcome:
        caller = await self._caller()
        client_request = self._parse(read_body(self.request, self.ctx.max_body_bytes))
        release_body(self.request)
        self.log.is_stream = client_request.stream
        self.input_tokens = client_request.estimated_input_tokens
        model = normalize_model_name(client_request.model)
        self._check_model(caller, model)
        meta = self.ctx.catalog.snapshot.meta_models.get(model)
        routed = None if meta is None else await route_meta(self, caller, meta, client_request)
        if routed is not None:
            client_request = routed.apply(self)
            if routed.deliver is not None:  # a hedged parallel's winner
                return await routed.deliver()
        attempts = await self._plan(caller, routed.model or model if routed else model)
        if routed is not None:
            attempts = routed.priced(attempts)
        await self._admit(caller, attempts, client_request.estimated_input_tokens,
                          client_request.max_output_tokens,
                          routed.reserve_nanos if routed else None)
        return await self._attempt_all(client_request, attempts)

    def _parse(self, body: bytes) -> ClientRequest:
        try:
            return parse_client_request(self.protocol_family, body)
        except ProtocolError as exc:
            raise GatewayError(exc.status, exc.message, type=exc.type, param=exc.param) from None

    async def _attempt_all(self, client_request: ClientRequest,
                           attempts: list[Priced]) -> Outcome:
        """Attempts in order while their outcome is retryable (failover before the first
        byte); the first other outcome, or the last retryable one, is the call's."""
        deadline = routing.Deadline(self.ctx.clock, self.ctx.timeouts.attempts_total)
        # no error made in advance: an open stream's frame would keep it (issue 22)
        outcome: Outcome | None = None
        metrics = self.ctx.metrics
        failed_channel: int | None = None
        for priced in attempts:
            if deadline.expired() or self.client_gone or self.cut_by_shutdown:
                break
            if failed_channel is not None and metrics is not None:
                metrics.failover(failed_channel)
            self.log.priced = priced
            outcome = await self._attempt(client_request, priced, deadline)
            if outcome.verdict != RETRYABLE:
                return outcome
            failed_channel = priced.candidate.channel.id
        if self.cut_by_shutdown:
            return Refused(errors.shutting_down())
        return outcome if outcome is not None else Refused(errors.no_channel())

    async def _attempt(self, client_request: ClientRequest, priced: Priced,
                       deadline: routing.Deadline) -> Outcome:
        """One upstream request and its relay (one attempt), counted when it ends.  One
        coroutine from the request to the answer: a call's common path (one attempt, a JSON
        answer read whole) resumes this frame once, for the upstream's answer."""
        channel = priced.candidate.channel
        channel_type = normalise_channel_type(channel.type)
        try:
            translator = self._translator(channel_type, client_request,
                                          priced.candidate.upstream_model)
        except ProtocolError as exc:
            # this channel's type cannot take the request: another one may (nothing sent)
            return Refused(GatewayError(exc.status, exc.message, type=exc.type),
                           retryable=True)
        url = join(channel.base_url, translator.upstream_path().decode())
        ctx = self.ctx
        try:
            try:
                response = await self._open_upstream(
                    channel, url, json_headers(channel_type, channel.api_key,
                                               self._forwarded_headers(channel_type)),
                    translator.upstream_body(), deadline.timeout(ctx.timeouts.first_byte))
            except ClientLeftError:
                outcome: Outcome = ClientLeft()
            except GatewayError as failed:
                outcome = UpstreamFailed(failed)
            else:
                if response.code >= 400:
                    outcome = await self._refusal(channel, response)
                else:
                    ctx.health.record_success(channel.id)
                    if client_request.stream:
                        outcome = await self._relay_stream(translator, response)
                    else:
                        outcome = await self._relay_body(translator, response)
        except BaseException:
            self._attempt_ended(failed=True)
            raise
        self._attempt_ended(failed=attempt_failed(outcome))
        return outcome

    def _translator(self, channel_type: str, client_request: ClientRequest,
                    upstream_model: str) -> Translator:
        return make_translator(self.protocol_family, channel_type, client_request,
                               upstream_model)

    def _forwarded_headers(self, channel_type: str) -> dict[bytes, list[bytes]] | None:
        """Client headers a same-protocol upstream should see (none by default, §6.1)."""
        return None

    async def _relay_body(self, translator: Translator,
                          response: UpstreamResponse) -> Outcome:
        try:
            collected = response.collect(MAX_UPSTREAM_BODY,
                                         idle_timeout=self.ctx.timeouts.stream_idle)
            # a JSON answer read whole with its head is here already: no Deferred to await
            body = collected if isinstance(collected, bytes) else await collected
            client_body = translator.response(response.code, body)
        except (UpstreamError, BodyTooLarge, UpstreamFormatError):
            # retryable while the client waits; final when it left (the loop stops)
            return UpstreamFailed(errors.upstream_read_failed())
        usage = translator.usage
        if usage is None:
            usage = fallback_usage(self._input_estimate(), estimate_tokens(client_body))
        self.log.first_byte_at = self.ctx.clock.seconds()
        if not self.client_gone:  # gone: the upstream produced it all the same, so it bills
            headers = [(b"content-type", b"application/json")]
            if self.extra_headers:
                headers += [(k.encode(), v.encode()) for k, v in self.extra_headers.items()]
            write_json_bytes(self.request, response.code, client_body, headers)
        return Served(usage, response.code)

    async def _relay_stream(self, translator: Translator,
                            response: UpstreamResponse) -> Outcome:
        ctx = self.ctx
        writer = StreamWriter(self.request, ctx.clock,
                              heartbeat_interval=ctx.timeouts.heartbeat, heartbeat=self.heartbeat)
        self.writer = writer
        writer.set_response(200, self.stream_headers
                            + [(k, v) for k, v in self.extra_headers.items()]
                            + [h for h in relayable_headers(response.headers)
                               if h[0].lower() not in (b"content-type", b"cache-control")])

        def on_event(event: Any) -> bytes | None:
            frames = translator.stream_event(event)
            return b"".join(frames) if frames else None

        relay = EventRelay(writer, response, on_event)
        response.deliver(relay, idle_timeout=ctx.timeouts.stream_idle)
        failure: Exception | None = None
        metrics = ctx.metrics
        family = metrics.stream_opened(self.request.path) if metrics is not None else ""
        try:
            await relay.done
        except Exception as exc:
            failure = exc
        finally:
            if metrics is not None:
                metrics.stream_closed(family)
        self.log.first_byte_at = writer.first_byte_at
        usage = translator.usage
        if usage is None:
            usage = fallback_usage(self._input_estimate(), translator.relayed_text_tokens())
        if failure is None and translator.completed:
            for frame in translator.finish():
                writer.write(frame)
            writer.finish()
            return Served(usage)
        if writer.closed_by_client or isinstance(failure, UpstreamAborted):
            return ClientLeft(usage, delivered=writer.started)
        if not writer.started:
            # nothing reached the client: the next candidate may serve (nothing billed)
            self.writer = None
            if isinstance(failure, UpstreamTimeout):
                return UpstreamFailed(GatewayError(504, "Upstream timed out",
                                                  type="upstream_error"))
            return UpstreamFailed(errors.upstream_failed())
        outcome: Outcome
        if failure is None:
            # the upstream closed its stream without its end marker (gateway.v1.outcome)
            outcome = StreamEndedEarly(usage)
            frames = translator.error_frames("Upstream stream ended before completion",
                                             "upstream_error", "upstream_error")
        elif isinstance(failure, CutByShutdown):
            outcome = Cut(usage)
            frames = translator.error_frames("The server is shutting down",
                                             "service_unavailable", "shutting_down")
        else:
            outcome = StreamFailed(usage, type(failure).__name__)
            frames = translator.error_frames("Upstream stream failed", "upstream_error",
                                             "upstream_error")
        for frame in frames:
            writer.write(frame)
        writer.finish()
        return outcome

    def _input_estimate(self) -> int:
        return max(1, self.input_tokens)
