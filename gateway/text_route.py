"""The /v1 text routes (chat completions, completions, responses): one function, top to bottom.

    authenticate -> global limit -> parse + validate -> resolve model -> candidates
    -> reserve (402) -> per-user-channel limit -> attempts (failover before the first byte)
    -> translate -> relay (stream or body) -> meter -> settle (finally, exactly once)

Settlement is queued, never awaited on the hot path: the reservation already holds the
worst-case cost, so the answer can go out at once and the group commit writes the ledger within
a few milliseconds (DESIGN.md, Money).  Every exit -- success, upstream error, client
disconnect, timeout -- goes through ``finally`` and settles exactly once.
"""

from __future__ import annotations

import contextlib
import secrets
from typing import Any

from twisted.internet.defer import Deferred
from twisted.logger import Logger
from twisted.python.failure import Failure

from gateway import errors, routing
from gateway.auth import Caller, authenticate
from gateway.billing.wallet import PaymentRequired, Reservation
from gateway.catalog.snapshot import normalize_model_name
from gateway.channel_types import normalise_channel_type
from gateway.channels.http import (
    BodyTooLarge,
    UpstreamAborted,
    UpstreamError,
    UpstreamResponse,
    UpstreamTimeout,
)
from gateway.context import GatewayContext
from gateway.errors import GatewayError
from gateway.limits import UserChannelLimit, global_identity
from gateway.metering import Priced, RequestLog, fallback_usage, price, reserve_for
from gateway.protocols.errors import ProtocolError, UpstreamFormatError
from gateway.protocols.estimate import estimate_tokens
from gateway.protocols.request import ClientRequest, parse_client_request
from gateway.protocols.translate import Translator, make_translator
from gateway.relay import EventRelay, StreamWriter
from gateway.request_io import read_body, write_error, write_json_bytes
from gateway.upstream_url import join, json_headers, relayable_headers

log = Logger()
FAMILY = errors.OPENAI
#: largest non-streamed upstream answer we buffer
MAX_UPSTREAM_BODY = 64 << 20
STREAM_HEADERS = [(b"content-type", b"text/event-stream; charset=utf-8"),
                  (b"cache-control", b"no-cache"), (b"x-accel-buffering", b"no")]


class _Failover(Exception):
    """This attempt failed before anything reached the client; try the next candidate."""

    def __init__(self, error: GatewayError) -> None:
        super().__init__(error.message)
        self.error = error


