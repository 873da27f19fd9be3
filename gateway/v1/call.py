"""What every metered /v1 call shares: its state, the admission steps and its exits.

``GatewayCall.run`` wraps a subclass's ``_serve`` so that every exit -- success, refusal, upstream
failure, client disconnect, crash -- answers once in the client's error shape and settles
exactly once (DESIGN.md: "settle (finally, exactly once, not cancellable)").  ``_serve``
returns the call's ``Outcome`` (``gateway.v1.outcome``); a refusal raised on the way becomes
one; ``run`` turns it into the answer's error, the attempt's metrics and the settlement.
"""

from __future__ import annotations

import contextlib
import random
import weakref
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from opentelemetry.trace import Span
from twisted.internet.defer import CancelledError, Deferred
from twisted.logger import Logger
from twisted.python.failure import Failure

from gateway import errors, routing
from gateway.auth import Caller, authenticate
from gateway.billing.usage import Usage
from gateway.catalog.snapshot import Candidate, CatalogSnapshot, UserChannel
from gateway.channels.http import (
    BodyTooLarge,
    CutByShutdown,
    UpstreamBlocked,
    UpstreamError,
    UpstreamResponse,
)
from gateway.channels.net_policy import UnsafeUrl, UrlPolicy, check_url
from gateway.channels.relay import StreamWriter
from gateway.channels.upstream_failure import report_status, report_transport
from gateway.context import GatewayContext
from gateway.errors import GatewayError
from gateway.ledger.settlement import SettlementRecord
from gateway.ledger.wallet import PaymentRequired, Reservation, WalletUnavailable
from gateway.limits import UserChannelLimit, Verdict, global_identity
from gateway.metering import Priced, RequestLog, price, reserve_for
from gateway.observability.log_context import REQUEST_ID
from gateway.observability.tracing import Tracing, client_trace_headers
from gateway.store.gateway_users import GatewayUser
from gateway.v1.attempt_record import end_attempt
from gateway.v1.outcome import (
    ClientLeft,
    Outcome,
    Refused,
    attempt_failed,
    internal_error,
    refusal_of,
    settlement_record,
)
from gateway.v1.request_io import write_error

log = Logger()

#: the shared state (Redis) could not admit the call: try again shortly (operations contract §5)
RETRY_SOON = {"Retry-After": "1"}


def new_request_id() -> str:
    """96 random bits in hex: unique across nodes and restarts (it keys the ledger and the
    usage log), and far cheaper per request than the CSPRNG -- it is no secret."""
    return f"{random.getrandbits(96):024x}"


class ClientLeftError(GatewayError):
    """The client hung up while its upstream request was pending: our own cancel ended the
    attempt, so it is nobody's failure (the ``ClientLeft`` outcome: 499, nothing billed)."""

    def __init__(self) -> None:
        super().__init__(499, "client disconnected", type="client_closed_request")


