"""Streamed vs non-streamed chat-mode completions: what token streaming costs the gateway.

A script, not a test::

    python bench/assistant_streaming.py [--calls 150] [--chunks 20] [--repeat 2]

Starts ``bench/upstream.py`` (no pacing between chunks) and a real ``twistd -n lockgate``
(``bench/assistant_runs.py`` helpers), then alternates, ``--repeat`` times, three phases of
``--calls`` sequential-per-thread calls (8 client threads):

- ``v1_stream``: plain ``POST /v1/chat/completions`` with ``stream=true`` (the API key) -- the
  gateway's own streaming path, the yardstick;
- ``chat_json``: ``POST /api/user/advanced-chat/completions`` chat mode, ``stream=false`` (one
  internal non-streamed /v1 call, a JSON answer);
- ``chat_stream``: the same with ``stream=true`` (one streamed internal call read chunk by
  chunk, each delta an SSE ``text`` event to the client).

For each: the gateway's CPU ms per call (``/proc``), and the ratios ``chat_stream/chat_json``
and ``chat_stream/v1_stream`` -- ratios of columns measured minutes apart in one process,
because this machine's CPU speed moves up to 2x between runs.  The min-max over repeats is
printed as JSON.
"""

from __future__ import annotations

import argparse
import http.client
import json
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from bench.assistant_runs import Meter, login, start_lockgate, wait_idle  # noqa: E402
from bench.provision import provision  # noqa: E402
from bench.run import free_port, wait_http  # noqa: E402

THREADS = 8
CHAT = "/api/user/advanced-chat/completions"


def phase(port: int, metrics_port: int, pid: int, path: str, auth: str, body: dict[str, Any],
          calls: int) -> float:
    """CPU ms per call of ``calls`` POSTs of ``body`` to ``path``."""
    payload = json.dumps(body)

    def worker(count: int) -> None:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        for _ in range(count):
            conn.request("POST", path, payload, {"Content-Type": "application/json",
                                                 "Authorization": f"Bearer {auth}"})
            response = conn.getresponse()
            answer = response.read()
            if response.status != 200 or b'"error"' in answer[-400:]:
                raise SystemExit(f"{path} answered {response.status}: {answer[-400:]!r}")
        conn.close()

    wait_idle(pid)
    meter = Meter(pid, metrics_port)
    with ThreadPoolExecutor(THREADS) as pool:
        list(pool.map(worker, [calls // THREADS + (1 if i < calls % THREADS else 0)
                               for i in range(THREADS)]))
    wait_idle(pid)
    return float(meter.per(calls)["cpu_ms"] or 0.0)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=150)
    parser.add_argument("--chunks", type=int, default=20)
    parser.add_argument("--repeat", type=int, default=2)
    args = parser.parse_args(argv)
    tmp = Path(tempfile.mkdtemp(prefix="lockgate-stream-bench-"))
    ports: set[int] = set()
    while len(ports) < 3:
        ports.add(free_port())
    up_port, gw_port, metrics_port = sorted(ports)
    upstream = subprocess.Popen([sys.executable, str(HERE / "upstream.py"),  # noqa: S603
                                 "--port", str(up_port), "--chunks", str(args.chunks),
                                 "--pace", "0"], stdout=subprocess.DEVNULL)
    gateway: subprocess.Popen[bytes] | None = None
    try:
        if not wait_http(up_port, "/v1/models", 15):
            raise SystemExit("bench upstream did not start")
        gateway = start_lockgate(tmp, gw_port, metrics_port, None)
        if not wait_http(gw_port, "/healthz", 30):
            raise SystemExit(f"gateway did not start; see {tmp}")
        key, _log = provision("127.0.0.1", gw_port, f"http://127.0.0.1:{up_port}",
                              {"bench-stream": "bench"})
        token = login(gw_port)
        messages = [{"role": "user", "content": "benchmark round"}]
        columns = {
            "v1_stream": ("/v1/chat/completions", key,
                          {"model": "bench-stream", "messages": messages, "stream": True}),
            "chat_json": (CHAT, token, {"model": "bench-stream", "messages": messages}),
            "chat_stream": (CHAT, token,
                            {"model": "bench-stream", "messages": messages, "stream": True}),
        }
        for path, auth, body in columns.values():  # warm-up
            phase(gw_port, metrics_port, gateway.pid, path, auth, body, 40)
        repeats = []
        for _ in range(args.repeat):
            cpu = {name: phase(gw_port, metrics_port, gateway.pid, *column, args.calls)
                   for name, column in columns.items()}
            repeats.append({"cpu_ms_per_call": cpu,
                            "chat_stream_over_chat_json": round(
                                cpu["chat_stream"] / cpu["chat_json"], 2),
                            "chat_stream_over_v1_stream": round(
                                cpu["chat_stream"] / cpu["v1_stream"], 2)})
        summary = {name: [min(r[name] for r in repeats), max(r[name] for r in repeats)]
                   for name in ("chat_stream_over_chat_json", "chat_stream_over_v1_stream")}
        print(json.dumps({"chunks_per_stream": args.chunks, "calls_per_phase": args.calls,
                          "min_max": summary, "repeats": repeats}, indent=2))
    finally:
        for process in (gateway, upstream):
            if process is not None:
                process.terminate()
                process.wait(30)


if __name__ == "__main__":
    main()
