"""``--workers``: requests per second at concurrency 64 through 1 and 2 worker processes.

Issue 22 goal 1 (2 workers >= 1.7x one process on this 2-core machine, the load driver and the
upstream sharing it).  For each round this starts ``bench/upstream.py`` once, then alternates
``twistd -n lockgate --workers 1`` and ``--workers 2`` (each on a fresh SQLite file, no Redis,
provisioned through the console API as ``bench/run.py`` does, the access log to a file), and
runs the same closed loop against each: 64 persistent connections sending non-streaming chat
calls back to back.  Nothing is pinned: the point is to use every core.

The driver is ``wrk`` when it is installed (``bench/wrk_driver.py``: a few microseconds of CPU
per request, where the Python closed loop of ``bench/load.py`` costs a tenth of a millisecond
or more -- a large share of the second core that ``--workers 2`` needs), else
``load.closed_loop``; ``--driver`` picks one.

Figures: req/s per run, CPU ms per request summed over the gateway's process tree (supervisor,
workers, their threads), of the supervisor alone, of the driver and of the upstream; each
process's share of the machine's CPU time during the run; requests served by each worker (from
its own ``/metrics``: the accept balance of the ``SO_REUSEPORT`` sockets); the ratio of each
2-worker run to the 1-worker run of the same round, and min-max over the rounds.  Absolute
numbers move up to 2x on this VM minute to minute; quote the ratios.

    .venv/bin/python bench/workers.py [--rounds 2] [--duration 10] [--concurrency 64]
                                      [--driver auto|wrk|load]
"""

from __future__ import annotations

import argparse
import asyncio
import http.client
import json
import os
import resource
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import wrk_driver
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


def children(pid: int) -> list[int]:
    """The direct children of ``pid`` (a supervisor's workers), oldest first."""
    found: list[int] = []
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return found
    for task in tasks:
        try:
            with open(f"/proc/{pid}/task/{task}/children") as listed:
                found.extend(int(child) for child in listed.read().split())
        except OSError:
            pass
    return sorted(found)


def start_gateway(tmp: Path, port: int, workers: int, metrics_port: int,
                  tree: str = "") -> subprocess.Popen[bytes]:
    """``tree``: run the Lockgate of another source tree (first on ``PYTHONPATH``)."""
    environ = dict(os.environ)
    if tree:
        environ["PYTHONPATH"] = os.pathsep.join(
            [tree, *filter(None, [os.environ.get("PYTHONPATH", "")])])
    twistd = Path(sys.executable).parent / "twistd"
    command = [str(twistd), "-n", "--pidfile=", "-l", str(tmp / "twistd.log"), "lockgate",
               "--listen", f"tcp:{port}:interface=127.0.0.1",
               "--database", f"sqlite:///{tmp / 'bench.sqlite3'}",
               "--secret-file", str(tmp / "secret"), "--access-log", str(tmp / "access.log"),
               "--metrics-listen", f"tcp:{metrics_port}:interface=127.0.0.1",
               "--workers", str(workers)]
    return subprocess.Popen(command, cwd=str(tmp), stdout=subprocess.DEVNULL,  # noqa: S603
                            stderr=open(tmp / "twistd.stderr", "wb"), env=environ)


def wait_workers(port: int, workers: int, seconds: float) -> bool:
    """Every worker answers (``Lockgate-Worker`` headers of fresh connections)."""
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


def metrics_port_free(count: int) -> int:
    """A port p with p .. p + count - 1 free (worker i serves its metrics on p + i)."""
    for _ in range(50):
        port = free_port()
        if port + count > 65535:
            continue
        try:
            for offset in range(1, count):
                with socket.socket() as sock:
                    sock.bind(("127.0.0.1", port + offset))
        except OSError:
            continue
        return port
    raise SystemExit("no run of free ports for the workers' metrics")


def served_requests(port: int) -> int | None:
    """``lockgate_http_requests_total`` summed over its labels, from one process's metrics."""
    try:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
        conn.request("GET", "/metrics")
        text = conn.getresponse().read().decode()
        conn.close()
    except OSError:
        return None
    return int(sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
                   if line.startswith("lockgate_http_requests_total{")))


def per_worker_served(metrics_port: int, workers: int) -> list[int | None]:
    return [served_requests(metrics_port + index) for index in range(workers)]


def self_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def machine_cpu() -> float:
    """CPU seconds every core of the machine spent busy (non-idle) so far, from /proc/stat."""
    with open("/proc/stat") as stat:
        fields = [int(value) for value in stat.readline().split()[1:]]
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)
    return (sum(fields[:8]) - idle) / os.sysconf("SC_CLK_TCK")