class GatewayCall(ABC):
    """State of one metered request; subclasses implement ``_serve``."""

    family = errors.OPENAI

    def __init__(self, ctx: GatewayContext, request: Any, endpoint: str) -> None:
        self.ctx = ctx
        self.request = request
        self.log = RequestLog(
            request_id=new_request_id(), user_id=0, api_key_id=None, endpoint=endpoint,
            started=ctx.clock.seconds(), ip="",
            user_agent=(request.getHeader(b"user-agent") or b"").decode("latin-1"))
        self.reservation: Reservation | None = None
        self.writer: StreamWriter | None = None
        self.extra_headers: dict[str, str] = {}
        #: turns the final record into the client's row (a meta model's fan-out, which
        #: queues its final call's own row first)
        self.split_record: Callable[[SettlementRecord], SettlementRecord] | None = None
        self.client_gone = False
        #: set when a stopping process ends this call at the end of its grace period
        self.cut_by_shutdown = False
        self._pending: Deferred[Any] | None = None
        self._response: UpstreamResponse | None = None
        #: why the current attempt got no response (connect error or timeout), for metrics
        self._attempt_error: Exception | None = None
        #: the channel and clock time of the attempt being metered (None: none is)
        self._attempt_channel: int | None = None
        self._attempt_started = 0.0
        #: the call's span and the current attempt's (traces exported only)
        self._span: Span | None = (ctx.tracing.request_span(request, f"POST {endpoint}")
                                   if ctx.tracing is not None else None)
        self._attempt_span: Span | None = None
        self.input_tokens = 0
        #: usage known before the upstream answers (a task's priced usage): a refusal's row
        #: shows it, at no cost
        self.planned_usage: Usage | None = None
        on_lost = getattr(request, "on_connection_lost", None)
        if on_lost is not None:  # LockgateRequest: no Deferred per call (tap.http_request)
            on_lost(self._disconnected)
        else:
            request.notifyFinish().addErrback(self._disconnected)
        request.setHeader(b"x-request-id", self.log.request_id.encode())

    def _disconnected(self, _reason: Failure) -> None:
        self.client_gone = True
        if self._pending is not None:
            # also when it is ``called`` but paused on the Agent's inner Deferred (waiting for
            # the upstream's headers): cancel() reaches that one, and does nothing to a
            # Deferred that already has its result
            self._pending.cancel()
        if self._response is not None:
            self._response.abort()

    def cut_for_shutdown(self) -> None:
        """End this call now because the process stops (the drain's grace ran out): a stream
        gets one error event and is billed for what was delivered; a call still waiting on
        its upstream answers 503 and costs nothing."""
        self.cut_by_shutdown = True
        if self._pending is not None:
            # also when it is ``called`` but paused on the Agent's inner Deferred: cancel()
            # reaches that one (and does nothing to a Deferred that has its result)
            self._pending.cancel()
        if self._response is not None:
            self._response.abort(CutByShutdown("the server is shutting down"))

    async def run(self) -> None:
        """``_serve``'s outcome, a refusal raised on the way turned into one; an error that
        nobody answered yet is answered here, once; then the attempt's metrics and the one
        settlement, whatever happened (one coroutine around ``_serve``)."""
        self.ctx.calls.opened(self)
        REQUEST_ID.set(self.log.request_id)  # this call's context only (log_context)
        outcome: Outcome | None = None
        try:
            try:
                outcome = await self._serve()
            except ClientLeftError:
                outcome = ClientLeft()
            except GatewayError as error:
                outcome = Refused(error, logged=self.planned_usage)
            except Exception:
                if self.cut_by_shutdown:
                    outcome = Refused(errors.shutting_down())
                else:
                    log.failure("unhandled error in a /v1 call")
                    outcome = internal_error()
            unanswered = refusal_of(outcome)
            if unanswered is not None:
                self._answer_error(unanswered)
        finally:
            # built only when no outcome was reached: ~5 µs a call, and an open stream's
            # frame would keep it (issue 22)
            if outcome is None:
                outcome = internal_error()
            self.ctx.calls.closed(self)
            self._attempt_ended(failed=attempt_failed(outcome))
            if self._span is not None:
                Tracing.end_request(self._span, self.request.code)
            self._settle(outcome)

    # --- the path -------------------------------------------------------------------------

    @abstractmethod
    async def _serve(self) -> Outcome:
        """The route itself: everything between the request and its answer, ending in the
        call's outcome (or raising a refusal)."""

    async def _caller(self) -> Caller:
        """Gateway switch, authentication and the global rate limit (pipeline steps 1-4)."""
        ctx = self.ctx
        if not ctx.settings.flag("token_api_enabled"):
            raise errors.gateway_disabled()
        caller = await authenticate(ctx, self.request)
        self.log.user_id, self.log.api_key_id, self.log.ip = (
            caller.user.id, caller.key_id, caller.ip)
        limiter = ctx.limiter
        identity = global_identity(caller.key_id, caller.user.id, caller.ip)
        verdict = limiter.check_global_now(identity)
        if verdict is None:  # shared windows (Redis)
            verdict = await limiter_verdict(limiter.check_global(identity))
        if verdict.error is not None:
            raise verdict.error
        return caller

    def _check_model(self, caller: Caller, model: str) -> None:
        self.log.model_name = model
        self.request.lockgate_model = model
        if caller.key is not None and not caller.key.allows_model(model):
            raise errors.model_not_allowed()

    async def _plan(self, caller: Caller, model: str) -> list[Priced]:
        ctx = self.ctx
        snapshot = ctx.catalog.snapshot
        group_ids = active_group_ids(ctx, caller.user)
        key_channels = caller.key.allowed_user_channels if caller.key else ()
        inputs = routing_inputs(snapshot, model, caller.user.id, group_ids, key_channels)
        if inputs is None:
            raise errors.no_channel()
        plan = await routing.plan(
            inputs.candidates, inputs.user_channels, model=model,
            allowed_user_channels=inputs.allowed_user_channels, counter=ctx.state.incr,
            available=ctx.health.is_available)
        mode = ctx.settings.text("group_multiplier_mode")
        return [price(inputs.by_config[a.config_id], snapshot, group_ids, mode) for a in plan]

    async def _admit(self, caller: Caller, attempts: list[Priced], input_tokens: int,
                     max_output: int | None, at_least: int | None = None) -> None:
        """Reserve the worst case (402), then the primary user channel's limit (429).
        ``at_least``: a larger worst case the caller knows of (a meta model's program)."""
        ctx = self.ctx
        if self.reservation is None:  # a meta model's fan-out reserved before its sub-calls
            amount = reserve_for(attempts, input_tokens, max_output, ctx.default_output_reserve)
            amount = max(amount, at_least or 0)
            self.reservation = await reserve_or_refuse(ctx, self.log.request_id, caller, amount)
        await self._check_user_channel(caller, attempts[0].candidate.user_channel)

    async def _check_user_channel(self, caller: Caller, primary: UserChannel) -> None:
        """The primary target's per-user-channel limit (429), counted when admitted."""
        limiter, limit = self.ctx.limiter, user_channel_limit(primary)
        verdict = limiter.check_user_channel_now(caller.user.id, limit)
        if verdict is None:  # shared windows (Redis)
            verdict = await limiter_verdict(limiter.check_user_channel(caller.user.id, limit))
        self.extra_headers.update(verdict.headers)
        if verdict.error is not None:
            raise verdict.error

    # --- attempts (metrics, traces) --------------------------------------------------------

    def _attempt_began(self, channel_id: int) -> None:
        """Call right before an upstream request.  ``_attempt_ended`` counts it; ``run``
        does so for a route that does not (its only attempt ends with the call)."""
        self._response = None
        self._attempt_error = None
        ctx = self.ctx
        if ctx.metrics is not None:
            self._attempt_channel = channel_id
            self._attempt_started = ctx.clock.seconds()
        if ctx.tracing is not None and self._span is not None:
            self._attempt_span = ctx.tracing.attempt_span(self._span, channel_id)

    # --- the upstream step: one place for every route family ----------------------------

    async def _open_upstream(self, channel: Any, url: str, headers: dict[bytes, list[bytes]],
                             body: bytes, first_byte_timeout: float) -> UpstreamResponse:
        """One upstream attempt up to the response's head: the SSRF check, the attempt's
        count and span, then ``open_upstream``.  Raises ``ClientLeftError`` when the
        client's hang-up cancelled it, else a ``GatewayError`` (SSRF refusal, no upstream
        answer: reported on the channel); the caller decides whether to fail over."""
        guard_url(self.ctx, url)
        self._attempt_began(channel.id)
        try:
            response = await open_upstream(
                self.ctx, self.log, channel, url, self._traced(headers), body,
                first_byte_timeout, hold=self._hold_pending, left=lambda: self.client_gone)
        except GatewayError as failed:
            if isinstance(failed.__cause__, UpstreamError):
                self._attempt_error = failed.__cause__
            raise
        self._response = response
        return response

    def _hold_pending(self, pending: Deferred[UpstreamResponse] | None) -> None:
        self._pending = pending

    async def _refusal(self, channel: Any, response: UpstreamResponse,
                       body: bytes | None = None) -> Refused:
        """``upstream_refusal`` for this call."""
        return await upstream_refusal(self.ctx, self.log, channel, response, body)

    def _traced(self, headers: dict[bytes, list[bytes]]) -> dict[bytes, list[bytes]]:
        """``headers`` for the upstream plus the W3C trace context: the attempt's span when
        traces are exported, else the client's own ``traceparent`` unchanged."""
        span = self._attempt_span
        trace = (client_trace_headers(self.request) if span is None
                 else Tracing.headers_for(span))
        if trace:
            headers.update(trace)
        return headers

    def _attempt_ended(self, *, failed: bool) -> None:
        """Count the current upstream attempt by outcome (operations contract §2) with its
        time to first byte, and end its span."""
        channel_id, span = self._attempt_channel, self._attempt_span
        if channel_id is None and span is None:
            return
        self._attempt_channel = self._attempt_span = None
        end_attempt(self.ctx, channel_id, span, self._attempt_started, self._response,
                    self._attempt_error, failed=failed)

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
        write_error(self.request, self.family, error)

    def _settle(self, outcome: Outcome) -> None:
        """Queue the one settlement of this call: its outcome's row and charge."""
        ctx = self.ctx
        if self.log.user_id == 0:
            return  # never authenticated: nothing to bill, nothing to log against a user
        if outcome.status == 429 and self.reservation is None:
            return  # a refused flood must not turn into a flood of log rows
        record = settlement_record(self.log, outcome, ctx.clock.seconds(), ctx.now())
        if self.split_record is not None:
            record = self.split_record(record)
        ctx.settler.settle_and_forget(self.reservation, record)


