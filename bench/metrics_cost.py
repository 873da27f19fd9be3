"""What the metrics add to one /v1 request, timed piece by piece in one process.

A loaded machine makes the A/B of ``metrics_ab.py`` noisy; this counts the same work directly:
the calls a metered non-streamed chat completion makes (request counted and timed by the site,
one upstream attempt with its time to first byte, one settlement in the group commit), with
the real ``GatewayMetrics`` and a real ``Deferred`` for the site's finish notification.

    .venv/bin/python bench/metrics_cost.py [--n 200000]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from twisted.internet.defer import Deferred

from gateway.observability.metrics import GatewayMetrics


def per_call_us(fn: object, n: int) -> float:
    start = time.process_time()
    fn(n)  # type: ignore[operator]
    return (time.process_time() - start) * 1e6 / n


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=200_000)
    n = parser.parse_args().n
    metrics = GatewayMetrics(version="dev", known_model={"gpt-4o"}.__contains__)
    row = {"input_tokens": 12, "output_tokens": 30, "cached_input_tokens": 0}
    path = b"/v1/chat/completions"
    clock = time.time

    def site(count: int) -> None:  # MeteredSite: a finish Deferred, two clock reads, count
        for _ in range(count):
            started = clock()
            d: Deferred[None] = Deferred()
            d.addBoth(lambda _r, s: metrics.request_finished(path, "gpt-4o", 200, clock() - s),
                      started)
            d.callback(None)

    def attempt(count: int) -> None:  # GatewayCall._attempt_began/_ended + TTFB
        for _ in range(count):
            started = clock()
            first = clock()
            metrics.first_byte(7, first - started)
            metrics.attempt(7, "ok")

    def settle(count: int) -> None:  # Settler: queued_at + one settled() per record
        for _ in range(count):
            queued = clock()
            metrics.settled("/v1/chat/completions", 200, 42_000, 42_000, row, False,
                            clock() - queued)

    def baseline(count: int) -> None:  # the loop and clock reads alone
        for _ in range(count):
            clock()
            clock()

    parts = {name: per_call_us(fn, n) for name, fn in
             (("site", site), ("attempt", attempt), ("settle", settle),
              ("loop baseline", baseline))}
    for name, us in parts.items():
        print(f"{name:14s} {us:6.2f} µs")
    total = parts["site"] + parts["attempt"] + parts["settle"] - 3 * parts["loop baseline"]
    print(f"per request   {total:6.2f} µs (loop overhead removed)")


if __name__ == "__main__":
    main()
