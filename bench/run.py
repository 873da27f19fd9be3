"""One benchmark run: the same load directly, through two reference proxies and through Lockgate.

Starts ``bench/upstream.py``, the relay floor (``bench/relay_floor.py``), the bare treq proxy
(``bench/treq_proxy.py``) and a real ``twistd -n lockgate`` (on a temporary SQLite file), every
thread of each measured process pinned to CPU 0 (``taskset -a``; the driver and the upstream
on the other CPUs), provisions the gateway through its console API, then runs every phase
against each column and prints a table, the ratios Lockgate / treq and Lockgate / floor, and
(``--repeat K``) each of K alternating runs plus the spread.  ``--check`` compares the ratios
with ``bench/baseline.json`` and exits 1 on a regression.  See bench/README.md.

    .venv/bin/python bench/run.py [--duration 5] [--streams 500] [--slow-streams 2000]
    .venv/bin/python bench/run.py --repeat 3 --slow-streams 0 --check
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

import baseline_check
import interleave
from load import build_request, closed_loop, hold_streams, percentile, streams
from provision import ProvisionError, provision
from report import ratio_table, table

HERE = Path(__file__).resolve().parent
#: public model (gateway) -> upstream model name; the direct target uses the right-hand side
MODELS = {
    "bench-json": "bench",
    "bench-stream": "bench+chunks-20+pace-0.05",
    "bench-slow": "bench+chunks-1200+pace-0.1",
}


def models_for(slow_pace: float) -> dict[str, str]:
    """``MODELS`` with the slow streams' chunk pace set: at 0.1 s, 10,000 streams ask one
    core to relay 100,000 chunks a second, a throughput test rather than a memory one."""
    if slow_pace == 0.1:
        return dict(MODELS)
    return {**MODELS, "bench-slow": f"bench+chunks-1200+pace-{slow_pace:g}"}


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


def pin_all_threads(pid: int, cpu: str | None) -> dict[str, Any]:
    """``taskset -a -p``: every thread of ``pid`` (the database and DNS threads too) on
    ``cpu``; threads started later inherit it.  Returns what /proc says afterwards."""
    if cpu is None or not shutil.which("taskset"):
        return {"pinned": False, "why": "one CPU or no taskset"}
    subprocess.run(["taskset", "-a", "-p", "-c", cpu, str(pid)],  # noqa: S603, S607
                   check=False, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    allowed = set()
    for task in os.listdir(f"/proc/{pid}/task"):
        with open(f"/proc/{pid}/task/{task}/status") as status:
            for line in status:
                if line.startswith("Cpus_allowed_list:"):
                    allowed.add(line.split()[1])
    return {"pinned": allowed == {cpu}, "threads": len(os.listdir(f"/proc/{pid}/task")),
            "cpus_allowed": sorted(allowed)}


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

    if args.streams > 0:  # 0 skips this phase only: the slow streams may still run
        out["streams"] = await stream_starts(host, port, req(models["stream"], True), args,
                                             pid if pid is not None else upstream_pid, target)

    if args.slow_streams <= 0:
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


async def stream_starts(host: str, port: int, request: bytes, args: argparse.Namespace,
                        watched_cpu: int, target: str) -> dict[str, Any]:
    """``--streams`` streaming requests sent at once: TTFB, completion, CPU per stream."""
    ramp = f" started over {args.stream_ramp} s" if args.stream_ramp else ""
    print(f"  [{target}] {args.streams} concurrent streams{ramp}", flush=True)
    cpu_before = cpu_seconds(watched_cpu)
    s = await streams(host, port, request, args.streams, running=args.running_streams,
                      ramp=args.stream_ramp)
    cpu_after = cpu_seconds(watched_cpu)
    served = s.completed + int(s.extra.get("running_streams", 0))
    return {
        "count": args.streams, "completed": s.completed, "errors": s.errors,
        # the whole life of a stream (start, 20 relayed events, settlement), per stream
        "cpu_ms_per_stream": (None if cpu_before is None or cpu_after is None
                              or not served
                              else round((cpu_after - cpu_before) * 1000 / served, 3)),
        "ttfb_p50_ms": ms(percentile(s.ttfb, 50)), "ttfb_p99_ms": ms(percentile(s.ttfb, 99)),
        "done_p50_ms": ms(percentile(s.completion, 50)),
        "done_p99_ms": ms(percentile(s.completion, 99)), **s.extra,
        "first_error": s.first_error}


async def interleaved(args: argparse.Namespace,
                      columns: dict[str, tuple[int, str | None, dict[str, str], int | None]],
                      upstream_pid: int) -> dict[str, Any]:
    """``--interleave K``: K rounds, each a c=32 phase (CPU per request) and a c=1 phase
    (latency) of ``--phase-seconds`` per column, columns in the same order every round, on
    the same warm processes; then the N-streams phase once per column.  See
    ``bench/interleave.py`` for what is computed."""
    host = "127.0.0.1"
    order = list(columns)
    requests = {name: build_request(host, port, "/v1/chat/completions",
                                    chat_body(models["json"], False), token)
                for name, (port, token, models, _) in columns.items()}
    if args.warmup > 0:
        for name in order:
            await closed_loop(host, columns[name][0], requests[name], 32, args.warmup)
    rounds: list[dict[str, Any]] = []
    samples: dict[str, list[float]] = {name: [] for name in order}
    for index in range(args.interleave):
        print(f"round {index + 1}/{args.interleave}: {', '.join(order)}, "
              f"{args.phase_seconds}s c=32 + {args.phase_seconds}s c=1 each", flush=True)
        round_: dict[str, Any] = {"order": order}
        for name in order:
            port, _, _, pid = columns[name]
            watched = pid if pid is not None else upstream_pid
            figures: dict[str, Any] = {}
            for concurrency in (32, 1):
                before = cpu_seconds(watched)
                r = await closed_loop(host, port, requests[name], concurrency,
                                      args.phase_seconds)
                after = cpu_seconds(watched)
                figures[f"json_c{concurrency}"] = interleave.phase_figures(
                    r.latencies, r.requests, r.seconds,
                    None if before is None or after is None else after - before, r.errors)
                if concurrency == 1:
                    samples[name].extend(r.latencies)
            round_[name] = figures
        round_["ratios"] = baseline_check.ratios_of(round_)
        rounds.append(round_)
    streams_runs: list[dict[str, Any]] = []
    if args.streams > 0:
        streams_run: dict[str, Any] = {}
        for name in order:
            port, token, models, pid = columns[name]
            streams_run[name] = {"streams": await stream_starts(
                host, port, build_request(host, port, "/v1/chat/completions",
                                          chat_body(models["stream"], True), token),
                args, pid if pid is not None else upstream_pid, name)}
        streams_runs.append(streams_run)
    return {**interleave.summary(rounds, samples, streams_runs), "round_figures": rounds,
            "streams_runs": streams_runs}


def start_gateway(tmp: Path, port: int, cpu: str | None, profile: str | None,
                  plant_us: float = 0.0, source: Path | None = None) -> subprocess.Popen[bytes]:
    """``twistd -n lockgate`` on a fresh SQLite file; with ``plant_us`` through
    ``bench/planted_twistd.py`` (every /v1 request burns that much more CPU); with ``source``
    importing that tree first (``--before-tree``: an older commit in the same run)."""
    tmp.mkdir(parents=True, exist_ok=True)
    twistd = [str(Path(sys.executable).parent / "twistd")]
    if plant_us:
        twistd = [sys.executable, str(HERE / "planted_twistd.py"), str(plant_us)]
    profiling = [f"--profile={profile}", "--profiler=cprofile", "--savestats"] if profile else []
    command = pinned([*twistd, "-n", "--pidfile=", "-l", str(tmp / "twistd.log"),
                      *profiling, "lockgate", "--listen", f"tcp:{port}:interface=127.0.0.1",
                      "--database", f"sqlite:///{tmp / 'bench.sqlite3'}",
                      "--secret-file", str(tmp / "secret"),
                      # logging on, into a real file (the default, standard output, is
                      # /dev/null here, which would flatter the figures)
                      "--access-log", str(tmp / "access.log")], cpu)
    env = {**os.environ, "PYTHONPATH": str(source)} if source is not None else None
    return subprocess.Popen(command, cwd=str(tmp), stdout=subprocess.DEVNULL,  # noqa: S603
                            stderr=open(tmp / "twistd.stderr", "wb"), env=env)


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


#: the one bearer key of the treq proxy
TREQ_KEY = "sk-bench-treq-reference"


def start_reference(script: str, port: int, up_port: int, cpu: str | None,
                    *extra: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(pinned(  # noqa: S603
        [sys.executable, str(HERE / script), "--port", str(port),
         "--upstream", f"http://127.0.0.1:{up_port}", *extra], cpu),
        stdout=subprocess.DEVNULL)


async def start_lockgate(args: argparse.Namespace, tmp: Path, up_port: int,
                         cpu: str | None, results: dict[str, Any],
                         procs: list[subprocess.Popen[bytes]],
                         source: Path | None = None) -> tuple[int, str] | None:
    """Start and provision the gateway; (port, API key), or None with the reason noted."""
    gw_port = free_port()
    gateway = start_gateway(tmp, gw_port, cpu, args.profile, args.plant_slowdown, source)
    procs.append(gateway)
    if not wait_http(gw_port, "/healthz", 120):  # a busy machine starts it slowly
        log = (tmp / "twistd.log").read_text(errors="replace")[-2000:] if (
            tmp / "twistd.log").exists() else ""
        results["notes"].append("gateway not ready: twistd did not answer /healthz. " + log)
        return None
    print(f"gateway on :{gw_port} (pid {gateway.pid}, log {tmp / 'twistd.log'})", flush=True)
    try:
        key, log_lines = provision("127.0.0.1", gw_port, f"http://127.0.0.1:{up_port}",
                                   args.models, limits=not args.no_limits)
        results["notes"].extend(log_lines)
    except ProvisionError as exc:
        results["notes"].append(f"gateway not ready: provisioning failed at {exc}")
        return None
    probe = await closed_loop("127.0.0.1", gw_port, build_request(
        "127.0.0.1", gw_port, "/v1/chat/completions", chat_body("bench-json", False), key),
        1, 0.01)
    if probe.requests == 0:
        results["notes"].append(
            "gateway not ready: /v1/chat/completions answered "
            f"{probe.statuses or 'nothing'} {probe.first_error[:300]}")
        return None
    return gw_port, key


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
        "repeat": args.repeat, "warmup_s": args.warmup, "cpus": cpus,
        "measured_cpu": gateway_cpu, "limits": not args.no_limits,
        "plant_slowdown_us": args.plant_slowdown, "models": args.models,
        "stream_ramp_s": args.stream_ramp},
        "runs": [], "pinning": {}, "notes": []}
    up_port = args.upstream_port or free_port()
    upstream = subprocess.Popen(  # noqa: S603
        [sys.executable, str(HERE / "upstream.py"), "--port", str(up_port)],
        stdout=subprocess.DEVNULL)
    procs: list[subprocess.Popen[bytes]] = []
    try:
        if not wait_http(up_port, "/v1/models", 15):
            raise SystemExit("bench upstream did not start")
        print(f"upstream on :{up_port} (pid {upstream.pid})", flush=True)
        direct_models = {"json": args.models["bench-json"],
                         "stream": args.models["bench-stream"], "slow": args.models["bench-slow"]}
        # column -> (port, token, models, measured pid); "direct" measures the upstream
        columns: dict[str, tuple[int, str | None, dict[str, str], int | None]] = {
            "direct": (up_port, None, direct_models, None)}
        references = [("floor", "relay_floor.py", not args.no_floor),
                      ("treq", "treq_proxy.py", not args.no_treq)]
        for name, script, wanted in references:
            if not wanted:
                continue
            port = free_port()
            extra = (("--key", TREQ_KEY, "--access-log", str(tmp / "treq-access.log"))
                     if name == "treq" else ())
            proc = start_reference(script, port, up_port, gateway_cpu, *extra)
            procs.append(proc)
            if wait_http(port, "/", 15):
                token = TREQ_KEY if name == "treq" else None
                columns[name] = (port, token, direct_models, proc.pid)
            else:
                results["notes"].append(f"{script} did not start: no {name} column")
        if not args.direct_only:
            started = await start_lockgate(args, tmp, up_port, gateway_cpu, results, procs)
            if started is not None:
                columns["gateway"] = (started[0], started[1], {
                    "json": "bench-json", "stream": "bench-stream", "slow": "bench-slow"},
                    procs[-1].pid)
            if args.before_tree:
                before = await start_lockgate(args, tmp / "before", up_port, gateway_cpu,
                                              results, procs, Path(args.before_tree))
                if before is not None:
                    columns["before"] = (before[0], before[1], {
                        "json": "bench-json", "stream": "bench-stream",
                        "slow": "bench-slow"}, procs[-1].pid)
        else:
            results["notes"].append("gateway skipped (--direct-only)")
        for name, (_, _, _, pid) in columns.items():
            if pid is not None:
                results["pinning"][name] = pin_all_threads(pid, gateway_cpu)
        order = list(columns)
        if args.interleave > 0:
            results["interleaved"] = await interleaved(args, columns, upstream.pid)
            results["summary"] = results["interleaved"]["ratios"]
            return results
        for index in range(args.repeat):
            sequence = order if index % 2 == 0 else order[::-1]  # drift hits every column
            print(f"run {index + 1}/{args.repeat}: {', '.join(sequence)}", flush=True)
            run: dict[str, Any] = {"order": sequence}
            for name in sequence:
                port, token, models, pid = columns[name]
                if args.warmup > 0:
                    await closed_loop("127.0.0.1", port, build_request(
                        "127.0.0.1", port, "/v1/chat/completions",
                        chat_body(models["json"], False), token), 32, args.warmup)
                run[name] = await measure(name, port, token, models, args, pid, upstream.pid)
            run["ratios"] = baseline_check.ratios_of(run)
            results["runs"].append(run)
        results["summary"] = baseline_check.summarise([r["ratios"] for r in results["runs"]])
        return results
    finally:
        for proc in (*procs, upstream):
            if proc.poll() is None:
                proc.terminate()
                try:
                    proc.wait(60)  # a profiled gateway writes its stats on the way out
                except subprocess.TimeoutExpired:
                    proc.kill()
        if not args.keep:
            shutil.rmtree(tmp, ignore_errors=True)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="Lockgate vs direct, floor and treq benchmark")
    parser.add_argument("--duration", type=float, default=5.0,
                        help="seconds per non-stream phase")
    parser.add_argument("--warmup", type=float, default=1.0,
                        help="seconds of c=32 load before each column's phases (not counted)")
    parser.add_argument("--streams", type=int, default=500, help="0 skips the phase")
    parser.add_argument("--slow-streams", type=int, default=2000, help="0 skips the phase")
    parser.add_argument("--slow-pace", type=float, default=0.1, metavar="S",
                        help="seconds between a slow stream's chunks (1,200 chunks each)")
    parser.add_argument("--repeat", type=int, default=1,
                        help="runs, alternating the column order; each printed plus the spread")
    parser.add_argument("--interleave", type=int, default=0, metavar="K",
                        help="K rounds of short phases, the columns alternating within each "
                             "round (c=32 CPU/req and c=1 latency); ratios per round, median "
                             "and min-max; c=1 samples pooled per column (see "
                             "bench/interleave.py).  --repeat and the slow streams are not used")
    parser.add_argument("--phase-seconds", type=float, default=3.0,
                        help="seconds per phase with --interleave")
    parser.add_argument("--streams-only", action="store_true",
                        help="skip the non-stream phases: only the N streams and slow streams "
                             "phases (--streams 0 / --slow-streams 0 skip those too)")
    parser.add_argument("--upstream-port", type=int, default=0)
    parser.add_argument("--running-streams", type=int, default=0, metavar="R",
                        help="start R streams first and send the N streams once each has "
                             "its first byte: their longest chunk gap shows what the burst "
                             "did to running streams")
    parser.add_argument("--stream-ramp", type=float, default=0.0, metavar="S",
                        help="spread the N streams' starts evenly over S seconds instead of "
                             "sending them at once (the issue's 'opened over 1 s' form)")
    parser.add_argument("--before-tree", metavar="DIR",
                        help="a second Lockgate column ('before') importing DIR first, e.g. "
                             "`git archive` of the base commit: an A/B in the same run")
    parser.add_argument("--direct-only", action="store_true",
                        help="no gateway: only the upstream and the reference proxies")
    parser.add_argument("--no-floor", action="store_true",
                        help="skip the bare relay built from gateway/channels/relay.py")
    parser.add_argument("--no-treq", action="store_true",
                        help="skip the bare Twisted + treq proxy (bench/treq_proxy.py)")
    parser.add_argument("--no-limits", action="store_true",
                        help="provision with both rate limiters off (the old default)")
    parser.add_argument("--profile", metavar="FILE",
                        help="run the gateway under cProfile; stats saved to FILE, top printed")
    parser.add_argument("--check", action="store_true",
                        help="compare the ratios with --baseline; exit 1 on a regression")
    parser.add_argument("--baseline", default=str(HERE / "baseline.json"))
    parser.add_argument("--tolerance", type=float, default=None,
                        help="allowed rise of a ratio (default: the baseline's, 0.15)")
    parser.add_argument("--write-baseline", action="store_true",
                        help="write this run's median ratios to --baseline")
    parser.add_argument("--plant-slowdown", type=float, default=0.0, metavar="US",
                        help="make every gateway request burn US more microseconds of CPU "
                             "(bench/planted_twistd.py), to see --check fail")
    parser.add_argument("--keep", action="store_true", help="keep the temp dir (logs, db)")
    parser.add_argument("--out", default=os.path.join(tempfile.gettempdir(),
                                                      "lockgate-bench-results.json"))
    args = parser.parse_args(argv)
    args.models = models_for(args.slow_pace)
    return args


def git_commit() -> str:
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"],  # noqa: S607
                              cwd=HERE, capture_output=True, text=True,
                              check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    results = asyncio.run(main_async(args))
    for index, run in enumerate(results["runs"]):
        print(f"\nrun {index + 1} (order: {', '.join(run['order'])})")
        print(table(run, args.streams))
    print()
    if "interleaved" in results:
        print(interleave.report(results["interleaved"]))
    else:
        print(ratio_table(results.get("summary") or {}))
    for name, pinning in results["pinning"].items():
        print(f"pinning {name}: {pinning}")
    for note in results["notes"]:
        print("note:", note)
    Path(args.out).write_text(json.dumps(results, indent=2))
    print(f"results written to {args.out}")
    if args.profile and Path(args.profile).exists():
        import pstats

        print(f"\ngateway profile ({args.profile}), top functions by own time:")
        pstats.Stats(args.profile).sort_stats("tottime").print_stats(30)
    summary = results.get("summary") or {}
    missing = [name for name, figures in summary.items() if figures["median"] is None]
    if args.write_baseline and missing:
        raise SystemExit(f"baseline not written: {', '.join(missing)} not measured")
    if args.write_baseline:
        Path(args.baseline).write_text(json.dumps(baseline_check.baseline_from(summary, {
            "measured": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
            "commit": git_commit(),
            "command": "bench/run.py " + " ".join(sys.argv[1:]),
            "mode": (f"interleaved, {args.interleave} rounds of {args.phase_seconds}s phases"
                     if args.interleave > 0 else f"{args.repeat} alternating runs"),
            "load_average": os.getloadavg()[0]}), indent=2) + "\n")
        print(f"baseline written to {args.baseline}")
    if args.check:
        baseline = json.loads(Path(args.baseline).read_text())
        verdicts = baseline_check.compare(summary, baseline, args.tolerance)
        what = (f"{args.interleave} interleaved rounds" if args.interleave > 0
                else f"{args.repeat} run(s)")
        print(f"\ncheck against {args.baseline} (medians of {what}):")
        for verdict in verdicts:
            print("  " + verdict.line())
        if baseline_check.failed(verdicts):
            print("REGRESSION: a ratio rose more than the tolerance above the baseline")
            raise SystemExit(1)
        print("no regression")


if __name__ == "__main__":
    main()