# --- the upstream step: one place for every route family and a meta model's sub-calls ----


async def open_upstream(ctx: GatewayContext, log: RequestLog, channel: Any, url: str,
                        headers: dict[bytes, list[bytes]], body: bytes,
                        first_byte_timeout: float, *,
                        hold: Callable[[Deferred[UpstreamResponse] | None], None],
                        left: Callable[[], bool]) -> UpstreamResponse:
    """The upstream request up to the response's head (the URL already passed
    ``guard_url``).  ``hold`` is given the pending request while it waits (so that a hang-up
    or a hedge's winner can cancel it: the socket closes at once) and None after; ``left``
    says whether such a cancel ended it.  Raises ``ClientLeftError`` then, else a
    ``GatewayError`` (SSRF refusal at connect time; no upstream answer, reported on the
    channel); either way the transport error is the ``__cause__`` (the attempt's metric)."""
    pending = ctx.upstream.request(b"POST", url, headers, body,
                                   first_byte_timeout=first_byte_timeout)
    hold(pending)
    try:
        return await pending
    except UpstreamBlocked:
        raise errors.ssrf_blocked() from None
    except UpstreamError as exc:
        if left():
            raise ClientLeftError() from exc
        report_transport(ctx.health, log, channel, exc)
        raise errors.upstream_failed() from exc
    except CancelledError as exc:
        # cancelled while still connecting (a sent request fails as UpstreamError): the
        # caller's hang-up, a stop or a run deadline -- never an unhandled error
        if left():
            raise ClientLeftError() from exc
        raise
    finally:
        hold(None)


