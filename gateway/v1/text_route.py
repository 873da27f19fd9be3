"""The /v1 text routes (chat completions, completions, responses): one function, top to bottom.

    authenticate -> global limit -> parse + validate -> resolve model -> candidates
    -> reserve (402) -> per-user-channel limit -> attempts (failover before the first byte)
    -> translate -> relay (stream or body) -> meter -> settle (finally, exactly once)

Settlement is queued, never awaited on the hot path: the reservation already holds the
worst-case cost, so the answer can go out at once and the group commit writes the ledger within
a few milliseconds (DESIGN.md, Money).  Every exit goes through ``GatewayCall.run``, which
answers once and settles exactly once.
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
from gateway.v1.call import ClientLeft, GatewayCall, _Failover
from gateway.v1.meta_resolution import route_meta
from gateway.v1.request_io import read_body, write_json_bytes

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

    async def _serve(self) -> None:
        caller = await self._caller()
        client_request = self._parse(read_body(self.request, self.ctx.max_body_bytes))
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
        await self._attempt_all(client_request, attempts)

    def _parse(self, body: bytes) -> ClientRequest:
        try:
            return parse_client_request(self.protocol_family, body)
        except ProtocolError as exc:
            raise GatewayError(exc.status, exc.message, type=exc.type, param=exc.param) from None

    async def _attempt_all(self, client_request: ClientRequest, attempts: list[Priced]) -> None:
        deadline = routing.Deadline(self.ctx.clock, self.ctx.timeouts.attempts_total)
        last: GatewayError = errors.no_channel()
        metrics = self.ctx.metrics
        failed_channel: int | None = None
        for priced in attempts:
            if deadline.expired() or self.client_gone or self.cut_by_shutdown:
                break
            if failed_channel is not None and metrics is not None:
                metrics.failover(failed_channel)
            self.log.priced = priced
            try:
                await self._attempt(client_request, priced, deadline)
                return
            except _Failover as failover:
                last = failover.error
                failed_channel = priced.candidate.channel.id
        if self.cut_by_shutdown:
            raise errors.shutting_down()
        raise last

    async def _attempt(self, client_request: ClientRequest, priced: Priced,
                       deadline: routing.Deadline) -> None:
        channel = priced.candidate.channel
        channel_type = normalise_channel_type(channel.type)
        try:
            translator = self._translator(channel_type, client_request,
                                          priced.candidate.upstream_model)
        except ProtocolError as exc:
            raise _Failover(GatewayError(exc.status, exc.message, type=exc.type)) from None
        url = join(channel.base_url, translator.upstream_path().decode())
        try:
            await self._exchange(client_request, translator, url, channel_type, priced,
                                 deadline)
        except BaseException:
            self._attempt_ended(failed=True)
            raise
        self._attempt_ended(failed=False)

    async def _exchange(self, client_request: ClientRequest, translator: Translator, url: str,
                        channel_type: str, priced: Priced, deadline: routing.Deadline) -> None:
        """One upstream request and its relay (one attempt)."""
        ctx = self.ctx
        channel = priced.candidate.channel
        try:
            response = await self._open_upstream(
                channel, url, json_headers(channel_type, channel.api_key,
                                           self._forwarded_headers(channel_type)),
                translator.upstream_body(), deadline.timeout(ctx.timeouts.first_byte))
        except ClientLeft:
            raise
        except GatewayError as failed:
            raise _Failover(failed) from None
        if response.code >= 400:
            refusal = await self._refusal(channel, response)
            if routing.retryable(routing.Outcome(routing.STATUS, status=response.code)):
                raise _Failover(refusal)
            raise refusal
        ctx.health.record_success(channel.id)
        if client_request.stream:
            await self._relay_stream(translator, response)
        else:
            await self._relay_body(translator, response)

    def _translator(self, channel_type: str, client_request: ClientRequest,
                    upstream_model: str) -> Translator:
        return make_translator(self.protocol_family, channel_type, client_request,
                               upstream_model)

    def _forwarded_headers(self, channel_type: str) -> dict[bytes, list[bytes]] | None:
        """Client headers a same-protocol upstream should see (none by default, §6.1)."""
        return None

    async def _relay_body(self, translator: Translator, response: UpstreamResponse) -> None:
        try:
            body = await response.read_all(MAX_UPSTREAM_BODY,
                                           idle_timeout=self.ctx.timeouts.stream_idle)
            client_body = translator.response(response.code, body)
        except (UpstreamError, BodyTooLarge, UpstreamFormatError):
            if self.client_gone:
                raise errors.upstream_read_failed() from None
            raise _Failover(errors.upstream_read_failed()) from None
        usage = translator.usage
        if usage is None:
            usage = fallback_usage(self._input_estimate(), estimate_tokens(client_body))
        self.log.usage = usage
        self.log.first_byte_at = self.ctx.clock.seconds()
        if self.client_gone:
            self.log.delivered = True  # the upstream produced it; bill what it produced
            return
        self.log.delivered = True
        headers = [(b"content-type", b"application/json")]
        write_json_bytes(self.request, response.code, client_body,
                         headers + [(k.encode(), v.encode())
                                    for k, v in self.extra_headers.items()])

    async def _relay_stream(self, translator: Translator, response: UpstreamResponse) -> None:
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
        self.log.delivered = writer.started or (failure is None)
        usage = translator.usage
        if usage is None:
            usage = fallback_usage(self._input_estimate(), translator.relayed_text_tokens())
        self.log.usage = usage
        if failure is None:
            if not translator.completed:
                # the upstream ended without its end marker (e.g. after an error event)
                self.log.status = 502
                self.log.error_message = "upstream stream ended before completion"
            for frame in translator.finish():
                writer.write(frame)
            writer.finish()
            return
        if writer.closed_by_client or isinstance(failure, UpstreamAborted):
            self.log.status = 499
            self.log.error_message = "client disconnected"
            return
        if not writer.started:
            error = (errors.upstream_failed() if not isinstance(failure, UpstreamTimeout)
                     else GatewayError(504, "Upstream timed out", type="upstream_error"))
            self.writer = None
            raise _Failover(error)
        if isinstance(failure, CutByShutdown):
            self.log.status = 503
            self.log.error_message = "stream cut: the server is shutting down"
            frames = translator.error_frames("The server is shutting down",
                                             "service_unavailable", "shutting_down")
        else:
            self.log.status = 502
            self.log.error_message = f"stream failed: {type(failure).__name__}"
            frames = translator.error_frames("Upstream stream failed", "upstream_error",
                                             "upstream_error")
        for frame in frames:
            writer.write(frame)
        writer.finish()

    def _input_estimate(self) -> int:
        return max(1, self.input_tokens)
