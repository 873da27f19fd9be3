"""Metrics on/off A/B: what ``--metrics-listen`` costs the /v1 path.

Starts ``bench/upstream.py`` once, then alternates fresh ``twistd -n lockgate`` processes with
and without ``--metrics-listen`` (off, on, on, off, off, on, ... so that drift in the machine's
load hits both sides alike), each pinned with every thread to CPU 0 (``taskset -a``), provisioned
through the console like ``run.py``, warmed up, then driven with non-streamed chat completions
by 32 persistent connections.  Per run: req/s and the gateway's CPU ms per request (from
/proc; this barely moves when other processes share the machine).  The "on" runs are scraped
once at the end to show the counters really moved.

    .venv/bin/python bench/metrics_ab.py [--runs 3] [--duration 8] [--warmup 2]
"""

from __future__ import annotations

import argparse
import asyncio
import http.client
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from load import build_request, closed_loop
from provision import provision
from run import MODELS, chat_body, cpu_seconds, free_port, raise_fd_limit, wait_http

HERE = Path(__file__).resolve().parent


def start_gateway(tmp: Path, port: int, metrics_port: int | None) -> subprocess.Popen[bytes]:
    twistd = Path(sys.executable).parent / "twistd"
    command = ["taskset", "-a", "-c", "0", str(twistd), "-n", "--pidfile=", "-l",
               str(tmp / "twistd.log"), "lockgate",
               "--listen", f"tcp:{port}:interface=127.0.0.1",
               "--database", f"sqlite:///{tmp / 'bench.sqlite3'}",
               "--secret-file", str(tmp / "secret"), "--access-log", str(tmp / "access.log")]
    if metrics_port is not None:
        command += ["--metrics-listen", f"tcp:{metrics_port}:interface=127.0.0.1"]
    return subprocess.Popen(command, cwd=str(tmp), stdout=subprocess.DEVNULL,  # noqa: S603
                            stderr=open(tmp / "twistd.stderr", "wb"))


def scrape_requests(port: int) -> float:
    """Sum of lockgate_http_requests_total{family="chat"} on the metrics listener."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    conn.request("GET", "/metrics")
    text = conn.getresponse().read().decode()
    conn.close()
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
               if line.startswith("lockgate_http_requests_total{") and 'family="chat"' in line)


async def one_run(metrics: bool, up_port: int, args: argparse.Namespace) -> dict[str, Any]:
    tmp = Path(tempfile.mkdtemp(prefix="lockgate-ab-"))
    port = free_port()
    metrics_port = free_port() if metrics else None
    gateway = start_gateway(tmp, port, metrics_port)
    try:
        if not wait_http(port, "/healthz", 30):
            raise SystemExit(f"gateway did not start; see {tmp}")
        key, _ = provision("127.0.0.1", port, f"http://127.0.0.1:{up_port}", MODELS)
        request = build_request("127.0.0.1", port, "/v1/chat/completions",
                                chat_body("bench-json", False), key)
        await closed_loop("127.0.0.1", port, request, 32, args.warmup)
        before = cpu_seconds(gateway.pid)
        result = await closed_loop("127.0.0.1", port, request, 32, args.duration)
        after = cpu_seconds(gateway.pid)
        assert before is not None and after is not None
        out: dict[str, Any] = {
            "metrics": metrics, "req_per_s": round(result.rate, 1), "errors": result.errors,
            "cpu_ms_per_req": round((after - before) * 1000 / max(1, result.requests), 4)}
        if metrics_port is not None:
            out["scraped_chat_requests"] = scrape_requests(metrics_port)
        return out
    finally:
        gateway.terminate()
        try:
            gateway.wait(30)
        except subprocess.TimeoutExpired:
            gateway.kill()
        shutil.rmtree(tmp, ignore_errors=True)


async def main_async(args: argparse.Namespace) -> None:
    raise_fd_limit()
    cpus = os.cpu_count() or 1
    if cpus > 1:
        os.sched_setaffinity(0, set(range(1, cpus)))  # driver and upstream off the gateway CPU
    up_port = free_port()
    upstream = subprocess.Popen(  # noqa: S603
        [sys.executable, str(HERE / "upstream.py"), "--port", str(up_port)],
        stdout=subprocess.DEVNULL)
    try:
        if not wait_http(up_port, "/v1/models", 15):
            raise SystemExit("bench upstream did not start")
        order = []
        for i in range(args.runs):
            order += [False, True] if i % 2 == 0 else [True, False]
        runs = []
        for metrics in order:
            run = await one_run(metrics, up_port, args)
            print(run, flush=True)
            runs.append(run)
        for side in (False, True):
            mine = [r for r in runs if r["metrics"] is side]
            print(f"metrics {'on ' if side else 'off'}: req/s "
                  f"{[r['req_per_s'] for r in mine]} median "
                  f"{statistics.median(r['req_per_s'] for r in mine):.1f}; CPU ms/req "
                  f"{[r['cpu_ms_per_req'] for r in mine]} median "
                  f"{statistics.median(r['cpu_ms_per_req'] for r in mine):.4f}")
        off = statistics.median(r["req_per_s"] for r in runs if not r["metrics"])
        on = statistics.median(r["req_per_s"] for r in runs if r["metrics"])
        cpu_off = statistics.median(r["cpu_ms_per_req"] for r in runs if not r["metrics"])
        cpu_on = statistics.median(r["cpu_ms_per_req"] for r in runs if r["metrics"])
        print(f"req/s change with metrics on: {100 * (on - off) / off:+.2f} %; "
              f"CPU per request: {100 * (cpu_on - cpu_off) / cpu_off:+.2f} %")
    finally:
        upstream.terminate()
        upstream.wait(10)


def main() -> None:
    parser = argparse.ArgumentParser(description="metrics on/off A/B at c=32")
    parser.add_argument("--runs", type=int, default=3, help="runs per side (>= 2)")
    parser.add_argument("--duration", type=float, default=8.0, help="measured seconds per run")
    parser.add_argument("--warmup", type=float, default=2.0)
    asyncio.run(main_async(parser.parse_args()))


if __name__ == "__main__":
    main()
