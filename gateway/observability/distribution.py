"""A histogram's state as plain numbers: one count per bucket and a sum.

Why not ``prometheus_client.Histogram``: its ``observe`` takes a lock per value and walks the
buckets in Python, about a microsecond and a half per call; the /v1 path observes several
values per request on the one reactor thread, where a ``bisect`` and two additions do.  The
library still renders it (``HistogramMetricFamily``), so the exposition is its own.
"""

from __future__ import annotations

from bisect import bisect_left

from prometheus_client.utils import floatToGoString

from gateway.observability.labels import BUCKETS

#: the ``le`` label of every bucket, +Inf last
BUCKET_LABELS = (*(floatToGoString(bound) for bound in BUCKETS), "+Inf")


class Distribution:
    """Observations of one label set; ``le`` semantics as Prometheus (value <= bound)."""

    __slots__ = ("counts", "total")

    def __init__(self) -> None:
        self.counts = [0] * (len(BUCKETS) + 1)
        self.total = 0.0

    def observe(self, value: float) -> None:
        self.counts[bisect_left(BUCKETS, value)] += 1
        self.total += value

    def cumulative(self) -> list[tuple[str, float]]:
        """(le, observations <= le) per bucket, as ``HistogramMetricFamily`` takes them."""
        running = 0
        out = []
        for label, count in zip(BUCKET_LABELS, self.counts, strict=True):
            running += count
            out.append((label, float(running)))
        return out
