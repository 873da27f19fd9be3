"""Assistant runs under load: per-round overhead, CPU and transactions per round, SSE tails.

A script, not a test::

    python bench/assistant_runs.py [--runs 200] [--rounds 5] [--tails 300] [--repeat 2]
                                   [--model-latency 0 0.5 1.0] [--profile FILE]

Starts ``bench/upstream.py`` and a real ``twistd -n lockgate`` (temporary SQLite file, access
log to a file, a metrics listener), provisions it through the console API
(``bench/provision.py``), logs in as the bench admin and measures, ``--repeat`` times:

1. **Reference.**  ``--runs`` x ``--rounds`` plain ``POST /v1/chat/completions`` calls with the
   bench API key (32 client threads): the gateway's CPU ms and database transactions per call.
   Measured in the same process minutes apart from the runs, it is the yardstick: this
   machine's CPU speed varies up to 2x between runs, so the ratio "one round / one /v1 call"
   means more than either absolute figure.
2. **One run at a time.**  Assistant runs of exactly ``--rounds`` model rounds (the upstream
   answers a ``tasks_list`` tool call until the last round, then text).  A round's wall time
   comes from the run's own events: from one ``model_round`` event to the next (the last one:
   to ``done``), i.e. the event writes, one internal /v1 call (routing, reservation, upstream,
   settlement queued) and one tool call with its two ``tool_call`` events.  The upstream's own
   time for the same request (measured directly, same loopback, same body size) is subtracted:
   the rest is Lockgate's *per-round overhead*.
3. **Concurrent.**  ``--runs`` runs started at once; the same per-round figures (they now
   include queueing behind the other runs on one process), and the gateway's CPU ms and
   transactions per round over the whole phase (from /proc and the metrics listener; the
   runs' start and finish are amortised over their rounds).  The phase ends when the gateway
   has gone idle, so no polling of the runs is counted.  The same phase with one-round runs
   gives the *marginal* round (``marginal_round``: what one more round costs, the runs'
   start and finish cancelled out); CPU is also split into the reactor thread and the rest
   (the database thread pool).  On a loaded machine the marginal figure is the noisiest one
   (a difference of two phases measured a minute apart): read it over several runs.
   ``core_utilisation`` is the gateway's CPU seconds over the phase's wall (to the moment it
   was last busy): near 1.0 the one core is saturated and rounds queue behind each other.
4. **With a model's latency** (``--model-latency 0.5 1.0``: seconds; 0 is phase 3).  The
   instant upstream makes phase 3 a closed loop at saturation, whose p50 is queueing (rounds in
   flight x wall per round), not what a user sees when a model takes 0.5-3 s per round.  Here
   the upstream holds every model call of the run's model (the ``latency-<ms>`` and
   ``jitter-<ms>`` knobs of ``bench/upstream.py`` in the upstream model name; a timer, not a
   sleep) and the same concurrent phase runs again.  ``--model-jitter`` (default 0.5) spreads
   the holds over latency x (1 +/- 0.5): with one exact hold the 200 runs move in lockstep and
   every round lands in one burst, which no real set of agents does.  The hold of each call is
   a hash of the run's own user message (each run sends a different one) and the round, so
   the bench knows it exactly: per-round overhead = wall(round) - that round's hold - direct
   p50 of the upstream at 0 latency (the upstream cannot report its hold through Lockgate; a
   timer firing late on a loaded machine is counted as overhead, never subtracted).  Reported
   with rounds in flight, CPU per round and the core's utilisation over the phase.
Then **SSE tails**: a second model points at a socket that accepts and never answers; ``--tails``
runs wait on it, one ``GET /runs/:id/events`` SSE tail is opened per run, and the RSS growth
divided by the number of tails is the memory per open tail (the waiting runs' own memory is
measured first and left out).

Run it on an otherwise idle machine: other processes move every figure.  ``--profile FILE``
runs the gateway under cProfile (twistd ``--profile``; reactor thread only).
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import secrets
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from itertools import pairwise
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from bench.provision import provision  # noqa: E402
from bench.run import cpu_seconds, free_port, rss_kib, wait_http  # noqa: E402
from bench.upstream import jittered_hold_ms  # noqa: E402

TERMINAL = ("completed", "failed", "cancelled")


def start_lockgate(tmp: Path, port: int, metrics_port: int, profile: str | None, *,
                   source: Path | None = None, cpu: int | None = None
                   ) -> subprocess.Popen[bytes]:
    """``source``: import Lockgate from that tree (first on PYTHONPATH; a code A/B's old
    side); ``cpu``: every thread pinned to that CPU (``taskset -a``)."""
    twistd = Path(sys.executable).parent / "twistd"
    profiling = [f"--profile={profile}", "--profiler=cprofile", "--savestats"] if profile else []
    pinning = ["taskset", "-a", "-c", str(cpu)] if cpu is not None else []
    env = {**os.environ, "PYTHONPATH": str(source)} if source is not None else None
    command = [*pinning, str(twistd), "-n", "--pidfile=", "-l", str(tmp / "twistd.log"),
               *profiling,
               "lockgate", "--listen", f"tcp:{port}:interface=127.0.0.1",
               "--metrics-listen", f"tcp:{metrics_port}:interface=127.0.0.1",
               "--database", f"sqlite:///{tmp / 'bench.sqlite3'}",
               "--secret-file", str(tmp / "secret"), "--access-log", str(tmp / "access.log")]
    return subprocess.Popen(command, cwd=str(tmp), env=env,  # noqa: S603
                            stdout=subprocess.DEVNULL, stderr=open(tmp / "twistd.stderr", "wb"))


def request(port: int, method: str, path: str, token: str, body: Any = None,
            timeout: float = 120) -> tuple[int, Any]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        headers = {"Content-Type": "application/json"}
        if token:
            headers["Authorization"] = f"Bearer {token}"
        conn.request(method, path, json.dumps(body) if body is not None else None, headers)
        response = conn.getresponse()
        raw = response.read()
        return response.status, json.loads(raw) if raw else None
    finally:
        conn.close()


def login(port: int) -> str:
    status, answer = request(port, "POST", "/auth/password/login", "", {
        "identifier": "benchadmin", "password": "bench-password-1"})
    if status != 200 or "token" not in answer:
        raise SystemExit(f"login failed: {answer}")
    return str(answer["token"])


def transactions(metrics_port: int) -> int | None:
    """The gateway's transaction counter (None from a build without it)."""
    conn = http.client.HTTPConnection("127.0.0.1", metrics_port, timeout=30)
    conn.request("GET", "/metrics")
    text = conn.getresponse().read().decode()
    conn.close()
    for line in text.splitlines():
        if line.startswith("lockgate_db_transactions_total "):
            return int(float(line.split()[1]))
    return None


