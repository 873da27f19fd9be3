"""What console authentication costs per request: CPU µs at one commit against this checkout.

Every console route authenticates the login JWT first; before this change that meant a PyJWT
verification and a ``get_user`` transaction per request.  Like ``code_ab.py``: one SQLite
``twistd -n lockgate`` per side (A: a commit exported with ``git archive``, B: this checkout),
every thread pinned to CPU 0, the load generator on the other cores; each side gets an admin
and a user, then c=32 closed-loop phases of each route alternate A B B A ... so that the VM's
CPU drift hits both sides.  Prints each phase's CPU µs per request (``/proc/<pid>/stat``) and
req/s, then per route the min-max per side and B/A as a ratio of medians of the same run.

    .venv/bin/python bench/console_auth.py --before c492fb8 [--phases 4] [--duration 4]
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

from code_ab import export, start
from load import closed_loop
from provision import Console
from run import cpu_seconds, free_port, raise_fd_limit, wait_http

#: a route that reads the user row and its relations, and a listing that reads only its rows
ROUTES = ("/api/user/me", "/api/user/api-keys")


def get_request(port: int, path: str, token: str) -> bytes:
    return (f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
            f"Authorization: Bearer {token}\r\n\r\n").encode()


def sign_in(port: int) -> str:
    """An admin (first-run setup), then a user with one API key; returns the user's token."""
    console = Console("127.0.0.1", port)
    console.call("POST /api/setup", "POST", "/api/setup", {
        "username": "benchadmin", "email": "bench@example.com", "password": "bench-password-1"})
    user = console.call("POST /auth/password/register", "POST", "/auth/password/register", {
        "username": "benchuser", "email": "user@example.com", "password": "bench-password-2"})
    console.token = user["token"]
    console.call("POST /api/user/api-keys", "POST", "/api/user/api-keys", {"name": "k"})
    return str(user["token"])


async def phase(pid: int, port: int, request: bytes, duration: float) -> dict[str, Any]:
    before = cpu_seconds(pid)
    result = await closed_loop("127.0.0.1", port, request, 32, duration)
    after = cpu_seconds(pid)
    assert before is not None and after is not None
    if result.errors:
        raise SystemExit(f"errors: {result.statuses} {result.first_error}")
    return {"req_per_s": round(result.rate, 1),
            "cpu_us_per_req": round((after - before) * 1e6 / max(1, result.requests), 1)}


async def main_async(args: argparse.Namespace) -> None:
    raise_fd_limit()
    if (os.cpu_count() or 1) > 1:
        os.sched_setaffinity(0, set(range(1, os.cpu_count() or 2)))
    tmp = Path(tempfile.mkdtemp(prefix="lockgate-console-auth-"))
    before_tree = tmp / "before-tree"
    before_tree.mkdir()
    commit = export(args.before, before_tree)
    sides: dict[str, tuple[subprocess.Popen[bytes], int, str]] = {}
    try:
        for name, source in ((f"A {commit}", before_tree), ("B this checkout", Path.cwd())):
            port = free_port()
            proc = start(tmp / name.split()[0], port, source)
            sides[name] = (proc, port, "")
            if not wait_http(port, "/healthz", 30):
                raise SystemExit(f"gateway {name} did not start; see {tmp}")
            sides[name] = (proc, port, sign_in(port))
        names = list(sides)
        results: dict[tuple[str, str], list[float]] = {}
        for route in ROUTES:
            for name in names:
                proc, port, token = sides[name]
                await closed_loop("127.0.0.1", port, get_request(port, route, token), 32,
                                  args.warmup)
            for index in range(args.phases):
                for name in (names if index % 2 == 0 else names[::-1]):
                    proc, port, token = sides[name]
                    figures = await phase(proc.pid, port, get_request(port, route, token),
                                          args.duration)
                    results.setdefault((route, name), []).append(figures["cpu_us_per_req"])
                    print(f"{route} {name}: {figures}", flush=True)
        for route in ROUTES:
            medians = []
            for name in names:
                cpu = results[(route, name)]
                medians.append(statistics.median(cpu))
                print(f"{route} {name}: CPU µs/req min-max {min(cpu)}-{max(cpu)} "
                      f"median {medians[-1]:.1f}")
            print(f"{route} B/A: {medians[1] / medians[0]:.2f}")
    finally:
        for proc, _, _ in sides.values():
            proc.terminate()
            proc.wait(30)
        shutil.rmtree(tmp, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--before", required=True, help="the commit to compare with (A)")
    parser.add_argument("--phases", type=int, default=4, help="phases per side and route")
    parser.add_argument("--duration", type=float, default=4.0, help="seconds per phase")
    parser.add_argument("--warmup", type=float, default=1.0)
    asyncio.run(main_async(parser.parse_args()))


if __name__ == "__main__":
    main()