def use_wrk(driver: str) -> bool:
    if driver == "wrk" and not wrk_driver.available():
        raise SystemExit("--driver wrk: wrk is not installed (apt-get install wrk)")
    return driver == "wrk" or (driver == "auto" and wrk_driver.available())


async def drive(port: int, key: str, body: bytes, seconds: float,
                args: argparse.Namespace) -> tuple[int, float, int, str, float]:
    """(requests, seconds, errors, first error, driver CPU seconds) of one closed loop."""
    if use_wrk(args.driver):
        result = wrk_driver.closed_loop(f"http://127.0.0.1:{port}/v1/chat/completions",
                                        body, key, args.concurrency, seconds)
        first = "" if not result.errors else result.output[-300:]
        return result.requests, result.seconds, result.errors, first, result.cpu_seconds
    request = build_request("127.0.0.1", port, "/v1/chat/completions", body, key)
    before = self_cpu()
    loop = await closed_loop("127.0.0.1", port, request, args.concurrency, seconds)
    return loop.requests, loop.seconds, loop.errors, loop.first_error, self_cpu() - before


def per_request_ms(seconds: float, requests: int) -> float:
    return round(seconds * 1000 / max(1, requests), 3)


async def one_run(workers: int, upstream: subprocess.Popen[bytes], up_port: int,
                  args: argparse.Namespace, tree: str = "") -> dict[str, Any]:
    tmp = Path(tempfile.mkdtemp(prefix="lockgate-bench-workers-"))
    port = free_port()
    metrics_port = metrics_port_free(workers)
    gateway = start_gateway(tmp, port, workers, metrics_port, tree)
    try:
        if not wait_http(port, "/healthz", 180) or not wait_workers(port, workers, 120):
            raise SystemExit(f"gateway with {workers} workers did not start: see {tmp}")
        key, _ = provision("127.0.0.1", port, f"http://127.0.0.1:{up_port}", MODELS)
        body = chat_body("bench-json", False)
        await drive(port, key, body, 2.0, args)  # warm up
        served_before = per_worker_served(metrics_port, workers)
        worker_pids = children(gateway.pid) if workers > 1 else [gateway.pid]
        workers_before = [tree_cpu(pid) for pid in worker_pids]
        cpu_before, root_before = tree_cpu(gateway.pid), cpu_seconds(gateway.pid) or 0.0
        up_before = cpu_seconds(upstream.pid) or 0.0
        machine_before, wall_before = machine_cpu(), time.monotonic()
        requests, seconds, errors, first_error, driver_cpu = await drive(
            port, key, body, args.duration, args)
        wall = time.monotonic() - wall_before
        machine = machine_cpu() - machine_before
        cpu = tree_cpu(gateway.pid) - cpu_before
        root = (cpu_seconds(gateway.pid) or 0.0) - root_before
        up = (cpu_seconds(upstream.pid) or 0.0) - up_before
        per_worker_cpu = [tree_cpu(pid) - before
                          for pid, before in zip(worker_pids, workers_before, strict=True)]
        served_after = per_worker_served(metrics_port, workers)
        served = [None if before is None or after is None else after - before
                  for before, after in zip(served_before, served_after, strict=True)]
        rps = requests / seconds if seconds else 0.0
        capacity = wall * (os.cpu_count() or 1)
        return {"workers": workers, "rps": round(rps, 1), "errors": errors,
                "cpu_ms_per_request": per_request_ms(cpu, requests),
                # --workers 2: the supervisor's share (the state hub); 1: the whole process
                "supervisor_cpu_ms_per_request": per_request_ms(root, requests),
                "driver": "wrk" if use_wrk(args.driver) else "load.py",
                "driver_cpu_ms_per_request": per_request_ms(driver_cpu, requests),
                "upstream_cpu_ms_per_request": per_request_ms(up, requests),
                # share of the machine's CPU time (all cores) during the run
                "cpu_share": {"gateway": round(cpu / capacity, 3),
                              "driver": round(driver_cpu / capacity, 3),
                              "upstream": round(up / capacity, 3),
                              "other": round(max(0.0, machine - cpu - driver_cpu - up)
                                             / capacity, 3),
                              "idle": round(max(0.0, capacity - machine) / capacity, 3)},
                "served_per_worker": served,
                # CPU seconds of each worker process (by pid order, not worker index)
                "cpu_s_per_worker": [round(value, 2) for value in per_worker_cpu],
                "first_error": first_error[:200]}
    finally:
        gateway.terminate()
        try:
            gateway.wait(60)
        except subprocess.TimeoutExpired:
            gateway.kill()
        if not args.keep:
            shutil.rmtree(tmp, ignore_errors=True)


