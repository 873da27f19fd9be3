"""What one open stream holds in the gateway: tracemalloc sizes per allocation site, per stream.

Starts ``bench/upstream.py`` and a real ``twistd -n lockgate`` under ``tracemalloc`` (through a
small wrapper that snapshots the heap on SIGUSR2), provisions it like ``bench/run.py``, then
takes a snapshot before and while ``--streams`` slow streams are open, and prints the
allocation sites that grew, divided by the number of open streams (bytes per stream), plus
VmRSS per stream of the same run.  tracemalloc costs CPU and memory of its own, so the RSS
figure here is not the bench's; quote ``bench/run.py``'s for that.

    .venv/bin/python bench/stream_memory.py [--streams 2000] [--top 30] [--group lineno]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import subprocess
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from load import build_request, hold_streams
from provision import provision
from run import MODELS, chat_body, free_port, raise_fd_limit, rss_kib, wait_http

HERE = Path(__file__).resolve().parent
SNAPSHOT_ENV = "LOCKGATE_BENCH_SNAPSHOT"

#: run inside the gateway's interpreter: a SIGUSR2 handler that dumps a snapshot, then twistd
WRAPPER = f"""
import gc, os, signal, sys, tracemalloc
tracemalloc.start(int(os.environ.get("LOCKGATE_BENCH_FRAMES", "1")))
def dump(signum, frame):
    gc.collect()
    tracemalloc.take_snapshot().dump(os.environ["{SNAPSHOT_ENV}"])
    open(os.environ["{SNAPSHOT_ENV}"] + ".done", "w").close()
signal.signal(signal.SIGUSR2, dump)
from twisted.scripts.twistd import run
sys.argv[0] = "twistd"
run()
"""


async def snapshot(pid: int, path: Path) -> tracemalloc.Snapshot:
    """The gateway's heap now; waits without blocking the loop (the open streams must keep
    being read, or their events pile up in the gateway's write buffers and count as theirs)."""
    done = Path(str(path) + ".done")
    done.unlink(missing_ok=True)
    os.kill(pid, signal.SIGUSR2)
    deadline = time.time() + 600
    while not done.exists():
        if time.time() > deadline:
            raise SystemExit("the gateway did not write its snapshot")
        await asyncio.sleep(0.1)
    return tracemalloc.Snapshot.load(str(path))


async def main_async(args: argparse.Namespace) -> None:
    raise_fd_limit()
    tmp = Path(tempfile.mkdtemp(prefix="lockgate-memory-"))
    up_port, gw_port = free_port(), free_port()
    upstream = subprocess.Popen(  # noqa: S603
        [sys.executable, str(HERE / "upstream.py"), "--port", str(up_port)],
        stdout=subprocess.DEVNULL)
    env = dict(os.environ, **{SNAPSHOT_ENV: str(tmp / "heap.snapshot"),
                              "LOCKGATE_BENCH_FRAMES": str(args.frames)})
    gateway = subprocess.Popen(  # noqa: S603
        [sys.executable, "-c", WRAPPER, "-n", "--pidfile=", "-l", str(tmp / "twistd.log"),
         "lockgate", "--listen", f"tcp:{gw_port}:interface=127.0.0.1",
         "--database", f"sqlite:///{tmp / 'bench.sqlite3'}", "--secret-file",
         str(tmp / "secret"), "--access-log", str(tmp / "access.log")],
        cwd=str(tmp), env=env, stdout=subprocess.DEVNULL)
    try:
        if not wait_http(up_port, "/v1/models", 15) or not wait_http(gw_port, "/healthz", 240):
            raise SystemExit(f"did not start; see {tmp / 'twistd.log'}")
        key, _ = provision("127.0.0.1", gw_port, f"http://127.0.0.1:{up_port}", MODELS)
        request = build_request("127.0.0.1", gw_port, "/v1/chat/completions",
                                chat_body("bench-slow", True), key)
        warm = await hold_streams("127.0.0.1", gw_port, request, 50, _pause)
        print(f"warm-up: {warm.opened} streams, errors {warm.errors}", flush=True)
        await asyncio.sleep(2)
        before = await snapshot(gateway.pid, tmp / "heap.snapshot")
        rss_before = rss_kib(gateway.pid) or 0
        taken: list[tracemalloc.Snapshot] = []
        rss_open = [0]

        async def measure(result: object) -> None:
            await asyncio.sleep(2)
            rss_open[0] = rss_kib(gateway.pid) or 0
            taken.append(await snapshot(gateway.pid, tmp / "heap.snapshot"))

        held = await hold_streams("127.0.0.1", gw_port, request, args.streams, measure)
        opened = held.opened
        print(f"{opened} streams open, errors {held.errors} {held.first_error[:200]}")
        if not opened or not taken:
            return
        print(f"VmRSS per open stream (under tracemalloc): "
              f"{(rss_open[0] - rss_before) / opened:.1f} KiB")
        stats = taken[0].compare_to(before, args.group)
        total = sum(s.size_diff for s in stats)
        print(f"traced heap per open stream: {total / opened / 1024:.2f} KiB "
              f"({sum(s.count_diff for s in stats) / opened:.1f} blocks)\n")
        print(f"{'bytes/stream':>12} {'blocks/stream':>13}  site")
        for stat in stats[:args.top]:
            frames = stat.traceback.format()
            site = " <- ".join(line.strip() for line in frames[::2][-args.frames:])
            print(f"{stat.size_diff / opened:12.0f} {stat.count_diff / opened:13.2f}  {site}")
    finally:
        for proc in (gateway, upstream):
            proc.terminate()
            proc.wait(30)


async def _pause(result: object) -> None:
    await asyncio.sleep(0.5)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--streams", type=int, default=2000)
    parser.add_argument("--top", type=int, default=30)
    parser.add_argument("--frames", type=int, default=1,
                        help="traceback depth per allocation site (1: the line itself)")
    parser.add_argument("--group", default="lineno", choices=("lineno", "filename",
                                                              "traceback"))
    asyncio.run(main_async(parser.parse_args()))


if __name__ == "__main__":
    main()
