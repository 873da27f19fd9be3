"""One benchmark run: the same load directly against the upstream and through Lockgate.

Starts ``bench/upstream.py`` and a real ``twistd -n lockgate`` (on a temporary SQLite file,
pinned to CPU 0 with ``taskset`` when available), provisions the gateway through its console
API, then runs every phase against both targets and prints a table (and writes JSON).  See
bench/README.md for what each figure means.

    .venv/bin/python bench/run.py [--duration 5] [--streams 500] [--slow-streams 2000]
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

from load import build_request, closed_loop, hold_streams, percentile, streams
from provision import ProvisionError, provision

HERE = Path(__file__).resolve().parent
#: public model (gateway) -> upstream model name; the direct target uses the right-hand side
MODELS = {
    "bench-json": "bench",
    "bench-stream": "bench+chunks-20+pace-0.05",
    "bench-slow": "bench+chunks-1200+pace-0.1",
}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def rss_kib(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/status") as status:
            for line in status:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


def open_fds(pid: int) -> int | None:
    try:
        return len(os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        return None


def cpu_seconds(pid: int | None) -> float | None:
    """User + system CPU seconds a process has used (from /proc), None when unreadable."""
    if pid is None:
        return None
    try:
        with open(f"/proc/{pid}/stat") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def pinned(command: list[str], cpu: str | None) -> list[str]:
    if cpu is not None and shutil.which("taskset"):
        return ["taskset", "-c", cpu, *command]
    return command


def wait_http(port: int, path: str, seconds: float) -> bool:
    deadline = time.time() + seconds
    while time.time() < deadline:
        try:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
            conn.request("GET", path)
            conn.getresponse().read()
            conn.close()
            return True
        except OSError:
            time.sleep(0.2)
    return False


def chat_body(model: str, stream: bool) -> bytes:
    body: dict[str, Any] = {"model": model, "messages": [
        {"role": "user", "content": "Say something for the benchmark."}], "max_tokens": 64}
    if stream:
        body["stream"] = True
        body["stream_options"] = {"include_usage": True}
    return json.dumps(body).encode()


def ms(value: float | None) -> float | None:
    return None if value is None else round(value * 1000, 2)


async def measure(target: str, port: int, token: str | None, models: dict[str, str],
                  args: argparse.Namespace, pid: int | None,
                  upstream_pid: int) -> dict[str, Any]:
    """Every phase against one target; ``models`` maps phase -> model name to ask for."""
    host, path = "127.0.0.1", "/v1/chat/completions"
    out: dict[str, Any] = {"target": target}

    def req(model: str, stream: bool) -> bytes:
        return build_request(host, port, path, chat_body(model, stream), token)

    for concurrency in (() if args.streams_only else (1, 32)):
        print(f"  [{target}] non-stream, concurrency {concurrency}, {args.duration}s",
              flush=True)
        watched_cpu = pid if pid is not None else upstream_pid
        cpu_before = cpu_seconds(watched_cpu)
        r = await closed_loop(host, port, req(models["json"], False), concurrency,
                              args.duration)
        cpu_after = cpu_seconds(watched_cpu)
        cpu_ms = (None if cpu_before is None or cpu_after is None or not r.requests
                  else (cpu_after - cpu_before) * 1000 / r.requests)
        out[f"json_c{concurrency}"] = {
            # CPU the measured process spent per answered request: unlike req/s this does
            # not move when other processes steal the core, so it gives the one-core ceiling
            "cpu_ms_per_req": None if cpu_ms is None else round(cpu_ms, 3),
            "req_per_cpu_s": None if not cpu_ms else round(1000 / cpu_ms, 1),
            "requests": r.requests, "errors": r.errors, "req_per_s": round(r.rate, 1),
            "p50_ms": ms(percentile(r.latencies, 50)), "p99_ms": ms(percentile(r.latencies, 99)),
            "statuses": r.statuses, "first_error": r.first_error}

    if args.streams:
        print(f"  [{target}] {args.streams} concurrent streams", flush=True)
        watched_cpu = pid if pid is not None else upstream_pid
        cpu_before = cpu_seconds(watched_cpu)
        s = await streams(host, port, req(models["stream"], True), args.streams)
        cpu_after = cpu_seconds(watched_cpu)
        out["streams"] = {
            "count": args.streams, "completed": s.completed, "errors": s.errors,
            # the whole life of a stream (start, 20 relayed events, settlement), per stream
            "cpu_ms_per_stream": (None if cpu_before is None or cpu_after is None
                                  or not s.completed
                                  else round((cpu_after - cpu_before) * 1000 / s.completed, 3)),
            "ttfb_p50_ms": ms(percentile(s.ttfb, 50)),
            "ttfb_p99_ms": ms(percentile(s.ttfb, 99)),
            "done_p50_ms": ms(percentile(s.completion, 50)),
            "done_p99_ms": ms(percentile(s.completion, 99)), "first_error": s.first_error}

    if not args.slow_streams:
        return out
    watched = pid if pid is not None else upstream_pid
    await asyncio.sleep(1.0)
    baseline = rss_kib(watched)
    peak = [baseline or 0]

    async def sample(result: Any) -> None:
        for _ in range(10):
            peak[0] = max(peak[0], rss_kib(watched) or 0)
            await asyncio.sleep(0.2)

    print(f"  [{target}] {args.slow_streams} slow concurrent streams (RSS)", flush=True)
    fds_before = open_fds(upstream_pid) or 0
    h = await hold_streams(host, port, req(models["slow"], True), args.slow_streams, sample)
    hung_up = time.perf_counter()
    close_s: float | None = None
    while time.perf_counter() - hung_up < 15:  # until the upstream sockets are closed
        if (open_fds(upstream_pid) or 0) <= fds_before + 5:
            close_s = time.perf_counter() - hung_up
            break
        await asyncio.sleep(0.05)
    per_stream = ((peak[0] - baseline) / h.opened) if baseline and h.opened else None
    out["slow_streams"] = {
        "requested": args.slow_streams, "open_at_peak": h.opened, "errors": h.errors,
        "rss_process": target if pid is not None else "upstream",
        "rss_baseline_kib": baseline, "rss_peak_kib": peak[0],
        "rss_per_stream_kib": None if per_stream is None else round(per_stream, 1),
        "ttfb_p99_ms": ms(percentile(h.ttfb, 99)),
        "upstream_fds_after_hangup": open_fds(upstream_pid),
        "upstream_closed_after_s": None if close_s is None else round(close_s, 2),
        "first_error": h.first_error}
    return out


def start_gateway(tmp: Path, port: int, cpu: str | None,
                  profile: str | None) -> subprocess.Popen[bytes]:
    twistd = Path(sys.executable).parent / "twistd"
    profiling = [f"--profile={profile}", "--profiler=cprofile", "--savestats"] if profile else []
    command = pinned([str(twistd), "-n", "--pidfile=", "-l", str(tmp / "twistd.log"),
                      *profiling, "lockgate", "--listen", f"tcp:{port}:interface=127.0.0.1",
                      "--database", f"sqlite:///{tmp / 'bench.sqlite3'}",
                      "--secret-file", str(tmp / "secret"),
                      # logging on, into a real file (the default, standard output, is
                      # /dev/null here, which would flatter the figures)
                      "--access-log", str(tmp / "access.log")], cpu)
    return subprocess.Popen(command, cwd=str(tmp), stdout=subprocess.DEVNULL,  # noqa: S603
                            stderr=open(tmp / "twistd.stderr", "wb"))


def raise_fd_limit(needed: int = 0) -> None:
    """Soft limit up to the hard one; the hard one too when ``needed`` is more and we may
    (root): the gateway holds two sockets per slow stream, and the children inherit this."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < needed:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (needed, needed))
            return
        except (ValueError, OSError):
            print(f"note: open-file hard limit {hard} < {needed} needed", flush=True)
    if soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