def reactor_cpu_seconds(pid: int) -> float:
    """CPU seconds of the gateway's main (reactor) thread; the rest is its thread pools."""
    with open(f"/proc/{pid}/task/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class Meter:
    """The gateway's CPU seconds and database transactions between two moments."""

    def __init__(self, pid: int, metrics_port: int) -> None:
        self.pid, self.metrics_port = pid, metrics_port
        self.cpu0 = cpu_seconds(pid) or 0.0
        self.reactor0 = reactor_cpu_seconds(pid)
        self.tx0 = transactions(metrics_port)

    def cpu(self) -> float:
        """The gateway's CPU seconds since the start (all threads)."""
        return (cpu_seconds(self.pid) or 0.0) - self.cpu0

    def per(self, units: int) -> dict[str, float | None]:
        cpu = self.cpu()
        reactor = reactor_cpu_seconds(self.pid) - self.reactor0
        tx1 = transactions(self.metrics_port)
        tx = None if tx1 is None or self.tx0 is None else tx1 - self.tx0
        return {"cpu_ms": round(cpu * 1000 / units, 3),
                "reactor_thread_cpu_ms": round(reactor * 1000 / units, 3),
                "db_transactions": None if tx is None else round(tx / units, 2)}


def wait_idle(pid: int, quiet: float = 0.5) -> float:
    """Until the gateway used no CPU for ``quiet`` seconds (10 ms ticks); when (perf_counter)
    it was last seen busy."""
    last, since = cpu_seconds(pid), time.perf_counter()
    while time.perf_counter() - since < quiet:
        time.sleep(0.1)
        now = cpu_seconds(pid)
        if now != last:
            last, since = now, time.perf_counter()
    return since


def start_run(port: int, token: str, model: str, text: str = "benchmark round") -> str:
    status, body = request(port, "POST", "/api/user/advanced-chat/completions", token, {
        "model": model, "mode": "assistant",
        "messages": [{"role": "user", "content": text}]})
    if status != 202:
        raise SystemExit(f"completion refused: {status} {body}")
    return str(body["run"]["id"])


def run_record(port: int, token: str, run_id: str) -> dict[str, Any]:
    _status, run = request(port, "GET", f"/api/user/advanced-chat/runs/{run_id}", token)
    return dict(run)


def round_ms(port: int, token: str, run_id: str, rounds: int) -> list[float]:
    """Wall ms of each model round of a completed run, from its events' timestamps."""
    return [(b - a).total_seconds() * 1000
            for a, b in pairwise(round_marks(port, token, run_id, rounds))]


def round_marks(port: int, token: str, run_id: str, rounds: int) -> list[datetime]:
    """When each model round of a completed run began, and when it ended (``done``)."""
    run = run_record(port, token, run_id)
    if run["status"] != "completed" or run["current_round"] != rounds:
        raise SystemExit(f"run {run_id} ended {run['status']} after {run['current_round']} "
                         f"rounds: {run}")
    _status, events = request(port, "GET", f"/api/user/advanced-chat/runs/{run_id}/events",
                              token)
    return [datetime.fromisoformat(e["created_at"]) for e in events
            if (e["event"] == "status" and e["payload"].get("message") == "model_round")
            or e["event"] == "done"]


def in_flight(marks: list[list[datetime]]) -> dict[str, float]:
    """Little's law over the runs' rounds: how many rounds were in flight on average (the sum
    of the rounds' walls over the span from the first round's start to the last run's end),
    and the span per round (what one more round costs in wall time on this process when it
    is saturated).  A round's wall at saturation is about the first times the second: when
    runs start faster, more of them are in their rounds at once and each round waits longer
    behind the others, however cheap a round is."""
    spans = [(b - a).total_seconds() for m in marks for a, b in pairwise(m)]
    span = (max(m[-1] for m in marks) - min(m[0] for m in marks)).total_seconds()
    return {"rounds_in_flight_mean": round(sum(spans) / span, 1),
            "span_ms_per_round": round(span * 1000 / len(spans), 3)}


def quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * q))]


