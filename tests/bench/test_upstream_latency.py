"""``bench/upstream.py``'s model latency: a held answer that does not hold anything else.

The assistant bench measures Lockgate's overhead per round when a model takes its time, so
the upstream must (a) hold a chat completion for the configured time, (b) keep answering
other connections meanwhile (a timer, not a sleep: 200 held calls must not queue behind each
other), (c) take the model name's ``latency-<ms>`` knob over the default, and (d) answer
requests pipelined behind a held one, in order.  A real upstream process on loopback.
"""

from __future__ import annotations

import http.client
import importlib.util
import json
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from twisted.trial import unittest

_BENCH = Path(__file__).resolve().parents[2] / "bench"
_spec = importlib.util.spec_from_file_location("bench_upstream", _BENCH / "upstream.py")
assert _spec is not None and _spec.loader is not None
upstream = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = upstream
_spec.loader.exec_module(upstream)

HOLD_MS = 400


def chat_body(model: str) -> bytes:
    return json.dumps({"model": model,
                       "messages": [{"role": "user", "content": "hello"}]}).encode()


class HoldSecondsTests(unittest.TestCase):
    def test_defaults_and_knobs(self) -> None:
        self.assertEqual(upstream.hold_seconds(chat_body("bench"), 0, 0), 0.0)
        self.assertEqual(upstream.hold_seconds(chat_body("bench"), 250, 0), 0.25)
        self.assertEqual(upstream.hold_seconds(chat_body("bench+latency-500"), 0, 0), 0.5)
        self.assertEqual(upstream.hold_seconds(chat_body("bench+latency-0"), 250, 0), 0.0)

    def test_jitter_spreads_holds_within_its_range_deterministically(self) -> None:
        def body(user: str, tools: int) -> bytes:
            messages = [{"role": "user", "content": user}] + [
                {"role": "tool", "tool_call_id": f"c{n}", "content": "x"} for n in range(tools)]
            return json.dumps({"model": "bench+latency-100+jitter-50",
                               "messages": messages}).encode()

        holds = [upstream.hold_seconds(body(f"run {n}", n % 5), 0, 0) for n in range(500)]
        self.assertTrue(all(0.05 <= hold < 0.15 for hold in holds))
        self.assertGreater(max(holds) - min(holds), 0.08)  # spread over the range
        self.assertEqual(upstream.hold_seconds(body("run 7", 3), 0, 0),
                         upstream.hold_seconds(body("run 7", 3), 0, 0))
        self.assertNotEqual(upstream.hold_seconds(body("run 7", 3), 0, 0),
                            upstream.hold_seconds(body("run 7", 4), 0, 0))
        # what a benchmark computes from what it sent is the hold, exactly
        self.assertEqual(upstream.hold_seconds(body("run 7", 3), 0, 0),
                         upstream.jittered_hold_ms(100, 50, "run 7", 3) / 1000)
        self.assertTrue(all(upstream.jittered_hold_ms(10, 50, f"r{n}", 0) >= 0
                            for n in range(200)))


class HeldUpstreamTests(unittest.TestCase):
    def setUp(self) -> None:
        ready = Path(tempfile.mkdtemp()) / "port"
        self.process = subprocess.Popen(
            [sys.executable, str(_BENCH / "upstream.py"), "--port", "0",
             "--latency-ms", str(HOLD_MS), "--ready-file", str(ready)],
            stdout=subprocess.DEVNULL)
        self.addCleanup(self._stop)
        deadline = time.monotonic() + 20
        while not (ready.exists() and ready.read_text()):
            if time.monotonic() > deadline:
                self.fail("the bench upstream did not start")
            time.sleep(0.05)
        self.port = int(ready.read_text())

    def _stop(self) -> None:
        self.process.terminate()
        self.process.wait(10)

    def timed_chat(self, model: str) -> tuple[float, int, dict]:
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=10)
        began = time.perf_counter()
        conn.request("POST", "/v1/chat/completions", chat_body(model),
                     {"Content-Type": "application/json"})
        response = conn.getresponse()
        answer = json.loads(response.read())
        conn.close()
        return time.perf_counter() - began, response.status, answer

    def test_a_chat_completion_is_held_for_the_latency(self) -> None:
        took, status, answer = self.timed_chat("bench")
        self.assertEqual(status, 200)
        self.assertEqual(answer["object"], "chat.completion")
        self.assertGreaterEqual(took, HOLD_MS / 1000)
        self.assertLess(took, HOLD_MS / 1000 + 2)

    def test_the_model_name_knob_overrides_the_default(self) -> None:
        took, status, _answer = self.timed_chat("bench+latency-0")
        self.assertEqual(status, 200)
        self.assertLess(took, HOLD_MS / 1000)

    def test_held_calls_do_not_block_the_upstream(self) -> None:
        """Ten held calls at once all end about one hold later, and a /v1/models call made
        meanwhile is answered at once."""
        took: list[float] = []
        threads = [threading.Thread(target=lambda: took.append(self.timed_chat("bench")[0]))
                   for _ in range(10)]
        began = time.perf_counter()
        for thread in threads:
            thread.start()
        time.sleep(0.05)
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=10)
        models_began = time.perf_counter()
        conn.request("GET", "/v1/models")
        self.assertEqual(conn.getresponse().status, 200)
        models_took = time.perf_counter() - models_began
        conn.close()
        for thread in threads:
            thread.join(10)
        self.assertLess(models_took, HOLD_MS / 1000 / 2)
        self.assertEqual(len(took), 10)
        self.assertLess(time.perf_counter() - began, 2 * HOLD_MS / 1000 + 1)

    def test_pipelined_requests_behind_a_held_one_are_answered_in_order(self) -> None:
        one, two = chat_body("bench+latency-200"), chat_body("bench+latency-0")
        request = (b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\ncontent-length: %d\r\n"
                   b"\r\n%s")
        with socket.create_connection(("127.0.0.1", self.port), timeout=10) as sock:
            began = time.perf_counter()
            sock.sendall(request % (len(one), one) + request % (len(two), two)
                         + b"GET /v1/models HTTP/1.1\r\nHost: x\r\n\r\n")
            received = sock.recv(65536)
            first_at = time.perf_counter() - began
            while received.count(b"HTTP/1.1 200 OK") < 3:
                chunk = sock.recv(65536)
                self.assertTrue(chunk, "the upstream closed the connection")
                received += chunk
        self.assertGreaterEqual(first_at, 0.2)
        answers = received.split(b"HTTP/1.1 200 OK")[1:]
        self.assertIn(b"chat.completion", answers[0])
        self.assertIn(b"chat.completion", answers[1])
        self.assertIn(b'"object":"list"', answers[2])