TARGETS = (("direct", "direct"), ("floor", "relay floor"), ("gateway", "lockgate"))


def table(results: dict[str, Any]) -> str:
    rows = [("figure", *(label for _, label in TARGETS))]

    def row(label: str, *keys: str) -> None:
        cells = []
        for name, _ in TARGETS:
            value: Any = results.get(name) or {}
            for key in keys:
                value = value.get(key) if isinstance(value, dict) else None
            cells.append("-" if value is None else str(value))
        rows.append((label, *cells))

    for c in (1, 32):
        for key, label in (("req_per_s", "req/s"), ("p50_ms", "p50 ms"), ("p99_ms", "p99 ms"),
                           ("cpu_ms_per_req", "CPU ms/req"),
                           ("req_per_cpu_s", "req per CPU-second"), ("errors", "errors")):
            row(f"non-stream c={c} {label}", f"json_c{c}", key)
    for key, label in (("completed", "completed"), ("ttfb_p50_ms", "TTFB p50 ms"),
                       ("ttfb_p99_ms", "TTFB p99 ms"), ("done_p50_ms", "done p50 ms"),
                       ("done_p99_ms", "done p99 ms"), ("cpu_ms_per_stream", "CPU ms/stream"),
                       ("errors", "errors")):
        row(f"{results['config']['streams']} streams {label}", "streams", key)
    for key, label in (("open_at_peak", "open"), ("rss_per_stream_kib", "RSS KiB/stream"),
                       ("rss_peak_kib", "RSS peak KiB"),
                       ("upstream_fds_after_hangup", "upstream fds after hang-up"),
                       ("upstream_closed_after_s", "upstream closed after s")):
        row(f"slow streams {label}", "slow_streams", key)
    width = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(cell.ljust(width[i]) for i, cell in enumerate(r)) for r in rows]
    lines.insert(1, "  ".join("-" * w for w in width))
    return "\n".join(lines)