def overhead(walls: list[float], upstream: float) -> dict[str, float]:
    return {"round_p50_ms": round(statistics.median(walls), 2),
            "round_p99_ms": round(quantile(walls, 0.99), 2),
            "overhead_p50_ms": round(statistics.median(walls) - upstream, 2),
            "overhead_p99_ms": round(quantile(walls, 0.99) - upstream, 2)}


def serial_phase(port: int, token: str, model: str, runs: int, rounds: int,
                 upstream: float) -> dict[str, Any]:
    walls: list[float] = []
    for _ in range(runs):
        run_id = start_run(port, token, model)
        while run_record(port, token, run_id)["status"] not in TERMINAL:
            time.sleep(0.2)  # the figures come from the run's events, not from this poll
        walls += round_ms(port, token, run_id, rounds)
    return {"runs": runs, "rounds": len(walls), **overhead(walls, upstream)}


def concurrent_phase(port: int, metrics_port: int, pid: int, token: str, model: str,
                     runs: int, rounds: int, upstream: float, latency: float = 0.0,
                     jitter: float = 0.0) -> dict[str, Any]:
    """``runs`` runs at once.  With a model ``latency`` (seconds; ``jitter`` a fraction of it)
    each run sends its own user message, so the bench knows the upstream's hold of every
    round (``jittered_hold_ms``) and subtracts it, with ``upstream`` (the upstream's own time
    per call at no latency), from that round's wall.  The gateway idles while the upstream
    holds the calls, so the phase ends only after the longest hold + 0.5 s without CPU; its
    wall runs to the moment the gateway was last busy."""
    # as the upstream model name carries them (whole ms)
    latency_ms, jitter_ms = round(latency * 1000), round(latency * 1000 * jitter)
    tag = secrets.token_hex(4)
    texts = [f"benchmark round {tag}-{n}" for n in range(runs)]
    wait_idle(pid)
    meter = Meter(pid, metrics_port)
    began = time.perf_counter()
    with ThreadPoolExecutor(32) as pool:
        run_ids = list(pool.map(lambda text: start_run(port, token, model, text), texts))
    last_busy = wait_idle(pid, quiet=(latency_ms + jitter_ms) / 1000 + 0.5)
    cpu = meter.cpu()
    cost = meter.per(runs * rounds)
    wall = last_busy - began
    while any(run_record(port, token, r)["status"] not in TERMINAL for r in run_ids):
        time.sleep(0.5)
    with ThreadPoolExecutor(8) as pool:
        marks = list(pool.map(lambda r: round_marks(port, token, r, rounds), run_ids))
    walls: list[float] = []
    net: list[float] = []
    for text, run_marks in zip(texts, marks, strict=True):
        for done, (a, b) in enumerate(pairwise(run_marks)):
            wall_ms = (b - a).total_seconds() * 1000
            walls.append(wall_ms)
            net.append(wall_ms - jittered_hold_ms(latency_ms, jitter_ms, text, done))
    figures = overhead(net, upstream)
    figures["round_p50_ms"] = round(statistics.median(walls), 2)
    figures["round_p99_ms"] = round(quantile(walls, 0.99), 2)
    return {"runs": runs, "rounds": len(walls), "model_latency_s": latency,
            "model_jitter_ms": round(jitter_ms, 1), "wall_s": round(wall, 2), **figures,
            **in_flight(marks), "core_utilisation": round(cpu / wall, 3) if wall > 0 else None,
            "per_round": cost}


