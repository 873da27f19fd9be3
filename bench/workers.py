"""``--workers``: requests per second at concurrency 64 through 1 and 2 worker processes.

Issue 22 goal 1 (2 workers >= 1.7x one process on this 2-core machine, the load driver and the
upstream sharing it).  For each round this starts ``bench/upstream.py`` once, then alternates
``twistd -n lockgate --workers 1`` and ``--workers 2`` (each on a fresh SQLite file, no Redis,
provisioned through the console API as ``bench/run.py`` does, the access log to a file), and
runs the same closed loop against each: 64 persistent connections sending non-streaming chat
calls back to back.  Nothing is pinned: the point is to use every core.

Figures: req/s per run, CPU ms per request summed over the gateway's process tree (supervisor,
workers, their threads), the ratio of each 2-worker run to the 1-worker run of the same round,
and min-max over the rounds.  Absolute numbers move up to 2x on this VM minute to minute;
quote the ratios.

    .venv/bin/python bench/workers.py [--rounds 2] [--duration 10] [--concurrency 64]
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
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from load import build_request, closed_loop
from provision import provision
from run import MODELS, chat_body, cpu_seconds, free_port, raise_fd_limit, wait_http

HERE = Path(__file__).resolve().parent


def process_tree(pid: int) -> list[int]:
    """``pid`` and every descendant (from /proc/<pid>/task/*/children)."""
    found, queue = [], [pid]
    while queue:
        current = queue.pop()
        found.append(current)
        try:
            tasks = os.listdir(f"/proc/{current}/task")
        except OSError:
            continue
        for task in tasks:
            try:
                with open(f"/proc/{current}/task/{task}/children") as children:
                    queue.extend(int(child) for child in children.read().split())
            except OSError:
                pass
    return found


def tree_cpu(pid: int) -> float:
    return sum(cpu_seconds(member) or 0.0 for member in process_tree(pid))


def start_gateway(tmp: Path, port: int, workers: int) -> subprocess.Popen[bytes]:
    twistd = Path(sys.executable).parent / "twistd"
    command = [str(twistd), "-n", "--pidfile=", "-l", str(tmp / "twistd.log"), "lockgate",
               "--listen", f"tcp:{port}:interface=127.0.0.1",
               "--database", f"sqlite:///{tmp / 'bench.sqlite3'}",
               "--secret-file", str(tmp / "secret"), "--access-log", str(tmp / "access.log"),
               "--workers", str(workers)]
    return subprocess.Popen(command, cwd=str(tmp), stdout=subprocess.DEVNULL,  # noqa: S603
                            stderr=open(tmp / "twistd.stderr", "wb"))


def wait_workers(port: int, workers: int, seconds: float) -> bool:
    """Every worker answers (``Lockgate-Worker`` headers of fresh connections)."""
    import http.client

    deadline = time.time() + seconds
    while time.time() < deadline:
        seen = set()
        for _ in range(8 * workers):
            try:
                conn = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
                conn.request("GET", "/readyz")
                response = conn.getresponse()
                response.read()
                seen.add(response.getheader("lockgate-worker") or "single")
                conn.close()
            except OSError:
                pass
        if len(seen) >= workers:
            return True
        time.sleep(0.5)
    return False


async def one_run(workers: int, up_port: int, args: argparse.Namespace) -> dict[str, Any]:
    tmp = Path(tempfile.mkdtemp(prefix="lockgate-bench-workers-"))
    port = free_port()
    gateway = start_gateway(tmp, port, workers)
    try:
        if not wait_http(port, "/healthz", 180) or not wait_workers(port, workers, 120):
            raise SystemExit(f"gateway with {workers} workers did not start: see {tmp}")
        key, _ = provision("127.0.0.1", port, f"http://127.0.0.1:{up_port}", MODELS)
        request = build_request("127.0.0.1", port, "/v1/chat/completions",
                                chat_body("bench-json", False), key)
        await closed_loop("127.0.0.1", port, request, args.concurrency, 2.0)  # warm up
        cpu_before, root_before = tree_cpu(gateway.pid), cpu_seconds(gateway.pid) or 0.0
        result = await closed_loop("127.0.0.1", port, request, args.concurrency,
                                   args.duration)
        cpu = tree_cpu(gateway.pid) - cpu_before
        root = (cpu_seconds(gateway.pid) or 0.0) - root_before
        rps = result.requests / result.seconds if result.seconds else 0.0
        return {"workers": workers, "rps": round(rps, 1), "errors": result.errors,
                "cpu_ms_per_request": round(cpu * 1000 / max(1, result.requests), 3),
                # --workers 2: the supervisor's share (the state hub); 1: the whole process
                "supervisor_cpu_ms_per_request": round(
                    root * 1000 / max(1, result.requests), 3),
                "first_error": result.first_error[:200]}
    finally:
        gateway.terminate()
        try:
            gateway.wait(60)
        except subprocess.TimeoutExpired:
            gateway.kill()
        if not args.keep:
            shutil.rmtree(tmp, ignore_errors=True)


async def main_async(args: argparse.Namespace) -> dict[str, Any]:
    raise_fd_limit()
    up_port = free_port()
    upstream = subprocess.Popen(  # noqa: S603
        [sys.executable, str(HERE / "upstream.py"), "--port", str(up_port)],
        stdout=subprocess.DEVNULL)
    rounds: list[dict[str, Any]] = []
    try:
        if not wait_http(up_port, "/v1/models", 15):
            raise SystemExit("bench upstream did not start")
        for number in range(args.rounds):
            order = (1, 2) if number % 2 == 0 else (2, 1)
            runs = {}
            for workers in order:
                print(f"round {number + 1}: --workers {workers}, c={args.concurrency}, "
                      f"{args.duration:g} s", flush=True)
                runs[workers] = await one_run(workers, up_port, args)
                print(f"  {runs[workers]}", flush=True)
            ratio = runs[2]["rps"] / runs[1]["rps"] if runs[1]["rps"] else None
            rounds.append({"one": runs[1], "two": runs[2],
                           "ratio": None if ratio is None else round(ratio, 3)})
    finally:
        upstream.terminate()
        upstream.wait(10)
    ratios = [r["ratio"] for r in rounds if r["ratio"] is not None]
    return {"cpus": os.cpu_count(), "concurrency": args.concurrency,
            "duration_s": args.duration, "rounds": rounds,
            "ratio_min": min(ratios) if ratios else None,
            "ratio_max": max(ratios) if ratios else None}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--duration", type=float, default=10.0)
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--keep", action="store_true", help="keep the temp directories")
    parser.add_argument("--out", default=os.path.join(tempfile.gettempdir(),
                                                      "lockgate-bench-workers.json"))
    args = parser.parse_args()
    results = asyncio.run(main_async(args))
    print(f"\n{'round':<6}{'1 worker req/s':>16}{'2 workers req/s':>17}{'ratio':>8}"
          f"{'CPU ms/req 1w':>15}{'CPU ms/req 2w':>15}")
    for number, r in enumerate(results["rounds"], 1):
        print(f"{number:<6}{r['one']['rps']:>16}{r['two']['rps']:>17}{r['ratio']:>8}"
              f"{r['one']['cpu_ms_per_request']:>15}{r['two']['cpu_ms_per_request']:>15}")
    print(f"ratio 2 workers / 1 worker: {results['ratio_min']} - {results['ratio_max']}")
    Path(args.out).write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