def cpu_bound_ratio(one: dict[str, Any], two: dict[str, Any]) -> float | None:
    """What the CPU figures of a round predict for an otherwise idle machine, not a
    measurement: one process is saturated on the cores it used (``c1`` = its CPU share x the
    cores; at least 1: a starved run would inflate the estimate), two workers share every core
    with the driver and the upstream: (cores / (L2 + D + U)) / (c1 / L1), L in CPU ms per
    request.  Printed beside the measured ratio because a busy machine (a large ``other``
    share) skews the measured one -- it hands two processes more of its contended CPU."""
    cores = os.cpu_count() or 1
    shared = (two["cpu_ms_per_request"] + two["driver_cpu_ms_per_request"]
              + two["upstream_cpu_ms_per_request"])
    if not shared or not one["cpu_ms_per_request"]:
        return None
    used_by_one = max(1.0, one["cpu_share"]["gateway"] * cores)
    return round(cores * one["cpu_ms_per_request"] / shared / used_by_one, 3)


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
            # columns: 1 worker, 2 workers (and 2 workers of --compare-tree), alternating
            columns: list[tuple[str, int, str]] = [("one", 1, ""), ("two", 2, "")]
            if args.compare_tree:
                columns.append(("two_compared", 2, args.compare_tree))
            if number % 2:
                columns.reverse()
            runs: dict[str, dict[str, Any]] = {}
            for name, workers, tree in columns:
                print(f"round {number + 1}: --workers {workers}{' of ' + tree if tree else ''}"
                      f", c={args.concurrency}, {args.duration:g} s", flush=True)
                runs[name] = await one_run(workers, upstream, up_port, args, tree)
                print(f"  {runs[name]}", flush=True)
            one = runs["one"]["rps"]
            ratio = runs["two"]["rps"] / one if one else None
            rounds.append({**runs, "ratio": None if ratio is None else round(ratio, 3),
                           "cpu_bound_ratio": cpu_bound_ratio(runs["one"], runs["two"])})
            if args.compare_tree:
                rounds[-1]["ratio_compared"] = round(
                    runs["two_compared"]["rps"] / one, 3) if one else None
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
    parser.add_argument("--driver", choices=("auto", "wrk", "load"), default="auto",
                        help="wrk when installed (auto), or the Python closed loop")
    parser.add_argument("--compare-tree", default="",
                        help="also run --workers 2 of this source tree (a checkout of another "
                             "commit): a before/after column in the same rounds")
    parser.add_argument("--keep", action="store_true", help="keep the temp directories")
    parser.add_argument("--out", default=os.path.join(tempfile.gettempdir(),
                                                      "lockgate-bench-workers.json"))
    args = parser.parse_args()
    results = asyncio.run(main_async(args))
    print(f"\n{'round':<6}{'1 worker req/s':>16}{'2 workers req/s':>17}{'ratio':>8}"
          f"{'CPU ms/req 1w':>15}{'CPU ms/req 2w':>15}{'CPU-bound estimate':>20}")
    for number, r in enumerate(results["rounds"], 1):
        print(f"{number:<6}{r['one']['rps']:>16}{r['two']['rps']:>17}{r['ratio']:>8}"
              f"{r['one']['cpu_ms_per_request']:>15}{r['two']['cpu_ms_per_request']:>15}"
              f"{r['cpu_bound_ratio']!s:>20}")
    print(f"\n{'round':<6}{'workers':>8}{'driver':>9}{'driver ms/req':>14}"
          f"{'upstream ms/req':>16}{'supervisor ms/req':>18}  CPU share / served per worker")
    for number, r in enumerate(results["rounds"], 1):
        if "ratio_compared" in r:
            print(f"round {number}: --compare-tree 2 workers / 1 worker: "
                  f"{r['ratio_compared']} ({r['two_compared']['rps']} req/s, "
                  f"{r['two_compared']['cpu_ms_per_request']} CPU ms/req, supervisor "
                  f"{r['two_compared']['supervisor_cpu_ms_per_request']})")
    for number, r in enumerate(results["rounds"], 1):
        for run in (r["one"], r["two"], *([r["two_compared"]] if "two_compared" in r else [])):
            print(f"{number:<6}{run['workers']:>8}{run['driver']:>9}"
                  f"{run['driver_cpu_ms_per_request']:>14}"
                  f"{run['upstream_cpu_ms_per_request']:>16}"
                  f"{run['supervisor_cpu_ms_per_request']:>18}  {run['cpu_share']} "
                  f"served {run['served_per_worker']} CPU s {run['cpu_s_per_worker']}")
    print(f"ratio 2 workers / 1 worker: {results['ratio_min']} - {results['ratio_max']}")
    Path(args.out).write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
