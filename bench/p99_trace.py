"""Why the slow c=1 requests are slow: Lockgate's latency trace, slowest 1 % against the median.

Starts ``bench/upstream.py`` and ``twistd -n lockgate`` the way ``bench/run.py`` does (every
thread of the gateway pinned to CPU 0, the driver and the upstream on the others) with
``LOCKGATE_LATENCY_TRACE`` set (``tap/latency_trace.py``), runs one client at a time for
``--duration`` seconds, stops the gateway (which writes the trace) and compares the slowest
1 % of requests (by the client's latency) with the median ones (45th-55th percentile):

- each step of the call (authenticated, reserved, upstream sent, response head, answered,
  settlement queued), the time outside the call (client, kernel, HTTP parsing, the reactor's
  other work before the call object exists) and the reactor thread's CPU time in the call;
- what else ran during the request (from the previous request's answer to this one's):
  database transactions (wall, and the database thread's CPU), timers and thread results the
  reactor ran, garbage collections, access-log flushes -- how often, and for how long.

    .venv/bin/python bench/p99_trace.py [--duration 20] [--before REV] [--out FILE]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from load import build_request, closed_loop
from provision import provision
from run import MODELS, chat_body, free_port, pin_all_threads, start_gateway, wait_http

HERE = Path(__file__).resolve().parent
ENV = "LOCKGATE_LATENCY_TRACE"
#: (label, from step, to step) of the call's own time
SPANS = (("auth + global limit", "created", "authenticated"),
         ("parse, route, reserve", "authenticated", "reserved"),
         ("translate, to upstream", "reserved", "upstream_sent"),
         ("upstream to head", "upstream_sent", "response_head"),
         ("body, answer", "response_head", "answered"),
         ("queue settlement", "answered", "settlement_queued"))


def overlap(a0: float, a1: float, b0: float, b1: float) -> float:
    return max(0.0, min(a1, b1) - max(a0, b0))


def request_rows(trace: dict[str, Any], latencies: Sequence[float]) -> list[dict[str, Any]]:
    """One row per measured request: the client's latency joined with the server's marks
    (c=1: the i-th of the last ``len(latencies)`` calls is the i-th request), plus what else
    ran from the previous call's end to this call's answer."""
    calls = [c for c in trace["calls"] if "answered" in c["marks"]]
    calls = calls[-len(latencies):]
    latencies = latencies[-len(calls):]
    events = sorted(trace["events"], key=lambda e: e[2])
    rows: list[dict[str, Any]] = []
    previous_end: float | None = None
    cursor = 0
    for latency, call in zip(latencies, calls, strict=True):
        marks = {step: tuple(value) for step, value in call["marks"].items()}
        created, answered = marks["created"][0], marks["answered"][0]
        window_start = previous_end if previous_end is not None else created - 0.002
        row: dict[str, Any] = {"latency": latency, "inside": answered - created,
                               "outside": latency - (answered - created),
                               "reactor_cpu": marks["answered"][1] - marks["created"][1]}
        if len(marks["created"]) > 2 and len(marks["answered"]) > 2:
            # the kernel's view of the reactor thread: runnable but not running, and how
            # often it slept (epoll waits, and any wait for the GIL)
            row["reactor_runqueue_wait"] = marks["answered"][2] - marks["created"][2]
            row["reactor_sleeps"] = (marks["answered"][3] - marks["created"][3]) / 1000
        for label, start, end in SPANS:
            if start in marks and end in marks:
                row[label] = marks[end][0] - marks[start][0]
        while cursor < len(events) and events[cursor][2] + events[cursor][3] < window_start - 1:
            cursor += 1
        tallies: dict[str, list[float]] = {}
        for kind, name, start, duration, cpu in events[cursor:]:
            if start > answered:
                break
            shared = overlap(window_start, answered, start, start + duration)
            if shared <= 0:
                continue
            key = kind if kind != "timer" else f"timer {name.rsplit('.', 1)[-1]}"
            tally = tallies.setdefault(key, [0, 0.0, 0.0])
            tally[0] += 1
            tally[1] += shared
            tally[2] += (cpu or 0.0) * shared / duration if cpu is not None else 0.0
        row["others"] = tallies
        rows.append(row)
        previous_end = marks.get("settlement_queued", marks["answered"])[0]
    return rows


def compare(rows: list[dict[str, Any]]) -> str:
    """The slowest 1 % against the 45th-55th percentile, one line per figure (ms)."""
    ordered = sorted(rows, key=lambda r: r["latency"])
    n = len(ordered)
    slow = ordered[max(0, n - max(1, n // 100)):]
    middle = ordered[int(n * 0.45):max(int(n * 0.55), int(n * 0.45) + 1)]

    def mean(group: list[dict[str, Any]], key: str) -> float:
        return statistics.fmean(r.get(key, 0.0) for r in group) * 1000

    lines = [f"{n} requests; slowest 1 % = {len(slow)} requests, median group = {len(middle)}",
             f"{'figure (ms, mean per request)':44} {'median':>9} {'slowest 1%':>11}"]
    for key in ("latency", "outside", "inside", *(label for label, _, _ in SPANS),
                "reactor_cpu", "reactor_runqueue_wait", "reactor_sleeps"):
        lines.append(f"{key:44} {mean(middle, key):9.3f} {mean(slow, key):11.3f}")
    kinds = sorted({k for r in rows for k in r["others"]})

    def other(group: list[dict[str, Any]], kind: str, index: int) -> float:
        total = sum(r["others"].get(kind, [0, 0.0, 0.0])[index] for r in group)
        return total / len(group) * (1000 if index else 1)

    lines.append(f"{'meanwhile (count | ms overlapping the request)':44}")
    for kind in kinds:
        if max(other(slow, kind, 1), other(middle, kind, 1)) < 0.005:
            continue
        cpu = (f"  (db thread CPU {other(middle, kind, 2):.3f} | {other(slow, kind, 2):.3f})"
               if kind == "transaction" else "")
        lines.append(f"  {kind[:42]:42} {other(middle, kind, 0):4.2f}|{other(middle, kind, 1):5.3f}"
                     f" {other(slow, kind, 0):4.2f}|{other(slow, kind, 1):6.3f}{cpu}")
    return "\n".join(lines)


def event_summary(trace: dict[str, Any]) -> str:
    """Every kind of event over the whole run: count, total, p50, max (ms)."""
    by: dict[str, list[float]] = {}
    for kind, name, _start, duration, _cpu in trace["events"]:
        by.setdefault(f"{kind} {name}", []).append(duration * 1000)
    lines = [f"{'event (kept: >= 20 µs)':70} {'count':>6} {'total':>8} {'p50':>7} {'max':>7}"]
    for name, values in sorted(by.items(), key=lambda kv: -sum(kv[1]))[:25]:
        values.sort()
        lines.append(f"{name[-70:]:70} {len(values):6} {sum(values):8.1f} "
                     f"{values[len(values) // 2]:7.3f} {values[-1]:7.3f}")
    return "\n".join(lines)


async def measure(args: argparse.Namespace, tmp: Path) -> tuple[dict[str, Any], list[float]]:
    up_port, gw_port = free_port(), free_port()
    upstream = subprocess.Popen(  # noqa: S603
        [sys.executable, str(HERE / "upstream.py"), "--port", str(up_port)],
        stdout=subprocess.DEVNULL)
    trace_path = tmp / "trace.json"
    os.environ[ENV] = str(trace_path)
    gateway = start_gateway(tmp, gw_port, "0" if (os.cpu_count() or 1) > 1 else None, None)
    del os.environ[ENV]
    try:
        if not (wait_http(up_port, "/v1/models", 15) and wait_http(gw_port, "/healthz", 120)):
            raise SystemExit(f"did not start; see {tmp}")
        pin_all_threads(gateway.pid, "0" if (os.cpu_count() or 1) > 1 else None)
        key, _ = provision("127.0.0.1", gw_port, f"http://127.0.0.1:{up_port}", MODELS,
                           limits=True)
        request = build_request("127.0.0.1", gw_port, "/v1/chat/completions",
                                chat_body("bench-json", False), key)
        await closed_loop("127.0.0.1", gw_port, request, 1, args.warmup)
        result = await closed_loop("127.0.0.1", gw_port, request, 1, args.duration)
    finally:
        gateway.terminate()
        gateway.wait(60)
        upstream.terminate()
        upstream.wait(10)
    return json.loads(trace_path.read_text()), list(result.latencies)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--duration", type=float, default=20.0)
    parser.add_argument("--warmup", type=float, default=3.0)
    parser.add_argument("--out", help="also write the joined rows here (JSON)")
    parser.add_argument("--garbage", action="store_true",
                        help="also count the cyclic garbage the collector found, by type "
                             "(the gateway keeps it all: a short run)")
    args = parser.parse_args()
    if args.garbage:
        os.environ["LOCKGATE_LATENCY_TRACE_GARBAGE"] = "1"
    if (os.cpu_count() or 1) > 1:
        os.sched_setaffinity(0, set(range(1, os.cpu_count() or 2)))
    tmp = Path(tempfile.mkdtemp(prefix="lockgate-p99-trace-"))
    try:
        trace, latencies = asyncio.run(measure(args, tmp))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    rows = request_rows(trace, latencies)
    ordered = sorted(r["latency"] for r in rows)
    print(f"client latency p50 {ordered[len(ordered) // 2] * 1000:.3f} ms, "
          f"p99 {ordered[int(len(ordered) * 0.99)] * 1000:.3f} ms")
    print(compare(rows))
    print()
    print(event_summary(trace))
    if trace.get("cyclic_garbage"):
        print("\ncyclic garbage by type (objects kept by gc.DEBUG_SAVEALL):")
        for name, count in trace["cyclic_garbage"].items():
            print(f"  {count:8}  {name}")
    if args.out:
        Path(args.out).write_text(json.dumps({"rows": rows, "short": trace["short"]}))


if __name__ == "__main__":
    main()