async def upstream_refusal(ctx: GatewayContext, log: RequestLog, channel: Any,
                           response: UpstreamResponse, body: bytes | None = None) -> Refused:
    """What an upstream error status becomes, after reporting it on the channel
    (``body``: the answer when the caller already read it): the client's error, and
    whether another channel may serve (``routing.retryable``)."""
    if body is None:
        body = b""
        with contextlib.suppress(UpstreamError, BodyTooLarge):
            body = await response.read_all(1 << 20, idle_timeout=30)
    report_status(ctx.health, log, channel, response.code, body)
    error = errors.from_upstream(response.code, upstream_header(response, b"retry-after"))
    return Refused(error, retryable=routing.retryable(
        routing.Outcome(routing.STATUS, status=response.code)))


#: verdicts of ``check_url`` per (url, the three settings it reads): the same few channel URLs
#: are checked on every request, and the verdict depends on nothing else (a host *name* is
#: checked again at connect time, on the address it resolves to)
_URL_VERDICTS: dict[tuple[str, bool, bool, str], bool] = {}
_URL_VERDICTS_MAX = 4096


@dataclass(frozen=True)
class RoutingInputs:
    """What ``routing.plan`` needs about one (model, user, groups, key) on one snapshot."""

    candidates: tuple[routing.Candidate, ...]
    user_channels: dict[int, routing.UserChannelInfo]
    allowed_user_channels: tuple[int, ...]
    by_config: dict[int, Candidate]


#: per catalog snapshot (immutable, replaced wholesale on reload): the same caller asking for
#: the same model gets the same inputs, so they are built once, not on every request
_ROUTING_INPUTS: weakref.WeakKeyDictionary[
    CatalogSnapshot, dict[tuple[Any, ...], RoutingInputs | None]] = weakref.WeakKeyDictionary()
_ROUTING_INPUTS_PER_SNAPSHOT = 50_000


def routing_inputs(snapshot: CatalogSnapshot, model: str, user_id: int,
                   group_ids: Sequence[int], key_channels: Sequence[int]
                   ) -> RoutingInputs | None:
    """The candidates of §5 step 2 in ``routing``'s terms; None when there are none (503)."""
    cache = _ROUTING_INPUTS.get(snapshot)
    if cache is None:
        cache = _ROUTING_INPUTS[snapshot] = {}
    key = (model, user_id, tuple(group_ids), tuple(key_channels))
    if key in cache:
        return cache[key]
    found = snapshot.candidates_for(model, user_id, group_ids, key_channels)
    inputs = RoutingInputs(
        candidates=tuple(routing.Candidate(
            config_id=c.config.id, channel_id=c.channel.id,
            user_channel_id=c.user_channel.id, priority=c.channel.priority,
            weight=c.channel.weight, channel_type=c.channel.type,
            base_url=c.channel.base_url, upstream_model=c.upstream_model) for c in found),
        user_channels={c.user_channel.id: routing.UserChannelInfo(
            c.user_channel.id, c.user_channel.routing_algorithm) for c in found},
        allowed_user_channels=tuple(key_channels),
        by_config={c.config.id: c for c in found},
    ) if found else None
    if len(cache) < _ROUTING_INPUTS_PER_SNAPSHOT:
        cache[key] = inputs
    return inputs


