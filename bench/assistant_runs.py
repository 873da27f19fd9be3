"""Assistant runs under load: per-round overhead and memory per open SSE event tail.

A script, not a test: ``python bench/assistant_runs.py [--runs 200] [--tails 300]``.

Starts ``bench/upstream.py`` and a real ``twistd -n lockgate`` (temporary SQLite file, access
log to a file), provisions it through the console API (``bench/provision.py``), logs in as the
bench admin and then:

1. **Round overhead.**  Starts ``--runs`` assistant-mode completions at once (one model round
   each: the bench upstream answers with text) and reads each run's ``started_at`` /
   ``finished_at``.  A run's round = the ``model_round`` event, one internal /v1 call (routing,
   reservation, upstream request, settlement queued), the ``done`` event and the finishing
   transaction.  The upstream's own time is measured directly (same JSON answer, same
   loopback) and subtracted, so "overhead" is Lockgate's part.  The same is measured with one
   run at a time (no queueing).
2. **SSE tails.**  Points a second model at a loopback socket that accepts and never answers,
   starts ``--tails`` runs on it (each waits on its model call) and opens one
   ``GET /runs/:id/events`` SSE tail per run; the gateway's RSS before and after, divided by
   the number of tails, is the memory per open tail (the waiting runs' own memory is measured
   first and left out).

Run it on an otherwise idle machine: other processes move every figure.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from bench.provision import provision  # noqa: E402
from bench.run import free_port, rss_kib, start_gateway, wait_http  # noqa: E402

MODELS = {"bench-assistant": "bench", "bench-silent": "bench"}


def request(port: int, method: str, path: str, token: str, body: Any = None,
            timeout: float = 60) -> tuple[int, Any]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        headers = {"Content-Type": "application/json", "Authorization": f"Bearer {token}"}
        conn.request(method, path, json.dumps(body) if body is not None else None, headers)
        response = conn.getresponse()
        raw = response.read()
        return response.status, json.loads(raw) if raw else None
    finally:
        conn.close()


def login(port: int) -> str:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    conn.request("POST", "/auth/password/login", json.dumps(
        {"identifier": "benchadmin", "password": "bench-password-1"}),
        {"Content-Type": "application/json"})
    answer = json.loads(conn.getresponse().read())
    conn.close()
    if "token" not in answer:
        raise SystemExit(f"login failed: {answer}")
    return str(answer["token"])


def start_run(port: int, token: str, model: str) -> str:
    status, body = request(port, "POST", "/api/user/advanced-chat/completions", token, {
        "model": model, "mode": "assistant",
        "messages": [{"role": "user", "content": "benchmark round"}]})
    if status != 202:
        raise SystemExit(f"completion refused: {status} {body}")
    return str(body["run"]["id"])


def wait_finished(port: int, token: str, run_id: str) -> dict[str, Any]:
    while True:
        _status, run = request(port, "GET", f"/api/user/advanced-chat/runs/{run_id}", token)
        if run["status"] in ("completed", "failed", "cancelled"):
            return dict(run)
        time.sleep(0.5)  # the figures come from the run record, not from this poll


def seconds(run: dict[str, Any]) -> float:
    started = datetime.fromisoformat(run["started_at"])
    finished = datetime.fromisoformat(run["finished_at"])
    return (finished - started).total_seconds()


def upstream_ms(port: int, samples: int = 200) -> float:
    body = json.dumps({"model": "bench", "messages": [{"role": "user", "content": "x"}]})
    times = []
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    for _ in range(samples):
        began = time.perf_counter()
        conn.request("POST", "/v1/chat/completions", body, {"Content-Type": "application/json"})
        conn.getresponse().read()
        times.append(time.perf_counter() - began)
    conn.close()
    return statistics.median(times) * 1000


def timeline_ms(port: int, token: str, run: dict[str, Any]) -> dict[str, float]:
    """Milliseconds from the run's start to each of its events (where a round's time goes)."""
    _status, events = request(port, "GET", f"/api/user/advanced-chat/runs/{run['id']}/events",
                              token)
    started = datetime.fromisoformat(run["started_at"])
    out = {}
    for event in events:
        name = event["payload"].get("message") if event["event"] == "status" else event["event"]
        at = datetime.fromisoformat(event["created_at"])
        out[f"{event['seq']}:{name}"] = round((at - started).total_seconds() * 1000, 2)
    out["finished"] = round(seconds(run) * 1000, 2)
    return out


def runs_phase(port: int, token: str, count: int, concurrency: int,
               last: list[dict[str, Any]] | None = None) -> list[float]:
    """``count`` runs, ``concurrency`` of them live at once (started by 32 client threads: a
    burst of hundreds of connects would only measure the listen backlog)."""
    def finished(run_id: str) -> float:
        run = wait_finished(port, token, run_id)
        if run["status"] != "completed":
            raise SystemExit(f"run {run['id']} ended {run['status']}: {run}")
        if last is not None:
            last[:] = [run]
        return seconds(run)

    durations: list[float] = []
    with ThreadPoolExecutor(min(32, concurrency)) as pool:
        for first in range(0, count, concurrency):
            batch = range(first, min(count, first + concurrency))
            run_ids = list(pool.map(lambda _: start_run(port, token, "bench-assistant"),
                                    batch))
            durations += pool.map(finished, run_ids)
    return durations


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


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--tails", type=int, default=300)
    args = parser.parse_args(argv)
    tmp = Path(tempfile.mkdtemp(prefix="lockgate-assistant-bench-"))
    up_port, gw_port = free_port(), free_port()
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(4096)  # accepts (the kernel does) and never answers
    upstream = subprocess.Popen([sys.executable, str(HERE / "upstream.py"),  # noqa: S603
                                 "--port", str(up_port)], stdout=subprocess.DEVNULL)
    gateway: subprocess.Popen[bytes] | None = None
    try:
        if not wait_http(up_port, "/v1/models", 15):
            raise SystemExit("bench upstream did not start")
        gateway = start_gateway(tmp, gw_port, None, None)
        if not wait_http(gw_port, "/healthz", 30):
            raise SystemExit(f"gateway did not start; see {tmp}")
        provision("127.0.0.1", gw_port, f"http://127.0.0.1:{up_port}", {"bench-assistant":
                                                                         "bench"})
        token = login(gw_port)
        _silent_channel(gw_port, token, silent.getsockname()[1])
        direct = upstream_ms(up_port)
        runs_phase(gw_port, token, 20, 20)  # warm-up
        last: list[dict[str, Any]] = []
        serial = runs_phase(gw_port, token, 50, 1, last)
        began = time.perf_counter()
        loaded = runs_phase(gw_port, token, args.runs, args.runs)
        wall = time.perf_counter() - began
        results = {
            "upstream_direct_p50_ms": round(direct, 2),
            "one_at_a_time": {"runs": len(serial),
                              "round_p50_ms": round(statistics.median(serial) * 1000, 2),
                              "overhead_p50_ms": round(statistics.median(serial) * 1000
                                                       - direct, 2),
                              "one_run_timeline_ms": timeline_ms(gw_port, token, last[0])},
            "concurrent": {"runs": len(loaded), "wall_s": round(wall, 2),
                           "round_p50_ms": round(statistics.median(loaded) * 1000, 2),
                           "round_p95_ms": round(sorted(loaded)[int(len(loaded) * .95) - 1]
                                                 * 1000, 2)},
            "sse_tails": tails_phase(gw_port, gateway.pid, token, args.tails),
            "cpus": os.cpu_count(),
        }
        print(json.dumps(results, indent=2))
    finally:
        for process in (gateway, upstream):
            if process is not None:
                process.terminate()
                process.wait(10)
        silent.close()


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
