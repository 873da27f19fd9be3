"""SIGTERM on a real ``twistd -n lockgate`` process (SQLite): the drain serves and bills.

Operations contract §6.  A slow loopback upstream (its own thread) keeps a stream and a plain
call in flight while the test signals the process; the clients are blocking ``http.client``
calls in threads.  After the process exits the money tables are read from the SQLite file:
every served request is in the usage log and the ledger exactly once.
"""

from __future__ import annotations

import os
import shutil
import signal
import tempfile
import threading
import time
from collections.abc import Callable
from typing import Any

from twisted.trial.unittest import TestCase

from tests.support.lockgate_node import (
    Answer,
    LedgerView,
    LockgateNode,
    Provisioned,
    chat,
    ledger_view,
)
from tests.support.slow_upstream import PROMPT_TOKENS, SlowUpstream

#: 0.001 per input token, 0.002 per output token (lockgate_node's prices), in nano-units
NANOS_PER_INPUT = 1_000_000
NANOS_PER_OUTPUT = 2_000_000
CLEAN_EXITS = (0, -signal.SIGTERM)


def in_thread(fn: Callable[[], Any]) -> Callable[[], Any]:
    """Run ``fn`` in a thread now; the returned callable joins it and returns (or raises)."""
    outcome: dict[str, Any] = {}

    def run() -> None:
        try:
            outcome["value"] = fn()
        except BaseException as exc:  # handed to the joining test
            outcome["error"] = exc

    thread = threading.Thread(target=run, daemon=True)
    thread.start()

    def join(timeout: float = 60) -> Any:
        thread.join(timeout)
        assert not thread.is_alive(), "the client call did not end"
        if "error" in outcome:
            raise outcome["error"]
        return outcome["value"]

    return join


def wait_for(condition: Callable[[], bool], within: float, what: str) -> None:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.02)
    raise AssertionError(f"timed out waiting for {what}")


def stream_text(answer: Answer) -> str:
    return answer.body.decode()


class DrainTestCase(TestCase):
    """A temp directory, one slow upstream and helpers to start provisioned nodes."""

    chunks = 6
    pace = 0.4

    def setUp(self) -> None:
        self.directory = tempfile.mkdtemp(prefix="lockgate-drain-")
        self.addCleanup(shutil.rmtree, self.directory, True)
        self.upstream = SlowUpstream(chunks=self.chunks, pace=self.pace)
        self.addCleanup(self.upstream.stop)

    def node(self, database: str, *extra: str, **kwargs: Any) -> LockgateNode:
        node = LockgateNode(self.directory, database, *extra, **kwargs)
        self.addCleanup(node.kill)
        node.wait_until_healthy()
        return node

    def assert_billed_once(self, view: LedgerView, provisioned: Provisioned, calls: int,
                           start_nanos: int) -> None:
        cost = PROMPT_TOKENS * NANOS_PER_INPUT + self.chunks * NANOS_PER_OUTPUT
        assert len(view.usage) == calls, view.usage
        assert len({row["request_id"] for row in view.usage}) == calls, view.usage
        assert [row["cost_nanos"] for row in view.usage] == [cost] * calls, view.usage
        assert [(row["input_tokens"], row["output_tokens"]) for row in view.usage] == [
            (PROMPT_TOKENS, self.chunks)] * calls, view.usage
        assert view.balance_nanos == start_nanos - calls * cost, view
        assert view.ledger_sum_nanos == view.balance_nanos, view
        assert view.key_used_nanos == calls * cost, view