#: any time at all: ``active_group_ids`` of a user none of whose memberships expires does not
#: read it
_ANY_TIME = datetime.min.replace(tzinfo=UTC)


def active_group_ids(ctx: GatewayContext, user: GatewayUser) -> list[int]:
    """``user.active_group_ids`` now; the clock is read (a ``datetime`` made) only when one of
    the user's memberships can expire -- most never do."""
    for _group, expires in user.memberships:
        if expires is not None:
            return user.active_group_ids(ctx.now())
    return user.active_group_ids(_ANY_TIME)


#: user channel id -> (the catalog's ``UserChannel`` record, its limit).  A record is frozen and
#: a catalog reload makes new ones, so the limit is rebuilt exactly when the record it was read
#: from is not the one asked about (identity, not the id: a reload keeps the ids)
_USER_CHANNEL_LIMITS: dict[int, tuple[UserChannel, UserChannelLimit]] = {}
_USER_CHANNEL_LIMITS_MAX = 4096


def user_channel_limit(user_channel: UserChannel) -> UserChannelLimit:
    """The rate-limit columns of ``user_channel`` as the limiter takes them, made once per
    catalog record rather than per request."""
    found = _USER_CHANNEL_LIMITS.get(user_channel.id)
    if found is not None and found[0] is user_channel:
        return found[1]
    limit = UserChannelLimit(
        user_channel.id, user_channel.rate_limit_enabled,
        user_channel.rate_limit_requests_per_minute, user_channel.rate_limit_burst)
    if len(_USER_CHANNEL_LIMITS) >= _USER_CHANNEL_LIMITS_MAX:
        _USER_CHANNEL_LIMITS.clear()
    _USER_CHANNEL_LIMITS[user_channel.id] = (user_channel, limit)
    return limit


async def limiter_verdict(pending: Awaitable[Verdict]) -> Verdict:
    """A rate limiter's verdict; when the shared state (Redis) cannot answer, the call is
    refused with 503 -- a limit nobody can count must not let everything through."""
    try:
        return await pending
    except Exception:
        log.failure("rate limiting could not reach the shared state")
        raise GatewayError(503, "Rate limiting is temporarily unavailable",
                           type="service_unavailable", headers=RETRY_SOON) from None


async def reserve_or_refuse(ctx: GatewayContext, request_id: str, caller: Caller,
                            amount: int) -> Reservation:
    """Hold ``amount`` for a call: 402 when the wallet or key cannot pay, 503 when the shared
    wallet cannot be asked (never admit on a guess)."""
    wallets = ctx.wallets
    # a wallet of this process with the balances in memory answers without a Deferred
    reserve_now = getattr(wallets, "reserve_now", None)
    try:
        held = None if reserve_now is None else reserve_now(
            request_id, caller.user.id, caller.key_id, amount, jwt=caller.key is None)
        return held if held is not None else await wallets.reserve(
            request_id, caller.user.id, caller.key_id, amount, jwt=caller.key is None)
    except PaymentRequired as exc:
        raise GatewayError(402, str(exc), type="insufficient_quota",
                           code="insufficient_quota") from None
    except WalletUnavailable:
        log.failure("admission could not reach the shared wallet")
        raise GatewayError(503, "Billing is temporarily unavailable",
                           type="service_unavailable", headers=RETRY_SOON) from None


def guard_url(ctx: GatewayContext, url: str) -> None:
    """The SSRF policy, checked on every upstream URL before the call (contract §6.3)."""
    settings = ctx.settings
    key = (url, settings.flag("ssrf_protection_enabled"),
           settings.flag("ssrf_allow_private_networks"), settings.text("ssrf_allowed_hosts"))
    safe = _URL_VERDICTS.get(key)
    if safe is None:
        try:
            check_url(url, UrlPolicy.from_settings(settings))
            safe = True
        except UnsafeUrl:
            safe = False
        if len(_URL_VERDICTS) >= _URL_VERDICTS_MAX:
            _URL_VERDICTS.clear()
        _URL_VERDICTS[key] = safe
    if not safe:
        raise errors.ssrf_blocked()


def upstream_header(response: UpstreamResponse, name: bytes) -> str | None:
    value = response.header(name)
    return value.decode("latin-1") if value else None