class TextCall:
    """State of one request; ``run`` is the whole path."""

    def __init__(self, ctx: GatewayContext, request: Any, family: str, endpoint: str) -> None:
        self.ctx = ctx
        self.request = request
        self.family = family
        self.log = RequestLog(
            request_id=secrets.token_hex(12), user_id=0, api_key_id=None, endpoint=endpoint,
            started=ctx.clock.seconds(), ip="",
            user_agent=(request.getHeader(b"user-agent") or b"").decode("latin-1"))
        self.reservation: Reservation | None = None
        self.writer: StreamWriter | None = None
        self.extra_headers: dict[str, str] = {}
        self.client_gone = False
        self._pending: Deferred[Any] | None = None
        self._response: UpstreamResponse | None = None
        self.resolved = False
        self.input_tokens = 0
        request.notifyFinish().addErrback(self._disconnected)

    def _disconnected(self, _reason: Failure) -> None:
        self.client_gone = True
        if self._pending is not None and not self._pending.called:
            self._pending.cancel()
        if self._response is not None:
            self._response.abort()

    async def run(self) -> None:
        try:
            await self._serve()
        except GatewayError as error:
            self.log.status = error.status
            self.log.error_message = error.message
            self._answer_error(error)
        except Exception:
            log.failure("unhandled error in text route")
            self.log.status = 500
            self.log.error_message = "internal error"
            self._answer_error(errors.internal())
        finally:
            self._settle()

    # --- the path -------------------------------------------------------------------------

    async def _serve(self) -> None:
        ctx, request = self.ctx, self.request
        if not ctx.settings.flag("token_api_enabled"):
            raise errors.gateway_disabled()
        caller = await authenticate(ctx, request)
        self.log.user_id, self.log.api_key_id, self.log.ip = (
            caller.user.id, caller.key_id, caller.ip)
        verdict = await ctx.limiter.check_global(
            global_identity(caller.key_id, caller.user.id, caller.ip))
        if verdict.error is not None:
            raise verdict.error
        client_request = self._parse(read_body(request, ctx.max_body_bytes))
        self.log.is_stream = client_request.stream
        self.input_tokens = client_request.estimated_input_tokens
        model = normalize_model_name(client_request.model)
        self.log.model_name = model
        if caller.key is not None and not caller.key.allows_model(model):
            raise errors.model_not_allowed()
        attempts = await self._plan(caller, model)
        self.resolved = True
        await self._admit(caller, client_request, attempts)
        await self._attempt_all(client_request, attempts)

    def _parse(self, body: bytes) -> ClientRequest:
        try:
            return parse_client_request(self.family, body)
        except ProtocolError as exc:
            raise GatewayError(exc.status, exc.message, type=exc.type, param=exc.param) from None

    async def _plan(self, caller: Caller, model: str) -> list[Priced]:
        ctx = self.ctx
        snapshot = ctx.catalog.snapshot
        group_ids = caller.user.active_group_ids(ctx.now())
        key_channels = caller.key.allowed_user_channels if caller.key else ()
        found = snapshot.candidates_for(model, caller.user.id, group_ids, key_channels)
        if not found:
            raise errors.no_channel()
        by_config = {c.config.id: c for c in found}
        plan = await routing.plan(
            [routing.Candidate(
                config_id=c.config.id, channel_id=c.channel.id,
                user_channel_id=c.user_channel.id, priority=c.channel.priority,
                weight=c.channel.weight, channel_type=c.channel.type,
                base_url=c.channel.base_url, upstream_model=c.upstream_model) for c in found],
            {c.user_channel.id: routing.UserChannelInfo(c.user_channel.id,
                                                        c.user_channel.routing_algorithm)
             for c in found},
            model=model, allowed_user_channels=list(key_channels), counter=ctx.state.incr,
            available=ctx.health.is_available)
        mode = ctx.settings.text("group_multiplier_mode")
        return [price(by_config[a.config_id], snapshot, group_ids, mode) for a in plan]

    async def _admit(self, caller: Caller, client_request: ClientRequest,
                     attempts: list[Priced]) -> None:
        ctx = self.ctx
        amount = reserve_for(attempts, client_request.estimated_input_tokens,
                             client_request.max_output_tokens, ctx.default_output_reserve)
        try:
            self.reservation = await ctx.wallets.reserve(
                self.log.request_id, caller.user.id, caller.key_id, amount,
                jwt=caller.key is None)
        except PaymentRequired as exc:
            raise GatewayError(402, str(exc), type="insufficient_quota",
                               code="insufficient_quota") from None
        primary = attempts[0].candidate.user_channel
        verdict = await ctx.limiter.check_user_channel(caller.user.id, UserChannelLimit(
            primary.id, primary.rate_limit_enabled, primary.rate_limit_requests_per_minute,
            primary.rate_limit_burst))
        self.extra_headers.update(verdict.headers)
        if verdict.error is not None:
            raise verdict.error

    async def _attempt_all(self, client_request: ClientRequest, attempts: list[Priced]) -> None:
        deadline = routing.Deadline(self.ctx.clock, self.ctx.timeouts.attempts_total)
        last: GatewayError = errors.no_channel()
        for priced in attempts:
            if deadline.expired() or self.client_gone:
                break
            self.log.priced = priced
            try:
                await self._attempt(client_request, priced, deadline)
                return
            except _Failover as failover:
                last = failover.error
        raise last

    async def _attempt(self, client_request: ClientRequest, priced: Priced,
                       deadline: routing.Deadline) -> None:
        ctx = self.ctx
        channel = priced.candidate.channel
        channel_type = normalise_channel_type(channel.type)
        try:
            translator = make_translator(self.family, channel_type, client_request,
                                         priced.candidate.upstream_model)
        except ProtocolError as exc:
            raise _Failover(GatewayError(exc.status, exc.message, type=exc.type)) from None
        url = join(channel.base_url, translator.upstream_path().decode())
        self._pending = ctx.upstream.request(
            b"POST", url, json_headers(channel_type, channel.api_key),
            translator.upstream_body(),
            first_byte_timeout=deadline.timeout(ctx.timeouts.first_byte))
        try:
            response = await self._pending
        except UpstreamError as exc:
            ctx.health.record_failure(channel.id, str(exc), None)
            raise _Failover(errors.upstream_failed()) from None
        finally:
            self._pending = None
        self._response = response
        if response.code >= 400:
            await self._upstream_refused(response, channel.id)
        ctx.health.record_success(channel.id)
        if client_request.stream:
            await self._relay_stream(translator, response)
        else:
            await self._relay_body(translator, response)

    async def _upstream_refused(self, response: UpstreamResponse, channel_id: int) -> None:
        with contextlib.suppress(UpstreamError):
            await response.read_all(1 << 20, idle_timeout=30)
        status = response.code
        self.ctx.health.record_failure(channel_id, f"HTTP {status}", status)
        error = errors.from_upstream(status, _header(response, b"retry-after"))
        if routing.retryable(routing.Outcome(routing.STATUS, status=status)):
            raise _Failover(error)
        raise error

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
                              heartbeat_interval=ctx.timeouts.heartbeat)
        self.writer = writer
        writer.set_response(200, STREAM_HEADERS + [(k, v) for k, v in self.extra_headers.items()]
                            + [h for h in relayable_headers(response.headers)
                               if h[0].lower() not in (b"content-type", b"cache-control")])

        def on_event(event: Any) -> bytes | None:
            frames = translator.stream_event(event)
            return b"".join(frames) if frames else None

        relay = EventRelay(writer, response, on_event)
        response.deliver(relay, idle_timeout=ctx.timeouts.stream_idle)
        failure: Exception | None = None
        try:
            await relay.done
        except Exception as exc:
            failure = exc
        self.log.first_byte_at = writer.first_byte_at
        self.log.delivered = writer.started or (failure is None)
        usage = translator.usage
        if usage is None:
            usage = fallback_usage(self._input_estimate(), translator.relayed_text_tokens())
        self.log.usage = usage
        if failure is None:
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
        self.log.status = 502
        self.log.error_message = f"stream failed: {type(failure).__name__}"
        for frame in translator.error_frames("Upstream stream failed", "upstream_error",
                                             "upstream_error"):
            writer.write(frame)
        writer.finish()

    def _input_estimate(self) -> int:
        return max(1, self.input_tokens)

    # --- exits ----------------------------------------------------------------------------

    def _answer_error(self, error: GatewayError) -> None:
        if self.client_gone:
            return
        writer = self.writer
        if writer is not None and writer.started:
            writer.finish()
            return
        for name, value in self.extra_headers.items():
            error.headers.setdefault(name, value)
        write_error(self.request, FAMILY, error)

    def _settle(self) -> None:
        ctx = self.ctx
        if self.log.user_id == 0:
            return  # never authenticated: nothing to bill, nothing to log against a user
        if not self.resolved and self.reservation is None:
            return  # refused before a target was resolved: not logged (contract §2)
        record = self.log.record(ctx.clock.seconds(), ctx.now())
        d = ctx.settler.settle(self.reservation, record)
        d.addErrback(lambda f: log.failure("settlement failed for {rid}", f,
                                           rid=self.log.request_id))


def _header(response: UpstreamResponse, name: bytes) -> str | None:
    value = response.header(name)
    return value.decode("latin-1") if value else None