class SigtermDrainTests(DrainTestCase):
    def test_requests_in_flight_at_sigterm_are_served_and_billed_once(self) -> None:
        database = f"sqlite:///{os.path.join(self.directory, 'db.sqlite3')}"
        node = self.node(database, "--shutdown-grace", "20")
        provisioned = node.provision(self.upstream.base_url)
        stream = in_thread(lambda: chat(node, provisioned.api_key, stream=True))
        plain = in_thread(lambda: chat(node, provisioned.api_key, stream=False))
        wait_for(lambda: self.upstream.requests == 2, 20, "both calls to reach the upstream")

        signalled = time.monotonic()
        node.terminate()
        # the drain: probes answer, the door is closed politely, nothing reaches the upstream
        wait_for(lambda: node.request("GET", "/readyz").status == 503, 5, "/readyz 503")
        ready = node.request("GET", "/readyz")
        assert ready.json() == {"status": "draining"}, ready
        assert ready.headers["content-type"] == "application/json"
        health = node.request("GET", "/healthz")
        assert (health.status, health.json()) == (200, {"status": "ok"}), health
        refused = chat(node, provisioned.api_key, stream=False)
        assert refused.status == 503, refused
        assert refused.headers["connection"] == "close", refused.headers
        assert refused.headers["retry-after"] == "1", refused.headers
        assert refused.json()["error"]["type"] == "service_unavailable", refused.body
        console = node.request("GET", "/api/user/me", token=provisioned.admin_token)
        assert console.status == 503, console
        assert console.json()["type"] == "service_unavailable", console.body
        assert console.headers["connection"] == "close", console.headers
        assert self.upstream.requests == 2

        # the calls in flight end normally, with the whole answer
        streamed = stream()
        assert streamed.status == 200, streamed
        text = stream_text(streamed)
        assert all(f"tok{i} " in text for i in range(self.chunks)), text
        assert text.rstrip().endswith("data: [DONE]"), text
        assert '"error"' not in text, text
        answered = plain()
        assert answered.status == 200, answered
        assert answered.json()["usage"]["completion_tokens"] == self.chunks

        status = node.wait(timeout=20 + 5)
        assert status in CLEAN_EXITS, node.output()
        assert time.monotonic() - signalled < 20 + 5
        assert "Traceback" not in node.output(), node.output()
        # after the exit, the database holds each served call exactly once
        self.assert_billed_once(ledger_view(database, provisioned.user_id, provisioned.key_id),
                                provisioned, calls=2, start_nanos=100 * 10**9)


class GraceDeadlineTests(DrainTestCase):
    chunks = 40
    pace = 0.25

    def test_a_stream_outliving_the_grace_is_cut_with_one_error_event_and_billed(self) -> None:
        database = f"sqlite:///{os.path.join(self.directory, 'db.sqlite3')}"
        grace = 1.5
        node = self.node(database, "--shutdown-grace", str(grace))
        provisioned = node.provision(self.upstream.base_url)
        stream = in_thread(lambda: chat(node, provisioned.api_key, stream=True))
        wait_for(lambda: self.upstream.requests == 1, 20, "the stream to reach the upstream")
        time.sleep(0.6)  # a few chunks delivered
        signalled = time.monotonic()
        node.terminate()

        streamed = stream()
        assert streamed.status == 200, streamed
        text = stream_text(streamed)
        delivered = sum(f'"content": "tok{i} "' in text for i in range(self.chunks))
        assert 0 < delivered < self.chunks, text
        events = [line for line in text.splitlines() if line.startswith("data: {")]
        errors = [event for event in events if '"error"' in event]
        assert len(errors) == 1, text
        assert "shutting down" in errors[0], errors
        assert events[-1] == errors[0], text  # nothing after the error but [DONE]

        status = node.wait(timeout=grace + 5)
        assert status in CLEAN_EXITS, node.output()
        assert time.monotonic() - signalled < grace + 5, node.output()
        view = ledger_view(database, provisioned.user_id, provisioned.key_id)
        assert len(view.usage) == 1, view.usage
        row = view.usage[0]
        assert row["status"] == 503, row
        assert row["output_tokens"] >= delivered, row
        assert row["output_tokens"] < self.chunks, row
        assert 0 < row["cost_nanos"] < (PROMPT_TOKENS * NANOS_PER_INPUT
                                        + self.chunks * NANOS_PER_OUTPUT), row
        assert view.balance_nanos == 100 * 10**9 - row["cost_nanos"], view
        assert view.ledger_sum_nanos == view.balance_nanos, view
        assert view.key_used_nanos == row["cost_nanos"], view
