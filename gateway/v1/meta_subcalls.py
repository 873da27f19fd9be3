"""The upstream calls a meta model's ``parallel`` or ``judge`` makes (console contract §6.3.1).

Each sub-call is an ordinary metered call of one model: the caller's candidates for it,
failover before anything was read, the user channel's rate limit, and the upstream step every
route family uses (``guard_url``, ``open_upstream``, ``upstream_refusal`` of
``gateway.v1.call``: SSRF check, request, channel health, refusal mapping) -- and its own
usage-log row ``<client request id>.<n>`` (n in start order) carrying the called model, made
from the sub-call's ``Outcome`` by ``settlement_record``.  Each attempt is counted in the
per-attempt metrics and traced as a span of the client call (``attempt_record``), like the
call's own; a started stream's attempt is counted when its head arrives.  In ``actual``
billing mode that row carries the call's cost; in ``meta`` mode it costs 0 and keeps the
token counts (the client's own row carries the meta price).
The client's reservation already holds the worst case of every call the program can make, so
a sub-call reserves nothing of its own.

A sub-call answers either whole (``run``: the body read and translated to the client's
family) or as soon as the upstream starts a successful answer (``open``: a hedged stream,
whose winner the client call relays).  ``cancel`` closes every upstream socket still open.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from twisted.internet.defer import Deferred

from gateway import errors
from gateway.auth import Caller
from gateway.channels.channel_types import normalise_channel_type
from gateway.channels.http import BodyTooLarge, UpstreamError, UpstreamResponse
from gateway.channels.upstream_url import join, json_headers
from gateway.errors import GatewayError
from gateway.limits import UserChannelLimit, global_identity
from gateway.metamodels.compiled import MetaModel
from gateway.metering import Priced, RequestLog, fallback_usage
from gateway.observability.tracing import client_trace_headers
from gateway.protocols.answer_text import answer_text
from gateway.protocols.errors import ProtocolError, UpstreamFormatError
from gateway.protocols.estimate import estimate_tokens
from gateway.protocols.request import ClientRequest
from gateway.protocols.translate import Translator, make_translator
from gateway.v1.attempt_record import AttemptRecord
from gateway.v1.call import (
    ClientLeftError,
    guard_url,
    limiter_verdict,
    open_upstream,
    upstream_refusal,
)
from gateway.v1.outcome import Outcome, Refused, Served, settlement_record

if TYPE_CHECKING:
    from gateway.v1.text_route import TextCall

#: largest sub-call answer read (as the text route's non-stream limit)
MAX_ANSWER = 64 << 20
CANCELLED = "cancelled: another call of the meta model answered first"


class _Retry(Exception):
    """This candidate failed before anything was read: try the next one."""

    def __init__(self, error: GatewayError) -> None:
        super().__init__(error.message)
        self.error = error


def cancelled_error() -> GatewayError:
    """A sub-call ended by our own cancel (the client left, or another call of a hedged
    ``parallel`` won) before it produced anything: 499."""
    return GatewayError(499, CANCELLED, type="client_closed_request")


def cancelled() -> Refused:
    """``cancelled_error`` as the sub-call's outcome: nothing billed."""
    return Refused(cancelled_error())


@dataclass
class SubAnswer:
    """What one sub-call got: an answer (whole, or a started stream) or the error."""

    number: int
    model: str
    log: RequestLog
    error: GatewayError | None = None
    #: how the sub-call ended, for its row (None: a started stream the client call relays)
    outcome: Outcome | None = None
    #: whole answers: the client-family body and its text
    body: bytes = b""
    text: str = ""
    #: started streams: what the client call needs to relay it
    priced: Priced | None = None
    translator: Translator | None = None
    response: UpstreamResponse | None = None

    @property
    def ok(self) -> bool:
        return self.error is None


