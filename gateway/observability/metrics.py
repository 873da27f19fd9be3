"""The metric families a process updates as it works (operations contract §2).

Why it looks like this: the /v1 path is the product, so what it pays per request is a few
dictionary lookups and ``inc``/``observe`` calls on label children bound once and cached
(per family, model and status code; per channel and outcome) -- no label tuple, no ``labels()``
call, no new object per request.  Gauges of state the process already keeps (reservations,
queued settlements, open streams, polled tasks) are read at scrape time by ``scrape.py``, not
maintained on the hot path.  Each app owns a private ``CollectorRegistry``: tests open several
apps in one process, and the library's global registry would mix them.

One ``GatewayMetrics`` exists when ``--metrics-listen`` is given; without it the hot path sees
``None`` and skips every call.
"""

from __future__ import annotations

import platform
from collections.abc import Callable
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Histogram, disable_created_metrics
from prometheus_client.process_collector import ProcessCollector

from gateway.billing.usage import Usage
from gateway.observability.labels import (
    BUCKETS,
    FAMILIES,
    SETTLEMENT_OUTCOMES,
    TOKEN_DIRECTIONS,
    family_of,
    status_code,
)
from gateway.observability.scrape import ProcessState, ScrapeSources

NANOS = 1_000_000_000

# §2 lists the families a scrape has; the library's per-series ``*_created`` gauges are not
# among them (and double the series count), so they are off for the whole process
disable_created_metrics()


class GatewayMetrics:
    """The registry and every family of §2; see the module docstring for the cost rules."""

    def __init__(self, *, version: str, known_model: Callable[[str], bool]) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self._known_model = known_model
        registry = self.registry
        self.http_requests = Counter(
            "lockgate_http_requests", "Finished HTTP requests.", ("family", "model", "code"),
            registry=registry)
        self.http_duration = Histogram(
            "lockgate_http_request_duration_seconds",
            "Seconds from a request's start to its last byte written.", ("family",),
            buckets=BUCKETS, registry=registry)
        self.attempts = Counter(
            "lockgate_upstream_attempts", "Attempts to an upstream channel, by outcome.",
            ("channel", "outcome"), registry=registry)
        self.failovers = Counter(
            "lockgate_upstream_failovers",
            "Failovers away from a channel to a later candidate.", ("channel",),
            registry=registry)
        self.ttfb = Histogram(
            "lockgate_upstream_time_to_first_byte_seconds",
            "Seconds from an attempt's start to the first upstream body byte.", ("channel",),
            buckets=BUCKETS, registry=registry)
        self.settlement_lag = Histogram(
            "lockgate_settlement_lag_seconds",
            "Seconds from a request's end to the commit of its settlement.",
            buckets=BUCKETS, registry=registry)
        self.settlements = Counter(
            "lockgate_settlements", "Settlements committed, by outcome.", ("outcome",),
            registry=registry)
        self.billed_units = Counter(
            "lockgate_billed_units", "Sum of committed charges, in balance units.", ("family",),
            registry=registry)
        self.billed_tokens = Counter(
            "lockgate_billed_tokens", "Tokens of committed settlements, by direction.",
            ("direction",), registry=registry)
        #: open streaming responses per family (read at scrape time)
        self.streams_open: dict[str, int] = {}
        self.sources = ScrapeSources()
        registry.register(ProcessState(
            self.sources, self.streams_open, version=version,
            python=platform.python_version()))
        ProcessCollector(registry=registry)
        # label children bound once: the fixed vocabularies now, the rest on first use
        self._durations = {family: self.http_duration.labels(family) for family in FAMILIES}
        self._settled = {outcome: self.settlements.labels(outcome)
                         for outcome in SETTLEMENT_OUTCOMES}
        self._tokens = {direction: self.billed_tokens.labels(direction)
                        for direction in TOKEN_DIRECTIONS}
        self._billed: dict[str, Any] = {}
        self._requests: dict[str, dict[str, dict[int, Any]]] = {}
        self._attempts: dict[int, dict[str, Any]] = {}
        self._failovers: dict[int, Any] = {}
        self._ttfb: dict[int, Any] = {}

    # --- HTTP -----------------------------------------------------------------------------

    def request_finished(self, path: bytes, model: str, code: int, seconds: float) -> None:
        """One finished HTTP request; ``model`` is "" for routes without one."""
        family = family_of(path)
        if model and not self._known_model(model):
            model = "other"
        by_model = self._requests.get(family)
        if by_model is None:
            by_model = self._requests[family] = {}
        by_code = by_model.get(model)
        if by_code is None:
            by_code = by_model[model] = {}
        child = by_code.get(code)
        if child is None:
            child = by_code[code] = self.http_requests.labels(family, model, status_code(code))
        child.inc()
        self._durations[family].observe(seconds)

    def stream_opened(self, path: bytes) -> str:
        """A streaming response started; returns the family to hand to ``stream_closed``."""
        family = family_of(path)
        self.streams_open[family] = self.streams_open.get(family, 0) + 1
        return family

    def stream_closed(self, family: str) -> None:
        self.streams_open[family] -= 1

    # --- upstream -------------------------------------------------------------------------

    def attempt(self, channel_id: int, outcome: str) -> None:
        by_outcome = self._attempts.get(channel_id)
        if by_outcome is None:
            by_outcome = self._attempts[channel_id] = {}
        child = by_outcome.get(outcome)
        if child is None:
            child = by_outcome[outcome] = self.attempts.labels(str(channel_id), outcome)
        child.inc()

    def first_byte(self, channel_id: int, seconds: float) -> None:
        child = self._ttfb.get(channel_id)
        if child is None:
            child = self._ttfb[channel_id] = self.ttfb.labels(str(channel_id))
        child.observe(seconds)

    def failover(self, channel_id: int) -> None:
        child = self._failovers.get(channel_id)
        if child is None:
            child = self._failovers[channel_id] = self.failovers.labels(str(channel_id))
        child.inc()

    # --- money ----------------------------------------------------------------------------

    def settled(self, endpoint: str, status: int, cost_nanos: int, charged_nanos: int,
                usage: Usage, duplicate: bool, lag: float) -> None:
        """One committed settlement (called per record of a group commit)."""
        self.settlement_lag.observe(lag)
        if charged_nanos > 0:
            outcome = "charged"
        elif status >= 400 or cost_nanos > 0:
            outcome = "refunded"  # the hold went back: a failed call, or nothing to pay with
        else:
            outcome = "free"
        self._settled[outcome].inc()
        if duplicate:
            return  # already counted when it was first committed
        if charged_nanos > 0:  # tokens of what was paid for; a free call bills none
            family = family_of(endpoint.encode("latin-1"))
            child = self._billed.get(family)
            if child is None:
                child = self._billed[family] = self.billed_units.labels(family)
            child.inc(charged_nanos / NANOS)
            clamped = usage.clamped()
            if clamped.input:
                self._tokens["input"].inc(clamped.input)
            if clamped.output:
                self._tokens["output"].inc(clamped.output)
            if clamped.cache_read:
                self._tokens["cached"].inc(clamped.cache_read)

    def settlement_failed(self) -> None:
        self._settled["failed"].inc()
