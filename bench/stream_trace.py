"""Where a burst of stream starts spends its time: Lockgate's stream start trace, per stream.

Starts ``bench/upstream.py`` and ``twistd -n lockgate`` the way ``bench/run.py`` does (every
thread of the gateway pinned to CPU 0, the driver and the upstream on the others) with
``LOCKGATE_STREAM_TRACE`` set (``tap/stream_start_trace.py``), warms up with a few streams,
sends ``--streams`` streaming requests at once on pre-opened connections, stops the gateway
(which writes the trace) and prints, from the burst's first request read (ms) and in reactor
turns: when the requests were read, started and done starting, when the upstream connects
began, the upstream requests were written and the upstream heads came back, and when each
stream's first byte went out.  With several ``--per-turn`` values it does this once per
value (``LOCKGATE_DISPATCH_PER_TURN``; 0 = no budget, every start in the turn that read it).

    .venv/bin/python bench/stream_trace.py [--streams 500] [--per-turn 0 8]

(``--per-turn 0`` is the code before the budget, as far as starts go.)
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from load import build_request, percentile, streams
from provision import provision
from run import (
    MODELS,
    chat_body,
    free_port,
    pin_all_threads,
    raise_fd_limit,
    start_gateway,
    wait_http,
)

HERE = Path(__file__).resolve().parent
ENV = "LOCKGATE_STREAM_TRACE"


def spread(values: list[float]) -> str:
    if not values:
        return "-"
    return (f"{min(values):7.1f} {percentile(values, 50) or 0:7.1f} "
            f"{percentile(values, 99) or 0:7.1f} {max(values):7.1f}")


def summary(trace: dict[str, Any], count: int, client_ttfb: list[float]) -> str:
    """The burst (the last ``count`` requests read), from its first read, in ms and turns."""
    burst = sorted(trace["requests"], key=lambda m: m["received"][0])[-count:]
    t0 = min(m["received"][0] for m in burst)
    turn0 = min(m["received"][1] for m in burst)
    lines = [f"{'mark (ms after the first request read)':44} {'min':>7} {'p50':>7} "
             f"{'p99':>7} {'max':>7}  turns"]
    for step in ("received", "dispatched", "start_done", "first_byte"):
        marks = [m[step] for m in burst if step in m]
        turns = sorted({turn for _, turn in marks})
        lines.append(f"{step:44} {spread([(t - t0) * 1000 for t, _ in marks])}  "
                     f"{len(turns)} ({turns[0] - turn0 if turns else '-'}"
                     f"..{turns[-1] - turn0 if turns else '-'})")
    starts = [(m["start_done"][0] - m["dispatched"][0]) * 1000 for m in burst
              if "start_done" in m and "dispatched" in m]
    lines.append(f"{'  one start (dispatched -> start_done)':44} {spread(starts)}")
    for kind in ("connect", "written", "head"):
        events = [(t, turn) for k, t, turn in trace["upstream"] if k == kind and t >= t0]
        turns = sorted({turn for _, turn in events})
        lines.append(f"{'upstream ' + kind + f' ({len(events)})':44} "
                     f"{spread([(t - t0) * 1000 for t, _ in events])}  "
                     f"{len(turns)} ({turns[0] - turn0 if turns else '-'}"
                     f"..{turns[-1] - turn0 if turns else '-'})")
    lines.append(f"{'client TTFB (from its own send)':44} {spread(client_ttfb)}")
    turn_starts = trace.get("turn_starts") or []
    last = max(m["first_byte"][1] for m in burst if "first_byte" in m)
    walls, cpus = [], []
    for (wall, cpu), (next_wall, next_cpu) in zip(turn_starts[turn0 - 1:last],
                                                  turn_starts[turn0:last + 1], strict=False):
        walls.append((next_wall - wall) * 1000)
        cpus.append((next_cpu - cpu) * 1000)
    lines.append(f"{'turns until the last first byte: wall ms':44} {spread(walls)}  "
                 f"sum {sum(walls):.0f}")
    lines.append(f"{'  reactor thread CPU ms':44} {spread(cpus)}  sum {sum(cpus):.0f}")
    return "\n".join(lines)


async def run_once(args: argparse.Namespace, tmp: Path, per_turn: str | None,
                   source: Path | None) -> tuple[dict[str, Any], list[float]]:
    up_port, gw_port = free_port(), free_port()
    upstream = subprocess.Popen(  # noqa: S603
        [sys.executable, str(HERE / "upstream.py"), "--port", str(up_port)],
        stdout=subprocess.DEVNULL)
    trace_path = tmp / "trace.json"
    os.environ[ENV] = str(trace_path)
    if per_turn is not None:
        os.environ["LOCKGATE_DISPATCH_PER_TURN"] = per_turn
    cpu = "0" if (os.cpu_count() or 1) > 1 else None
    gateway = start_gateway(tmp, gw_port, cpu, None, source=source)
    del os.environ[ENV]
    os.environ.pop("LOCKGATE_DISPATCH_PER_TURN", None)
    try:
        if not (wait_http(up_port, "/v1/models", 15) and wait_http(gw_port, "/healthz", 120)):
            raise SystemExit(f"did not start; see {tmp}")
        pin_all_threads(gateway.pid, cpu)
        key, _ = provision("127.0.0.1", gw_port, f"http://127.0.0.1:{up_port}", MODELS,
                           limits=True)
        request = build_request("127.0.0.1", gw_port, "/v1/chat/completions",
                                chat_body("bench-stream", True), key)
        await streams("127.0.0.1", gw_port, request, 20)  # warm-up
        result = await streams("127.0.0.1", gw_port, request, args.streams,
                               running=args.running_streams)
    finally:
        gateway.terminate()
        gateway.wait(60)
        upstream.terminate()
        upstream.wait(10)
    print(f"  completed {result.completed}, errors {result.errors} {result.first_error[:100]}; "
          f"{ {k: v for k, v in result.extra.items()} }")
    return json.loads(trace_path.read_text()), [t * 1000 for t in result.ttfb]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--streams", type=int, default=500)
    parser.add_argument("--running-streams", type=int, default=0)
    parser.add_argument("--per-turn", nargs="*", default=[], metavar="N",
                        help="dispatch budgets to trace, one gateway each (default: its "
                             "own; 0: none)")
    args = parser.parse_args()
    raise_fd_limit(2 * (args.streams + args.running_streams) + 4096)
    if (os.cpu_count() or 1) > 1:
        os.sched_setaffinity(0, set(range(1, os.cpu_count() or 2)))
    sides: list[tuple[str, str | None, Path | None]] = [
        (f"per turn {n}" if n != "0" else "no budget", n, None) for n in args.per_turn] or [
        ("this tree", None, None)]
    for label, per_turn, source in sides:
        tmp = Path(tempfile.mkdtemp(prefix="lockgate-stream-trace-"))
        print(f"{label}: {args.streams} streams at once", flush=True)
        try:
            trace, ttfb = asyncio.run(run_once(args, tmp, per_turn, source))
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        print(summary(trace, args.streams, ttfb))
        print()


if __name__ == "__main__":
    main()