class SubCalls:
    """The sub-calls of one client call: numbering, execution, settlement, cancellation."""

    def __init__(self, call: TextCall, caller: Caller, meta: MetaModel) -> None:
        self.call = call
        self.ctx = call.ctx
        self.caller = caller
        self.meta = meta
        self.started = 0
        self.cancelled = False
        self._pending: set[Deferred[Any]] = set()
        self._responses: set[UpstreamResponse] = set()
        call.request.notifyFinish().addErrback(lambda _reason: self.cancel())

    def next_number(self) -> int:
        self.started += 1
        return self.started

    def sub_id(self, number: int) -> str:
        return f"{self.call.log.request_id}.{number}"

    def _log(self, number: int, model: str, stream: bool) -> RequestLog:
        parent = self.call.log
        return RequestLog(
            request_id=self.sub_id(number), user_id=parent.user_id,
            api_key_id=parent.api_key_id, endpoint=parent.endpoint,
            started=self.ctx.clock.seconds(), ip=parent.ip, user_agent=parent.user_agent,
            model_name=model, meta_model_name=self.meta.model_name, is_stream=stream)

    def cancel(self, keep: UpstreamResponse | None = None) -> None:
        """Close every upstream socket still open (but ``keep``'s): the client left, or
        another call of a hedged ``parallel`` won."""
        self.cancelled = True
        for pending in list(self._pending):
            pending.cancel()
        for response in list(self._responses):
            if response is not keep:
                response.abort()

    def settle(self, answer: SubAnswer) -> None:
        """Queue a sub-call's row: its cost in ``actual`` mode, 0 (tokens kept) in ``meta``."""
        ctx = self.ctx
        outcome = answer.outcome if answer.outcome is not None else cancelled()
        record = settlement_record(answer.log, outcome, ctx.clock.seconds(), ctx.now())
        if self.meta.bills_meta:
            record = replace(record, cost=None)
        ctx.settler.settle_and_forget(None, record)

    async def run(self, model: str, request: ClientRequest, *,
                  settle: bool = True) -> SubAnswer:
        """One whole (non-stream) call of ``model``; its row is queued when it ends (unless
        ``settle`` is false: a hedging call, whose row depends on whether it won)."""
        answer = SubAnswer(self.next_number(), model, self._log(self.started, model, False))
        try:
            await self._attempts(answer, request, whole=True)
        finally:
            if settle:
                self.settle(answer)
        return answer

    async def open(self, number: int, model: str, request: ClientRequest) -> SubAnswer:
        """A streamed call of ``model`` up to a successful response head.  A winner is
        relayed by the client call (its row is the client call's to write); a failed or
        cancelled one has its row queued here."""
        answer = SubAnswer(number, model, self._log(number, model, True))
        await self._attempts(answer, request, whole=False)
        if not answer.ok:
            self.settle(answer)
        return answer

    async def _attempts(self, answer: SubAnswer, request: ClientRequest, *,
                        whole: bool) -> None:
        last: GatewayError = errors.no_channel()
        metrics = self.ctx.metrics
        failed_channel: int | None = None
        try:
            for priced in await self._plan(answer.model):
                if self.cancelled:
                    last = cancelled_error()
                    break
                if failed_channel is not None and metrics is not None:
                    metrics.failover(failed_channel)
                answer.log.priced = priced
                try:
                    await self._attempt(answer, priced, request, whole)
                    return
                except _Retry as retry:
                    last = retry.error
                    failed_channel = priced.candidate.channel.id
        except GatewayError as error:
            last = error
        answer.error = last
        answer.outcome = Refused(last)

    async def _plan(self, model: str) -> list[Priced]:
        """The model's attempts, once the sub-call passed the caller's rate limits like any
        call: the global one, then its primary user channel's."""
        caller, limiter = self.caller, self.ctx.limiter
        verdict = await limiter_verdict(limiter.check_global(
            global_identity(caller.key_id, caller.user.id, caller.ip)))
        if verdict.error is not None:
            raise verdict.error
        attempts = await self.call._plan(caller, model)
        primary = attempts[0].candidate.user_channel
        verdict = await limiter_verdict(limiter.check_user_channel(
            caller.user.id, UserChannelLimit(
                primary.id, primary.rate_limit_enabled, primary.rate_limit_requests_per_minute,
                primary.rate_limit_burst)))
        if verdict.error is not None:
            raise verdict.error
        return attempts

    async def _attempt(self, answer: SubAnswer, priced: Priced, request: ClientRequest,
                       whole: bool) -> None:
        ctx = self.ctx
        channel = priced.candidate.channel
        channel_type = normalise_channel_type(channel.type)
        upstream_model = priced.candidate.upstream_model
        try:
            # the client's own family goes through the call's translator choice (a Google
            # stream without ``alt=sse`` is re-framed as a JSON array)
            translator = (
                self.call._translator(channel_type, request, upstream_model)
                if request.family == self.call.protocol_family
                else make_translator(request.family, channel_type, request, upstream_model))
        except ProtocolError as exc:
            raise _Retry(GatewayError(exc.status, exc.message, type=exc.type)) from None
        url = join(channel.base_url, translator.upstream_path().decode())
        guard_url(ctx, url)
        # counted and traced as the call's own attempts are (a started stream: up to its head)
        record = AttemptRecord.begin(ctx, self.call._span, channel.id)
        try:
            await self._exchange(answer, priced, request, whole, translator, url, record)
        except BaseException:
            record.end(failed=True)
            raise
        record.end(failed=False)

    async def _exchange(self, answer: SubAnswer, priced: Priced, request: ClientRequest,
                        whole: bool, translator: Translator, url: str,
                        record: AttemptRecord) -> None:
        """One attempt's request and answer (whole, or up to the head of a stream)."""
        ctx, log = self.ctx, answer.log
        channel = priced.candidate.channel
        headers = json_headers(normalise_channel_type(channel.type), channel.api_key)
        headers.update(record.trace_headers() or client_trace_headers(self.call.request) or {})
        try:
            response = await open_upstream(
                ctx, log, channel, url, headers, translator.upstream_body(),
                ctx.timeouts.first_byte, hold=self._holder(), left=lambda: self.cancelled)
        except GatewayError as failed:
            if isinstance(failed.__cause__, UpstreamError):
                record.error = failed.__cause__
            if isinstance(failed, ClientLeftError):
                raise cancelled_error() from None
            if isinstance(failed.__cause__, UpstreamError):
                raise _Retry(failed) from None
            raise
        record.response = response
        if response.code >= 400:
            refusal = await upstream_refusal(ctx, log, channel, response)
            if refusal.retryable:
                raise _Retry(refusal.error)
            raise refusal.error
        ctx.health.record_success(channel.id)
        self._responses.add(response)
        answer.priced = priced
        if not whole:
            answer.translator, answer.response = translator, response
            return
        try:
            body = await response.read_all(MAX_ANSWER, idle_timeout=ctx.timeouts.stream_idle)
            answer.body = translator.response(response.code, body)
        except (UpstreamError, BodyTooLarge, UpstreamFormatError):
            if self.cancelled:
                raise cancelled_error() from None
            raise _Retry(errors.upstream_read_failed()) from None
        finally:
            self._responses.discard(response)
        answer.text = answer_text(request.family, answer.body)
        log.first_byte_at = ctx.clock.seconds()
        answer.outcome = Served(translator.usage or fallback_usage(
            max(1, request.estimated_input_tokens), estimate_tokens(answer.body)))

    def _holder(self) -> Callable[[Deferred[UpstreamResponse] | None], None]:
        """``open_upstream``'s ``hold`` for one attempt: its pending request is among those
        ``cancel`` cancels while it waits."""
        held: list[Deferred[UpstreamResponse]] = []

        def hold(pending: Deferred[UpstreamResponse] | None) -> None:
            if pending is not None:
                held.append(pending)
                self._pending.add(pending)
            else:
                self._pending.difference_update(held)

        return hold
