"""What one open stream holds in the gateway, measured as the growth from N to 2N open streams.

Starts ``bench/upstream.py`` and a real ``twistd -n lockgate`` through a small wrapper that
answers SIGUSR2 with a measurement (a tracemalloc snapshot when tracing, VmRSS before and after
``gc.collect()`` and, with ``--trim``, after glibc's ``malloc_trim(0)``, plus the count and
``sys.getsizeof`` of every GC-tracked object per type), provisions it like ``bench/run.py``,
opens N slow streams, measures, opens N more (2N open), measures again and prints the
difference divided by N: what one more open stream costs, without the first streams' one-off
allocations (caches, pools, the heap's own growth) that a before/after-nothing diff would
count.  Per allocation site (tracemalloc) and per type (the sweep).

    .venv/bin/python bench/stream_memory.py --streams 500 --top 30      # traced, per site
    .venv/bin/python bench/stream_memory.py --streams 2000 --no-trace --trim   # RSS only

tracemalloc costs memory of its own: quote the RSS figures of a ``--no-trace`` run.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from load import StreamResult, build_request, hold_streams
from provision import provision
from run import MODELS, chat_body, free_port, raise_fd_limit, wait_http

HERE = Path(__file__).resolve().parent
OUT_ENV = "LOCKGATE_BENCH_MEASURE"

#: run inside the gateway's interpreter: a SIGUSR2 handler that measures, then twistd
WRAPPER = f"""
import ctypes, gc, json, os, signal, sys, tracemalloc
frames = int(os.environ.get("LOCKGATE_BENCH_FRAMES", "1"))
trim = os.environ.get("LOCKGATE_BENCH_TRIM") == "1"
if frames:
    tracemalloc.start(frames)
def rss():
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
def pymalloc():
    # sys._debugmallocstats() writes to the C stderr: bytes in live blocks, in free blocks of
    # used pools and in wholly free pools/arenas (what the allocator keeps but nothing uses)
    import tempfile
    with tempfile.TemporaryFile() as sink:
        saved = os.dup(2)
        os.dup2(sink.fileno(), 2)
        try:
            sys._debugmallocstats()
        finally:
            os.dup2(saved, 2)
            os.close(saved)
        sink.seek(0)
        text = sink.read().decode(errors="replace")
    wanted = {{"# bytes in allocated blocks": "allocated",
              "# bytes in available blocks": "free_blocks",
              "unused pools * 16384 bytes": "free_pools",
              "# bytes lost to quantization": "quantization",
              "# arenas allocated current": "arenas"}}
    found = {{}}
    for line in text.splitlines():
        for prefix, key in wanted.items():
            if prefix in line:
                found[key] = int(line.split("=")[-1].strip().replace(",", ""))
    return found
def measure(signum, frame):
    out = os.environ["{OUT_ENV}"]
    result = {{"rss_kib": rss()}}
    # what the collector finds unreachable now: cyclic garbage the process still carries
    gc.set_debug(gc.DEBUG_SAVEALL)
    gc.collect()
    garbage = {{}}
    for obj in gc.garbage:
        name = type(obj).__module__ + "." + type(obj).__qualname__
        entry = garbage.setdefault(name, [0, 0])
        entry[0] += 1
        entry[1] += sys.getsizeof(obj)
    result["garbage"] = garbage
    gc.garbage.clear()
    gc.set_debug(0)
    gc.collect()
    result["rss_after_gc_kib"] = rss()
    if trim:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
        result["rss_after_trim_kib"] = rss()
    result["pymalloc"] = pymalloc()
    types = {{}}
    pending = 0  # bytes waiting in userland transport write buffers (the peer reads slowly)
    for obj in gc.get_objects():
        if hasattr(obj, "_tempDataLen") and hasattr(obj, "dataBuffer"):
            pending += obj._tempDataLen + len(obj.dataBuffer) - getattr(obj, "offset", 0)
        kind = type(obj)
        name = kind.__module__ + "." + kind.__qualname__
        entry = types.setdefault(name, [0, 0])
        entry[0] += 1
        entry[1] += sys.getsizeof(obj)
    result["types"] = types
    result["pending_write_bytes"] = pending
    if frames:
        tracemalloc.take_snapshot().dump(out + ".heap")
    with open(out, "w") as handle:
        json.dump(result, handle)
    open(out + ".done", "w").close()