def reference_phase(port: int, metrics_port: int, pid: int, key: str,
                    calls: int) -> dict[str, Any]:
    """Plain /v1 calls through the same gateway: CPU ms and transactions per call."""
    body = json.dumps({"model": "bench-reference",
                       "messages": [{"role": "user", "content": "benchmark round"}]})

    def worker(count: int) -> None:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        for _ in range(count):
            conn.request("POST", "/v1/chat/completions", body, {
                "Content-Type": "application/json", "Authorization": f"Bearer {key}"})
            response = conn.getresponse()
            response.read()
            if response.status != 200:
                raise SystemExit(f"/v1 reference call answered {response.status}")
        conn.close()

    wait_idle(pid)
    meter = Meter(pid, metrics_port)
    with ThreadPoolExecutor(32) as pool:
        list(pool.map(worker, [calls // 32 + (1 if i < calls % 32 else 0) for i in range(32)]))
    wait_idle(pid)
    return {"calls": calls, "per_call": meter.per(calls)}


def upstream_ms(port: int, rounds: int, samples: int = 300) -> float:
    """The upstream's own time for a mid-run round's request (same loopback, keep-alive)."""
    messages: list[dict[str, Any]] = [{"role": "system", "content": "x" * 1500},
                                      {"role": "user", "content": "benchmark round"}]
    for n in range(rounds // 2):
        messages += [{"role": "assistant", "content": None, "tool_calls": [{
            "id": f"call_{n}", "type": "function",
            "function": {"name": "tasks_list", "arguments": "{}"}}]},
            {"role": "tool", "tool_call_id": f"call_{n}", "content": "No tasks yet."}]
    body = json.dumps({"model": f"bench+rounds-{rounds}", "messages": messages})
    times = []
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    for _ in range(samples):
        began = time.perf_counter()
        conn.request("POST", "/v1/chat/completions", body, {"Content-Type": "application/json"})
        conn.getresponse().read()
        times.append(time.perf_counter() - began)
    conn.close()
    return statistics.median(times) * 1000


def tails_phase(port: int, gateway_pid: int, token: str, tails: int) -> dict[str, Any]:
    before = rss_kib(gateway_pid) or 0
    with ThreadPoolExecutor(32) as pool:
        run_ids = list(pool.map(lambda _: start_run(port, token, "bench-silent"), range(tails)))
    time.sleep(2)
    with_runs = rss_kib(gateway_pid) or 0
    sockets = []
    for run_id in run_ids:
        sock = socket.create_connection(("127.0.0.1", port))
        sock.sendall((f"GET /api/user/advanced-chat/runs/{run_id}/events HTTP/1.1\r\n"
                      f"Host: bench\r\nAccept: text/event-stream\r\n"
                      f"Authorization: Bearer {token}\r\n\r\n").encode())
        sockets.append(sock)
    time.sleep(3)
    with_tails = rss_kib(gateway_pid) or 0
    for sock in sockets:
        sock.close()
    with ThreadPoolExecutor(32) as pool:
        list(pool.map(lambda run_id: request(
            port, "POST", f"/api/user/advanced-chat/runs/{run_id}/stop", token), run_ids))
    return {"tails": tails, "rss_kib_before": before, "rss_kib_with_waiting_runs": with_runs,
            "rss_kib_with_tails": with_tails,
            "kib_per_waiting_run": round((with_runs - before) / tails, 1),
            "kib_per_open_tail": round((with_tails - with_runs) / tails, 1)}


def spread(repeats: list[dict[str, Any]], *path: str) -> list[float] | None:
    values = []
    for result in repeats:
        value: Any = result
        for key in path:
            value = value[key]
        values.append(value)
    if None in values:
        return None
    return [min(values), max(values)]


def marginal(one: dict[str, Any], many: dict[str, Any], rounds: int) -> dict[str, Any]:
    """What one more round costs: runs of ``rounds`` rounds minus runs of one round, per
    extra round (the run's start and finish cancel out)."""
    out: dict[str, Any] = {}
    for key in ("cpu_ms", "reactor_thread_cpu_ms", "db_transactions"):
        a, b = one["per_round"][key], many["per_round"][key]
        out[key] = None if a is None or b is None else round(
            (b * rounds - a) / (rounds - 1), 3)
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--serial-runs", type=int, default=30)
    parser.add_argument("--tails", type=int, default=300)
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--model-latency", type=float, nargs="+", default=[0.0],
                        metavar="SECONDS",
                        help="the upstream holds each model call this long; one concurrent "
                             "phase per value (0: the saturation figure)")
    parser.add_argument("--model-jitter", type=float, default=0.5, metavar="FRACTION",
                        help="each call's hold spreads over latency x (1 +/- FRACTION), so "
                             "runs do not move in lockstep (0: every call holds exactly)")
    parser.add_argument("--profile", help="cProfile the gateway into this file")
    args = parser.parse_args(argv)
    if args.rounds < 2:
        parser.error("--rounds must be at least 2 (the marginal round compares with 1)")
    tmp = Path(tempfile.mkdtemp(prefix="lockgate-assistant-bench-"))
    ports: set[int] = set()
    while len(ports) < 3:  # three distinct ones (a released port may come back at once)
        ports.add(free_port())
    up_port, gw_port, metrics_port = sorted(ports)
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(4096)  # accepts (the kernel does) and never answers
    upstream = subprocess.Popen([sys.executable, str(HERE / "upstream.py"),  # noqa: S603
                                 "--port", str(up_port)], stdout=subprocess.DEVNULL)
    gateway: subprocess.Popen[bytes] | None = None
    model = "bench-assistant"
    try:
        if not wait_http(up_port, "/v1/models", 15):
            raise SystemExit("bench upstream did not start")
        gateway = start_lockgate(tmp, gw_port, metrics_port, args.profile)
        if not wait_http(gw_port, "/healthz", 30):
            raise SystemExit(f"gateway did not start; see {tmp}")
        latencies = sorted(set(args.model_latency) - {0.0})
        key, _log = provision("127.0.0.1", gw_port, f"http://127.0.0.1:{up_port}", {
            model: f"bench+rounds-{args.rounds}", "bench-assistant-1": "bench+rounds-1",
            "bench-reference": "bench", **{latency_model(latency): (
                f"bench+rounds-{args.rounds}+latency-{round(latency * 1000)}"
                f"+jitter-{round(latency * 1000 * args.model_jitter)}")
                for latency in latencies}})
        token = login(gw_port)
        _silent_channel(gw_port, token, silent.getsockname()[1])
        direct = upstream_ms(up_port, args.rounds)
        concurrent_phase(gw_port, metrics_port, gateway.pid, token, model, 20, args.rounds,
                         direct)  # warm-up
        reference_phase(gw_port, metrics_port, gateway.pid, key, 200)  # warm-up
        repeats = []
        for _ in range(args.repeat):
            repeats.append({
                "reference_v1": reference_phase(gw_port, metrics_port, gateway.pid, key,
                                                args.runs * args.rounds),
                "one_at_a_time": serial_phase(gw_port, token, model, args.serial_runs,
                                              args.rounds, direct),
                "concurrent": concurrent_phase(gw_port, metrics_port, gateway.pid, token,
                                               model, args.runs, args.rounds, direct),
                "concurrent_one_round": concurrent_phase(
                    gw_port, metrics_port, gateway.pid, token, "bench-assistant-1", args.runs,
                    1, direct)})
            result = repeats[-1]
            result["with_model_latency"] = {
                str(latency): concurrent_phase(
                    gw_port, metrics_port, gateway.pid, token, latency_model(latency),
                    args.runs, args.rounds, direct, latency, args.model_jitter)
                for latency in latencies}
            result["marginal_round"] = marginal(result["concurrent_one_round"],
                                                result["concurrent"], args.rounds)
            v1 = result["reference_v1"]["per_call"]["cpu_ms"]
            result["round_cpu_over_v1_call_cpu"] = round(
                result["concurrent"]["per_round"]["cpu_ms"] / v1, 2)
            result["marginal_round_cpu_over_v1_call_cpu"] = round(
                result["marginal_round"]["cpu_ms"] / v1, 2)
        summary = {key: spread(repeats, *path) for key, path in {
            "serial_overhead_p50_ms": ("one_at_a_time", "overhead_p50_ms"),
            "serial_overhead_p99_ms": ("one_at_a_time", "overhead_p99_ms"),
            "concurrent_overhead_p50_ms": ("concurrent", "overhead_p50_ms"),
            "concurrent_overhead_p99_ms": ("concurrent", "overhead_p99_ms"),
            "concurrent_rounds_in_flight_mean": ("concurrent", "rounds_in_flight_mean"),
            "concurrent_span_ms_per_round": ("concurrent", "span_ms_per_round"),
            "cpu_ms_per_round": ("concurrent", "per_round", "cpu_ms"),
            "db_transactions_per_round": ("concurrent", "per_round", "db_transactions"),
            "cpu_ms_per_v1_call": ("reference_v1", "per_call", "cpu_ms"),
            "db_transactions_per_v1_call": ("reference_v1", "per_call", "db_transactions"),
            "marginal_round_cpu_ms": ("marginal_round", "cpu_ms"),
            "marginal_round_db_transactions": ("marginal_round", "db_transactions"),
            "round_cpu_over_v1_call_cpu": ("round_cpu_over_v1_call_cpu",),
            "marginal_round_cpu_over_v1_call_cpu": ("marginal_round_cpu_over_v1_call_cpu",),
        }.items()}
        for latency in latencies:
            for figure, path in {
                    "overhead_p50_ms": ("overhead_p50_ms",),
                    "overhead_p99_ms": ("overhead_p99_ms",),
                    "rounds_in_flight_mean": ("rounds_in_flight_mean",),
                    "cpu_ms_per_round": ("per_round", "cpu_ms"),
                    "core_utilisation": ("core_utilisation",)}.items():
                summary[f"latency_{latency}s_{figure}"] = spread(
                    repeats, "with_model_latency", str(latency), *path)
        summary["concurrent_core_utilisation"] = spread(repeats, "concurrent",
                                                        "core_utilisation")
        results = {"upstream_direct_p50_ms": round(direct, 3), "rounds_per_run": args.rounds,
                   "min_max": summary, "repeats": repeats,
                   "sse_tails": tails_phase(gw_port, gateway.pid, token, args.tails),
                   "cpus": os.cpu_count(), "load_average": os.getloadavg()}
        print(json.dumps(results, indent=2))
    finally:
        for process in (gateway, upstream):
            if process is not None:
                process.terminate()
                process.wait(30)
        silent.close()


def latency_model(latency: float) -> str:
    """The public model whose upstream holds each call ``latency`` seconds."""
    return f"bench-assistant-l{round(latency * 1000)}"


def _silent_channel(port: int, token: str, silent_port: int) -> None:
    """A second user channel + channel whose upstream never answers, for ``bench-silent``."""
    def call(method: str, path: str, body: Any) -> Any:
        status, answer = request(port, method, path, token, body)
        if status not in (200, 201):
            raise SystemExit(f"{method} {path}: {status} {answer}")
        return answer

    def created_id(answer: Any) -> int:
        for candidate in (answer, answer.get("data"), answer.get("item")):
            if isinstance(candidate, dict) and isinstance(candidate.get("id"), int):
                return int(candidate["id"])
        raise SystemExit(f"no id in {answer}")

    user_channel = created_id(call("POST", "/api/user-channels", {
        "name": "silent", "routing_algorithm": "priority", "enabled": True,
        "rate_limit_enabled": False}))
    channel = created_id(call("POST", "/api/channels", {
        "name": "silent-upstream", "type": "compat",
        "base_url": f"http://127.0.0.1:{silent_port}", "api_key": "sk-silent",
        "user_channel_id": user_channel, "priority": 1, "weight": 1, "enabled": True}))
    model = created_id(call("POST", "/api/models", {
        "model_name": "bench-silent", "input_price": "0.000001", "output_price": "0.000001",
        "enabled": True}))
    call("POST", f"/api/channels/{channel}/models",
         {"model_id": model, "upstream_model_name": "bench", "enabled": True})


if __name__ == "__main__":
    main()
