"""Gauges read at scrape time from state the process already keeps.

Why a collector instead of ``Gauge.set`` calls: reservations, queued settlements, polled tasks
and the drain flag already live in memory, so reading them when Prometheus asks costs the hot
path nothing.  ``ScrapeSources`` holds the readers; the composition root (``tap``) points them
at the live objects once they exist, and until then every family is exposed without samples.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from gateway.observability.labels import FAMILIES, LINK_KINDS


def _zero() -> int:
    return 0


def _empty() -> Mapping[str, int]:
    return {}


def _no() -> bool:
    return False


@dataclass
class ScrapeSources:
    """Readers of live state; each is called once per scrape."""

    reservations_open: Callable[[], int] = _zero
    settlement_queue_depth: Callable[[], int] = _zero
    #: family -> async tasks not yet terminal that this process is polling
    task_backlog: Callable[[], Mapping[str, int]] = _empty
    #: None without --redis (the family then has no sample); else whether Redis answers
    shared_state_up: Callable[[], bool | None] | None = None
    draining: Callable[[], bool] = _no
    #: kind -> WebSocket links held by this process
    links_online: Callable[[], Mapping[str, int]] = field(
        default=lambda: dict.fromkeys(LINK_KINDS, 0))
    #: database transactions this process has started (what a request or a run round costs
    #: the database, read by the benchmarks)
    db_transactions: Callable[[], int] = _zero


class ProcessState(Collector):
    """The gauges of §2 that describe the process rather than count its work."""

    def __init__(self, sources: ScrapeSources, streams_open: Mapping[str, int], *,
                 version: str, python: str) -> None:
        self._sources = sources
        self._streams_open = streams_open
        self._version = version
        self._python = python

    def describe(self) -> Iterator[Metric]:
        return iter((*self._families(), self._transactions()))

    def collect(self) -> Iterator[Metric]:
        build, streams, reservations, queue, backlog, links, shared, draining = (
            self._families())
        build.add_metric([self._version, self._python], 1)
        for family in FAMILIES:
            if family in self._streams_open:
                streams.add_metric([family], self._streams_open[family])
        sources = self._sources
        reservations.add_metric([], sources.reservations_open())
        queue.add_metric([], sources.settlement_queue_depth())
        polled = sources.task_backlog()
        for family in FAMILIES:
            if family in polled:
                backlog.add_metric([family], polled[family])
        online = sources.links_online()
        for kind in LINK_KINDS:
            links.add_metric([kind], online.get(kind, 0))
        if sources.shared_state_up is not None:
            up = sources.shared_state_up()
            if up is not None:
                shared.add_metric([], 1 if up else 0)
        draining.add_metric([], 1 if sources.draining() else 0)
        transactions = self._transactions()
        transactions.add_metric([], sources.db_transactions())
        yield from (build, streams, reservations, queue, backlog, links, shared, draining,
                    transactions)

    @staticmethod
    def _transactions() -> CounterMetricFamily:
        return CounterMetricFamily("lockgate_db_transactions",
                                   "Database transactions this process has started.")

    @staticmethod
    def _families() -> tuple[GaugeMetricFamily, ...]:
        return (
            GaugeMetricFamily("lockgate_build_info", "Build version and Python (always 1).",
                              labels=["version", "python"]),
            GaugeMetricFamily("lockgate_active_streams", "Streaming responses open now.",
                              labels=["family"]),
            GaugeMetricFamily("lockgate_reservations_open",
                              "Reservations this process holds now."),
            GaugeMetricFamily("lockgate_settlement_queue_depth",
                              "Settlements queued, not yet committed."),
            GaugeMetricFamily("lockgate_task_poller_backlog",
                              "Async tasks not yet terminal that this process polls.",
                              labels=["family"]),
            GaugeMetricFamily("lockgate_links_online", "WebSocket links held by this process.",
                              labels=["kind"]),
            GaugeMetricFamily("lockgate_shared_state_up",
                              "1 when Redis is configured and reachable, 0 when unreachable."),
            GaugeMetricFamily("lockgate_draining", "1 from SIGTERM on."),
        )