signal.signal(signal.SIGUSR2, measure)
from twisted.scripts.twistd import run
sys.argv[0] = "twistd"
run()
"""


async def take(pid: int, path: Path, traced: bool) -> tuple[dict[str, Any],
                                                            tracemalloc.Snapshot | None]:
    """The gateway's measurement now; waits without blocking the loop (the open streams must
    keep being read, or their events pile up in the gateway's write buffers and count as
    theirs)."""
    done = Path(str(path) + ".done")
    done.unlink(missing_ok=True)
    os.kill(pid, signal.SIGUSR2)
    deadline = time.time() + 600
    while not done.exists():
        if time.time() > deadline:
            raise SystemExit("the gateway did not write its measurement")
        await asyncio.sleep(0.1)
    result = json.loads(path.read_text())
    snapshot = tracemalloc.Snapshot.load(str(path) + ".heap") if traced else None
    return result, snapshot


def stop(proc: subprocess.Popen[bytes]) -> None:
    """SIGTERM, then SIGKILL if it has not ended within 20 s (a draining gateway may wait)."""
    if proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(20)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(10)


def report_types(first: dict[str, Any], second: dict[str, Any], count: int, top: int) -> None:
    """GC-tracked objects per type that grew from N to 2N streams, per added stream."""
    rows = []
    for name, (objects, size) in second["types"].items():
        before = first["types"].get(name, [0, 0])
        rows.append(((size - before[1]) / count, (objects - before[0]) / count, name))
    rows.sort(reverse=True)
    print(f"\n{'getsizeof/stream':>16} {'objects/stream':>14}  type (GC-tracked objects only)")
    for size, objects, name in rows[:top]:
        if objects <= 0.01 and size <= 1:
            break
        print(f"{size:16.0f} {objects:14.2f}  {name}")


def report_sites(first: tracemalloc.Snapshot, second: tracemalloc.Snapshot, count: int,
                 args: argparse.Namespace) -> None:
    stats = second.compare_to(first, args.group)
    total = sum(s.size_diff for s in stats)
    print(f"\ntraced heap per added stream: {total / count / 1024:.2f} KiB "
          f"({sum(s.count_diff for s in stats) / count:.1f} blocks)\n")
    print(f"{'bytes/stream':>12} {'blocks/stream':>13}  site")
    for stat in stats[:args.top]:
        frames = stat.traceback.format()
        site = " <- ".join(line.strip() for line in frames[::2][-args.frames:])
        print(f"{stat.size_diff / count:12.0f} {stat.count_diff / count:13.2f}  {site}")


async def main_async(args: argparse.Namespace) -> None:
    raise_fd_limit(4 * args.streams + 4096)
    tmp = Path(tempfile.mkdtemp(prefix="lockgate-memory-"))
    up_port, gw_port = free_port(), free_port()
    upstream = subprocess.Popen(  # noqa: S603
        [sys.executable, str(HERE / "upstream.py"), "--port", str(up_port)],
        stdout=subprocess.DEVNULL)
    traced = not args.no_trace
    env = dict(os.environ, **{OUT_ENV: str(tmp / "measure.json"),
                              "LOCKGATE_BENCH_FRAMES": str(args.frames if traced else 0),
                              "LOCKGATE_BENCH_TRIM": "1" if args.trim else "0"})
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
                                chat_body(args.model, True), key)
        warm = await hold_streams("127.0.0.1", gw_port, request, 50, _pause)
        print(f"warm-up: {warm.opened} streams, errors {warm.errors}", flush=True)
        await asyncio.sleep(2)
        path = tmp / "measure.json"
        taken: list[tuple[dict[str, Any], tracemalloc.Snapshot | None]] = []
        opened: list[StreamResult] = []

        async def at_2n(result: StreamResult) -> None:
            opened.append(result)
            await asyncio.sleep(args.settle)
            taken.append(await take(gateway.pid, path, traced))

        async def at_n(result: StreamResult) -> None:
            opened.append(result)
            await asyncio.sleep(args.settle)
            taken.append(await take(gateway.pid, path, traced))
            print(f"{result.opened} streams open (errors {result.errors}); opening "
                  f"{args.streams} more", flush=True)
            await hold_streams("127.0.0.1", gw_port, request, args.streams, at_2n,
                               first_byte_timeout=args.first_byte_timeout)

        await hold_streams("127.0.0.1", gw_port, request, args.streams, at_n,
                           first_byte_timeout=args.first_byte_timeout)
        if len(taken) < 2:
            print("the second measurement was not taken")
            return
        (first, heap_n), (second, heap_2n) = taken
        added = opened[1].opened
        print(f"{opened[0].opened} + {added} streams open (errors {opened[0].errors} + "
              f"{opened[1].errors}), {added} added")
        if not added:
            return
        for label, field in (("VmRSS", "rss_kib"), ("VmRSS after gc.collect()",
                                                     "rss_after_gc_kib"),
                             ("VmRSS after malloc_trim(0)", "rss_after_trim_kib")):
            if field in first:
                print(f"{label:<28} N: {first[field]:>9} KiB  2N: {second[field]:>9} KiB  "
                      f"per added stream: {(second[field] - first[field]) / added:6.1f} KiB")
        one, two = first.get("pymalloc"), second.get("pymalloc")
        if one and two:
            grew = {key: (two[key] - one.get(key, 0)) / added / 1024 for key in two}
            print("pymalloc, KiB per added stream: " + ", ".join(
                f"{key} {value:.1f}" for key, value in grew.items() if key != "arenas")
                + f"; arenas {one.get('arenas')} -> {two.get('arenas')}")
        print(f"bytes waiting in transport write buffers: N {first['pending_write_bytes']}, "
              f"2N {second['pending_write_bytes']}, per added stream "
              f"{(second['pending_write_bytes'] - first['pending_write_bytes']) / added / 1024:.1f}"
              " KiB")
        collected = sum(size for _, size in second["garbage"].values())
        print(f"cyclic garbage found at 2N: {sum(n for n, _ in second['garbage'].values())} "
              f"objects, {collected / added / 1024:.1f} KiB (getsizeof) per added stream")
        for name, (objects, size) in sorted(second["garbage"].items(), key=lambda kv: -kv[1][1])[
                :args.top // 2]:
            print(f"  {size / added:10.0f} B {objects / added:8.2f} objects/stream  {name}")
        report_types(first, second, added, args.top)
        if heap_n is not None and heap_2n is not None:
            report_sites(heap_n, heap_2n, added, args)
    finally:
        stop(gateway)
        stop(upstream)


async def _pause(result: object) -> None:
    await asyncio.sleep(0.5)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--streams", type=int, default=500,
                        help="N: measured at N and at 2N open streams")
    parser.add_argument("--top", type=int, default=30)
    parser.add_argument("--frames", type=int, default=1,
                        help="traceback depth per allocation site (1: the line itself)")
    parser.add_argument("--group", default="lineno", choices=("lineno", "filename",
                                                              "traceback"))
    parser.add_argument("--no-trace", action="store_true",
                        help="no tracemalloc: RSS and the per-type sweep only")
    parser.add_argument("--trim", action="store_true",
                        help="also VmRSS after malloc_trim(0) (glibc) at each measurement")
    parser.add_argument("--model", default="bench-slow")
    parser.add_argument("--settle", type=float, default=2.0,
                        help="seconds between the last first byte and a measurement")
    parser.add_argument("--first-byte-timeout", type=float, default=120.0)
    asyncio.run(main_async(parser.parse_args()))


if __name__ == "__main__":
    main()
