"""One upstream attempt's metrics and trace span (operations contract §2), for every caller.

A /v1 call's own attempts (``GatewayCall``) and a meta model's sub-calls (``meta_subcalls``)
are the same kind of upstream request, so they are counted the same way: a ``CLIENT`` span
child of the call's span whose ``traceparent`` goes to the upstream, then, once the attempt is
over, ``lockgate_upstream_attempts`` by outcome and the time to first byte.  Beginning and
ending live here so that both count alike.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from gateway.channels.http import UpstreamResponse
from gateway.observability.outcomes import attempt_outcome
from gateway.observability.tracing import Tracing

if TYPE_CHECKING:
    from opentelemetry.trace import Span

    from gateway.context import GatewayContext


def end_attempt(ctx: GatewayContext, channel_id: int | None, span: Span | None, started: float,
                response: UpstreamResponse | None, error: Exception | None, *,
                failed: bool) -> None:
    """Count an upstream attempt by outcome with its time to first byte (``channel_id``
    None: metrics were off when it began) and end its span.  ``response``: what the upstream
    answered (None: nothing); ``error``: why not; ``failed``: it broke off after the head."""
    outcome = attempt_outcome(response, error, failed)
    if span is not None:
        Tracing.end_attempt(span, outcome)
    metrics = ctx.metrics
    if metrics is None or channel_id is None:
        return
    if response is not None and response.first_body_at is not None:
        metrics.first_byte(channel_id, response.first_body_at - started)
    metrics.attempt(channel_id, outcome)


@dataclass
class AttemptRecord:
    """An attempt being made: begun right before its request, ended once by ``end``."""

    ctx: GatewayContext
    channel_id: int | None
    span: Span | None
    started: float
    response: UpstreamResponse | None = None
    error: Exception | None = None
    ended: bool = False

    @classmethod
    def begin(cls, ctx: GatewayContext, parent: Span | None, channel_id: int) -> AttemptRecord:
        """Start counting an attempt on ``channel_id``; its span is a child of ``parent``
        (the call's span, None when traces are not exported)."""
        span = (ctx.tracing.attempt_span(parent, channel_id)
                if ctx.tracing is not None and parent is not None else None)
        return cls(ctx, channel_id if ctx.metrics is not None else None, span,
                   ctx.clock.seconds())

    def trace_headers(self) -> dict[bytes, list[bytes]]:
        """The ``traceparent`` naming this attempt's span, for the upstream request."""
        return Tracing.headers_for(self.span) if self.span is not None else {}

    def end(self, *, failed: bool) -> None:
        if not self.ended:
            self.ended = True
            end_attempt(self.ctx, self.channel_id, self.span, self.started, self.response,
                        self.error, failed=failed)