async def measure_floor(args: argparse.Namespace, up_port: int, upstream_pid: int,
                        cpu: str | None, models: dict[str, str]) -> dict[str, Any] | None:
    """The bare relay (bench/relay_floor.py) on the gateway's CPU."""
    port = free_port()
    floor = subprocess.Popen(pinned(  # noqa: S603
        [sys.executable, str(HERE / "relay_floor.py"), "--port", str(port),
         "--upstream", f"http://127.0.0.1:{up_port}"], cpu))
    try:
        if not wait_http(port, "/", 15):
            return None
        return await measure("floor", port, None, models, args, floor.pid, upstream_pid)
    finally:
        floor.terminate()
        floor.wait(10)


async def main_async(args: argparse.Namespace) -> dict[str, Any]:
    raise_fd_limit(2 * max(args.slow_streams, args.streams) + 4096)
    cpus = os.cpu_count() or 1
    gateway_cpu = "0" if cpus > 1 else None
    helper_cpus = set(range(1, cpus)) if cpus > 1 else None
    if helper_cpus and hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, helper_cpus)  # driver and upstream stay off the gateway's CPU
    tmp = Path(tempfile.mkdtemp(prefix="lockgate-bench-"))
    results: dict[str, Any] = {"config": {
        "duration_s": args.duration, "streams": args.streams, "slow_streams": args.slow_streams,
        "cpus": cpus, "gateway_cpu": gateway_cpu, "models": MODELS}, "notes": []}
    up_port = args.upstream_port or free_port()
    upstream = subprocess.Popen(  # noqa: S603
        [sys.executable, str(HERE / "upstream.py"), "--port", str(up_port)],
        stdout=subprocess.DEVNULL)
    gateway: subprocess.Popen[bytes] | None = None
    try:
        if not wait_http(up_port, "/v1/models", 15):
            raise SystemExit("bench upstream did not start")
        print(f"upstream on :{up_port} (pid {upstream.pid})", flush=True)
        direct_models = {"json": MODELS["bench-json"], "stream": MODELS["bench-stream"],
                         "slow": MODELS["bench-slow"]}
        results["direct"] = await measure("direct", up_port, None, direct_models, args, None,
                                          upstream.pid)
        if not args.no_floor:
            results["floor"] = await measure_floor(args, up_port, upstream.pid, gateway_cpu,
                                                   direct_models)
        if args.direct_only:
            results["notes"].append("gateway skipped (--direct-only)")
            return results
        gw_port = free_port()
        gateway = start_gateway(tmp, gw_port, gateway_cpu, args.profile)
        if not wait_http(gw_port, "/healthz", 30):
            log = (tmp / "twistd.log").read_text(errors="replace")[-2000:] if (
                tmp / "twistd.log").exists() else ""
            results["notes"].append("gateway not ready: twistd did not answer /healthz. "
                                    + log)
            return results
        print(f"gateway on :{gw_port} (pid {gateway.pid}, log {tmp / 'twistd.log'})",
              flush=True)
        try:
            key, log_lines = provision("127.0.0.1", gw_port, f"http://127.0.0.1:{up_port}",
                                       MODELS)
            results["notes"].extend(log_lines)
        except ProvisionError as exc:
            results["notes"].append(f"gateway not ready: provisioning failed at {exc}")
            return results
        probe = await closed_loop("127.0.0.1", gw_port, build_request(
            "127.0.0.1", gw_port, "/v1/chat/completions", chat_body("bench-json", False), key),
            1, 0.5)
        if probe.requests == 0:
            results["notes"].append(
                "gateway not ready: /v1/chat/completions answered "
                f"{probe.statuses or 'nothing'} {probe.first_error[:300]}")
            return results
        gateway_models = {"json": "bench-json", "stream": "bench-stream", "slow": "bench-slow"}
        results["gateway"] = await measure("lockgate", gw_port, key, gateway_models, args,
                                           gateway.pid, upstream.pid)
        return results
    finally:
        for proc in (gateway, upstream):
            if proc is not None and proc.poll() is None:
                proc.terminate()
                try:
                    proc.wait(60)  # a profiled gateway writes its stats on the way out
                except subprocess.TimeoutExpired:
                    proc.kill()
        if not args.keep:
            shutil.rmtree(tmp, ignore_errors=True)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Lockgate vs direct-to-upstream benchmark")
    parser.add_argument("--duration", type=float, default=5.0,
                        help="seconds per non-stream phase")
    parser.add_argument("--streams", type=int, default=500)
    parser.add_argument("--slow-streams", type=int, default=2000)
    parser.add_argument("--streams-only", action="store_true",
                        help="skip the non-stream phases: only the N streams and slow streams "
                             "phases (--streams 0 / --slow-streams 0 skip those too)")
    parser.add_argument("--upstream-port", type=int, default=0)
    parser.add_argument("--direct-only", action="store_true",
                        help="only measure the upstream (checks the driver itself)")
    parser.add_argument("--no-floor", action="store_true",
                        help="skip the bare relay built from gateway/channels/relay.py")
    parser.add_argument("--profile", metavar="FILE",
                        help="run the gateway under cProfile; stats saved to FILE, top printed")
    parser.add_argument("--keep", action="store_true", help="keep the temp dir (logs, db)")
    parser.add_argument("--out", default=os.path.join(tempfile.gettempdir(),
                                                      "lockgate-bench-results.json"))
    args = parser.parse_args(argv)
    results = asyncio.run(main_async(args))
    print()
    print(table(results))
    for note in results["notes"]:
        print("note:", note)
    Path(args.out).write_text(json.dumps(results, indent=2))
    print(f"results written to {args.out}")
    if args.profile and Path(args.profile).exists():
        import pstats

        print(f"\ngateway profile ({args.profile}), top functions by own time:")
        pstats.Stats(args.profile).sort_stats("tottime").print_stats(30)


if __name__ == "__main__":
    main()
