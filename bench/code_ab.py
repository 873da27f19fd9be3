"""Code A/B: Lockgate's CPU per request at one commit against another, in alternating phases.

On this VM the CPU speed moves by up to 2x within minutes, so an optimisation is measured
against the code before it *in the same run*: one upstream, two ``twistd -n lockgate``
processes (A: a commit exported with ``git archive``, B: this checkout), both with every
thread pinned to CPU 0 (``taskset -a``) and provisioned like ``run.py`` (rate limits on), then
c=32 closed-loop phases alternating A B B A A B ... so that drift hits both sides.  Prints each
phase's CPU µs per request (``/proc/<pid>/stat``) and req/s, the medians and the change.
With ``--c1`` each phase is followed by a one-client phase of the same length on the same side,
and the c=1 latency is reported per phase (p50, p99) and pooled per side (issue 22, goal 3).

    .venv/bin/python bench/code_ab.py --before HEAD~1 [--phases 3] [--duration 5] [--c1]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from load import build_request, closed_loop, percentile
from provision import provision
from run import MODELS, chat_body, cpu_seconds, free_port, raise_fd_limit, wait_http

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent


def export(rev: str, into: Path) -> str:
    """``rev``'s tree under ``into`` (``git archive``); returns the commit's short hash."""
    commit = subprocess.run(["git", "rev-parse", "--short", rev], cwd=ROOT,  # noqa: S603, S607
                            capture_output=True, text=True, check=True).stdout.strip()
    archive = subprocess.run(["git", "archive", commit], cwd=ROOT,  # noqa: S603, S607
                             capture_output=True, check=True).stdout
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive,  # noqa: S603, S607
                   check=True)
    return commit


def start(tmp: Path, port: int, source: Path) -> subprocess.Popen[bytes]:
    """A gateway importing ``source``'s tree (first on PYTHONPATH), pinned to CPU 0."""
    tmp.mkdir(parents=True, exist_ok=True)
    twistd = Path(sys.executable).parent / "twistd"
    env = {**os.environ, "PYTHONPATH": str(source)}
    return subprocess.Popen(  # noqa: S603
        ["taskset", "-a", "-c", "0", str(twistd), "-n", "--pidfile=", "-l",  # noqa: S607
         str(tmp / "twistd.log"), "lockgate", "--listen", f"tcp:{port}:interface=127.0.0.1",
         "--database", f"sqlite:///{tmp / 'bench.sqlite3'}", "--secret-file",
         str(tmp / "secret"), "--access-log", str(tmp / "access.log")],
        cwd=str(tmp), env=env, stdout=subprocess.DEVNULL,
        stderr=open(tmp / "twistd.stderr", "wb"))


async def phase(pid: int, port: int, request: bytes, duration: float,
                c1: list[float] | None = None) -> dict[str, Any]:
    """A c=32 phase (CPU per request); with ``c1`` also a one-client phase whose latencies
    are appended to ``c1``."""
    before = cpu_seconds(pid)
    result = await closed_loop("127.0.0.1", port, request, 32, duration)
    after = cpu_seconds(pid)
    assert before is not None and after is not None
    figures: dict[str, Any] = {
        "req_per_s": round(result.rate, 1), "errors": result.errors,
        "cpu_us_per_req": round((after - before) * 1e6 / max(1, result.requests), 1)}
    if c1 is not None:
        one = await closed_loop("127.0.0.1", port, request, 1, duration)
        c1.extend(one.latencies)
        figures["c1_p50_ms"] = _ms(percentile(one.latencies, 50))
        figures["c1_p99_ms"] = _ms(percentile(one.latencies, 99))
    return figures


def _ms(value: float | None) -> float | None:
    return None if value is None else round(value * 1000, 3)


async def main_async(args: argparse.Namespace) -> None:
    raise_fd_limit()
    if (os.cpu_count() or 1) > 1:
        os.sched_setaffinity(0, set(range(1, os.cpu_count() or 2)))
    tmp = Path(tempfile.mkdtemp(prefix="lockgate-code-ab-"))
    before_tree = tmp / "before-tree"
    before_tree.mkdir()
    commit = export(args.before, before_tree)
    up_port = free_port()
    upstream = subprocess.Popen(  # noqa: S603
        [sys.executable, str(HERE / "upstream.py"), "--port", str(up_port)],
        stdout=subprocess.DEVNULL)
    sides: dict[str, tuple[subprocess.Popen[bytes], int, bytes]] = {}
    try:
        if not wait_http(up_port, "/v1/models", 15):
            raise SystemExit("bench upstream did not start")
        for name, source in ((f"A {commit}", before_tree), ("B this checkout", ROOT)):
            port = free_port()
            proc = start(tmp / name.split()[0], port, source)
            if not wait_http(port, "/healthz", 30):
                raise SystemExit(f"gateway {name} did not start; see {tmp}")
            key, _ = provision("127.0.0.1", port, f"http://127.0.0.1:{up_port}", MODELS,
                               limits=True)
            request = build_request("127.0.0.1", port, "/v1/chat/completions",
                                    chat_body("bench-json", False), key)
            await closed_loop("127.0.0.1", port, request, 32, args.warmup)
            sides[name] = (proc, port, request)
        names = list(sides)
        results: dict[str, list[dict[str, Any]]] = {name: [] for name in names}
        latencies: dict[str, list[float]] = {name: [] for name in names}
        for index in range(args.phases):
            for name in (names if index % 2 == 0 else names[::-1]):
                proc, port, request = sides[name]
                figures = await phase(proc.pid, port, request, args.duration,
                                      latencies[name] if args.c1 else None)
                results[name].append(figures)
                print(f"{name}: {figures}", flush=True)
        medians = {name: statistics.median(r["cpu_us_per_req"] for r in runs)
                   for name, runs in results.items()}
        for name, runs in results.items():
            cpu = [r["cpu_us_per_req"] for r in runs]
            print(f"{name}: CPU µs/req {cpu} median {medians[name]:.1f} "
                  f"(min-max {min(cpu)}-{max(cpu)})")
        a, b = (medians[name] for name in names)
        print(f"B vs A: {b - a:+.1f} µs/req ({100 * (b - a) / a:+.1f} %)")
        if args.c1:
            for name in names:
                p99s = [r["c1_p99_ms"] for r in results[name]]
                print(f"{name}: c=1 p99 ms per phase {p99s}; pooled "
                      f"p50 {_ms(percentile(latencies[name], 50))} "
                      f"p99 {_ms(percentile(latencies[name], 99))} "
                      f"(n={len(latencies[name])})")
            pairs = [round(rb["c1_p99_ms"] - ra["c1_p99_ms"], 3)
                     for ra, rb in zip(*(results[name] for name in names), strict=True)]
            print(f"B - A c=1 p99 per phase pair (ms): {pairs}; median "
                  f"{statistics.median(pairs):+.3f}")
    finally:
        for proc, _, _ in sides.values():
            proc.terminate()
            proc.wait(30)
        upstream.terminate()
        upstream.wait(10)
        shutil.rmtree(tmp, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--before", required=True, help="the commit to compare with (A)")
    parser.add_argument("--phases", type=int, default=3, help="phases per side")
    parser.add_argument("--duration", type=float, default=5.0, help="seconds per phase")
    parser.add_argument("--warmup", type=float, default=2.0)
    parser.add_argument("--c1", action="store_true",
                        help="also a one-client phase after each phase: c=1 p50 / p99")
    asyncio.run(main_async(parser.parse_args()))


if __name__ == "__main__":
    main()
