"""The metric families a process updates as it works (operations contract §2).

Why it looks like this: the /v1 path is the product, so what it pays per request is a few
dictionary lookups and integer additions on the reactor thread -- no lock, no label tuple, no
metric child, no object per request.  The counts live in plain dictionaries keyed by label
value (bounded by ``labels``), and ``collect`` turns them into the library's metric families
when Prometheus scrapes; the exposition is ``prometheus_client``'s.  Gauges of state the
process already keeps (reservations, queued settlements, polled tasks) are read at scrape time
by ``scrape.py``.  Each app owns a private ``CollectorRegistry``: tests open several apps in
one process, and the library's global registry would mix them.

One ``GatewayMetrics`` exists when ``--metrics-listen`` is given; without it the hot path sees
``None`` and skips every call.  Everything here runs on the reactor thread (scrapes included).
"""

from __future__ import annotations

import platform
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from prometheus_client import CollectorRegistry
from prometheus_client.core import CounterMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.process_collector import ProcessCollector
from prometheus_client.registry import Collector

from gateway.observability.distribution import Distribution
from gateway.observability.labels import (
    FAMILIES,
    SETTLEMENT_OUTCOMES,
    TOKEN_DIRECTIONS,
    family_of,
    status_code,
)
from gateway.observability.scrape import ProcessState, ScrapeSources

NANOS = 1_000_000_000


class GatewayMetrics(Collector):
    """The counted families of §2, and the registry that exposes them with the rest."""

    def __init__(self, *, version: str, known_model: Callable[[str], bool]) -> None:
        self._known_model = known_model
        #: family -> model -> status -> finished requests
        self._requests: dict[str, dict[str, dict[int, int]]] = {}
        self._durations = {family: Distribution() for family in FAMILIES}
        #: channel id -> outcome -> attempts
        self._attempts: dict[int, dict[str, int]] = {}
        self._failovers: dict[int, int] = {}
        self._ttfb: dict[int, Distribution] = {}
        self._settlement_lag = Distribution()
        self._settlements = dict.fromkeys(SETTLEMENT_OUTCOMES, 0)
        #: family -> committed charges in nano-units (exact; divided only when exposed)
        self._billed_nanos: dict[str, int] = {}
        self._tokens = dict.fromkeys(TOKEN_DIRECTIONS, 0)
        #: open streaming responses per family (a gauge, read at scrape time)
        self.streams_open: dict[str, int] = {}
        self.sources = ScrapeSources()
        self.registry = CollectorRegistry()
        self.registry.register(ProcessState(
            self.sources, self.streams_open, version=version,
            python=platform.python_version()))
        self.registry.register(self)
        ProcessCollector(registry=self.registry)

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
        by_code[code] = by_code.get(code, 0) + 1
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
        by_outcome[outcome] = by_outcome.get(outcome, 0) + 1

    def first_byte(self, channel_id: int, seconds: float) -> None:
        distribution = self._ttfb.get(channel_id)
        if distribution is None:
            distribution = self._ttfb[channel_id] = Distribution()
        distribution.observe(seconds)

    def failover(self, channel_id: int) -> None:
        self._failovers[channel_id] = self._failovers.get(channel_id, 0) + 1

    # --- money ----------------------------------------------------------------------------

    def settled(self, endpoint: str, status: int, cost_nanos: int, charged_nanos: int,
                row: Mapping[str, Any], duplicate: bool, lag: float) -> None:
        """One committed settlement (called per record of a group commit); ``row`` is its
        batch item (``input_tokens``, ``output_tokens``, ``cached_input_tokens``: the billed
        token counts, as in its usage-log row)."""
        self._settlement_lag.observe(lag)
        if charged_nanos > 0:
            outcome = "charged"
        elif status >= 400 or cost_nanos > 0:
            outcome = "refunded"  # the hold went back: a failed call, or nothing to pay with
        else:
            outcome = "free"
        self._settlements[outcome] += 1
        if duplicate or charged_nanos <= 0:
            return  # counted when first committed; a free call bills no units or tokens
        family = family_of(endpoint)
        self._billed_nanos[family] = self._billed_nanos.get(family, 0) + charged_nanos
        tokens = self._tokens
        tokens["input"] += row["input_tokens"]
        tokens["output"] += row["output_tokens"]
        tokens["cached"] += row["cached_input_tokens"]

    def settlement_failed(self) -> None:
        self._settlements["failed"] += 1

    # --- exposition -----------------------------------------------------------------------

    def describe(self) -> Iterator[Metric]:
        return iter(self._families())

    def collect(self) -> Iterator[Metric]:
        (requests, durations, attempts, failovers, ttfb, lag, settlements, billed,
         tokens) = families = self._families()
        for family, by_model in self._requests.items():
            for model, by_code in by_model.items():
                for code, count in by_code.items():
                    requests.add_metric([family, model, status_code(code)], count)
        for family, distribution in self._durations.items():
            durations.add_metric([family], distribution.cumulative(), distribution.total)
        for channel, by_outcome in self._attempts.items():
            for outcome, count in by_outcome.items():
                attempts.add_metric([str(channel), outcome], count)
        for channel, count in self._failovers.items():
            failovers.add_metric([str(channel)], count)
        for channel, distribution in self._ttfb.items():
            ttfb.add_metric([str(channel)], distribution.cumulative(), distribution.total)
        lag.add_metric([], self._settlement_lag.cumulative(), self._settlement_lag.total)
        for outcome, count in self._settlements.items():
            settlements.add_metric([outcome], count)
        for family, nanos in self._billed_nanos.items():
            billed.add_metric([family], nanos / NANOS)
        for direction, count in self._tokens.items():
            tokens.add_metric([direction], count)
        return iter(families)

    @staticmethod
    def _families() -> tuple[Any, ...]:
        return (
            CounterMetricFamily("lockgate_http_requests", "Finished HTTP requests.",
                                labels=["family", "model", "code"]),
            HistogramMetricFamily("lockgate_http_request_duration_seconds",
                                  "Seconds from a request's start to its last byte written.",
                                  labels=["family"]),
            CounterMetricFamily("lockgate_upstream_attempts",
                                "Attempts to an upstream channel, by outcome.",
                                labels=["channel", "outcome"]),
            CounterMetricFamily("lockgate_upstream_failovers",
                                "Failovers away from a channel to a later candidate.",
                                labels=["channel"]),
            HistogramMetricFamily("lockgate_upstream_time_to_first_byte_seconds",
                                  "Seconds from an attempt's start to the first upstream "
                                  "body byte.", labels=["channel"]),
            HistogramMetricFamily("lockgate_settlement_lag_seconds",
                                  "Seconds from a request's end to the commit of its "
                                  "settlement."),
            CounterMetricFamily("lockgate_settlements", "Settlements committed, by outcome.",
                                labels=["outcome"]),
            CounterMetricFamily("lockgate_billed_units",
                                "Sum of committed charges, in balance units.",
                                labels=["family"]),
            CounterMetricFamily("lockgate_billed_tokens",
                                "Tokens of committed settlements, by direction.",
                                labels=["direction"]),
        )
