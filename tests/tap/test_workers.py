"""``twistd -n lockgate --workers 2`` on one SQLite file, no Redis: real processes, real calls.

Issue 22 goal 1.  The supervisor shares its listening socket with two workers and holds the
money, rate limits and the invalidation bus for both (``gateway.hub``).  A slow loopback
upstream (its own thread) keeps calls in flight; the clients are blocking ``http.client`` calls
in threads, each on a connection of its own so the kernel spreads them over both workers.  The
``Lockgate-Worker`` header of the probes names the worker that answered.
"""

from __future__ import annotations

import os
import signal
import time
from collections import Counter
from typing import Any

from tests.support.lockgate_node import MODEL, LockgateNode, Provisioned, chat, ledger_view
from tests.support.redis_server import fresh_prefix, redis_server
from tests.tap.test_drain import CLEAN_EXITS, DrainTestCase, in_thread, stream_text, wait_for

UNIT = 10**9
GRACE = 20


def worker_pids(node: LockgateNode, probes: int = 24) -> dict[int, int]:
    """worker index -> pid, as the probes of ``probes`` fresh connections saw them."""
    seen: dict[int, int] = {}
    for _ in range(probes):
        try:
            answer = node.request("GET", "/readyz", timeout=5)
        except OSError:
            continue  # queued on the socket of a worker that is restarting
        label = answer.headers.get("lockgate-worker")
        if answer.status == 200 and label:
            index, _, pid = label.partition(" pid=")
            seen[int(index)] = int(pid)
    return seen


def alive(pid: int) -> bool:
    """Running (a zombie nobody reaped yet counts as gone)."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def burst(node: LockgateNode, api_key: str, calls: int) -> Counter[int]:
    """``calls`` concurrent non-streaming calls; how many answered with each status."""
    joins = [in_thread(lambda: chat(node, api_key, stream=False)) for _ in range(calls)]
    return Counter(join(90).status for join in joins)


class WorkersTests(DrainTestCase):
    chunks = 2
    pace = 1.0

    def workers_node(self, *extra: str) -> LockgateNode:
        self.database = f"sqlite:///{os.path.join(self.directory, 'db.sqlite3')}"
        node = self.node(self.database, "--workers", "2", "--shutdown-grace", str(GRACE),
                         *extra)
        wait_for(lambda: len(worker_pids(node, 8)) == 2, 60, "both workers to listen")
        return node

    def per_call_model(self, node: LockgateNode, provisioned: Provisioned) -> None:
        """Bill the test model per call at exactly 1 unit: a call reserves and costs 1."""
        models = node.ok("GET", "/api/models", token=provisioned.admin_token)
        (model,) = [m for m in models if m["model_name"] == MODEL]
        node.ok("PUT", f"/api/models/{model['id']}", {
            "model_name": MODEL, "quota_type": 1, "output_price": "1", "input_price": "0"},
            token=provisioned.admin_token)

    def test_both_workers_serve_and_admit_a_balance_and_a_key_quota_exactly(self) -> None:
        node = self.workers_node()
        pids = worker_pids(node)
        assert sorted(pids) == [0, 1], pids
        assert len(set(pids.values())) == 2 and node.process.pid not in pids.values(), pids

        provisioned = node.provision(self.upstream.base_url, balance="3")
        self.per_call_model(node, provisioned)
        # ten calls at once against a balance for three: one process would admit three, and
        # so must two workers together (each alone would have admitted three)
        assert burst(node, provisioned.api_key, 10) == Counter({200: 3, 402: 7})
        assert self.upstream.requests == 3

        # a key quota for two more calls, with money for many (set once the three calls are
        # committed: the balance is set, not added to)
        wait_for(lambda: ledger_view(self.database, provisioned.user_id,
                                     provisioned.key_id).key_used_nanos == 3 * UNIT,
                 10, "the three calls to be committed")
        node.ok("PUT", f"/api/users/{provisioned.user_id}", {"balance": "100"},
                token=provisioned.admin_token)
        node.ok("PUT", f"/api/user/api-keys/{provisioned.key_id}", {"quota_limit": "5"},
                token=provisioned.admin_token)
        assert burst(node, provisioned.api_key, 10) == Counter({200: 2, 402: 8})
        assert self.upstream.requests == 5

        node.terminate()
        assert node.wait(timeout=GRACE + 15) in CLEAN_EXITS, node.output()[-3000:]
        view = ledger_view(self.database, provisioned.user_id, provisioned.key_id)
        served = [row for row in view.usage if row["cost_nanos"] > 0]
        assert [row["cost_nanos"] for row in served] == [UNIT] * 5, served
        assert len({row["request_id"] for row in served}) == 5, served
        assert sum(row["cost_nanos"] for row in view.usage) == 5 * UNIT, view.usage
        assert view.balance_nanos == 98 * UNIT, view
        assert view.key_used_nanos == 5 * UNIT, view

    def test_a_disabled_key_is_refused_by_both_workers_at_once(self) -> None:
        node = self.workers_node()
        provisioned = node.provision(self.upstream.base_url)
        self.per_call_model(node, provisioned)
        # both workers have the key in their caches
        assert burst(node, provisioned.api_key, 6) == Counter({200: 6})

        node.ok("PUT", f"/api/user/api-keys/{provisioned.key_id}", {"enabled": False},
                token=provisioned.admin_token)
        statuses = Counter(chat(node, provisioned.api_key, stream=False).status
                           for _ in range(12))
        assert statuses == Counter({401: 12}), statuses
        assert len(worker_pids(node)) == 2  # the same connections reach both workers
        assert self.upstream.requests == 6

    def test_a_killed_worker_is_restarted_and_serves(self) -> None:
        node = self.workers_node()
        provisioned = node.provision(self.upstream.base_url, balance="10")
        self.per_call_model(node, provisioned)
        before = worker_pids(node)
        os.kill(before[1], signal.SIGKILL)

        def replaced() -> bool:
            now = worker_pids(node, 8)
            return now.get(0) == before[0] and now.get(1) not in (None, before[1])

        wait_for(replaced, 60, "worker 1 to be restarted")
        assert "Lockgate worker 1 exited unasked (signal 9)" in node.output()
        # money still exact across the old worker 0 and the new worker 1
        assert burst(node, provisioned.api_key, 14) == Counter({200: 10, 402: 4})
        node.terminate()
        assert node.wait(timeout=GRACE + 15) in CLEAN_EXITS, node.output()[-3000:]
        view = ledger_view(self.database, provisioned.user_id, provisioned.key_id)
        served = [row for row in view.usage if row["cost_nanos"] > 0]
        assert len(served) == 10 and view.balance_nanos == 0, [
            (row["status"], row["cost_nanos"]) for row in view.usage]
        assert view.ledger_sum_nanos == 0 and view.key_used_nanos == 10 * UNIT, view

    def test_workers_stop_when_their_supervisor_is_killed(self) -> None:
        node = self.workers_node()
        pids = worker_pids(node)
        node.process.kill()  # SIGKILL: no drain, no goodbye; the hub's socket closes
        node.process.wait()
        wait_for(lambda: not any(alive(pid) for pid in pids.values()), 30,
                 "the orphaned workers to stop")
        assert "the supervisor is gone, stopping" in node.output()

    def test_sigterm_drains_both_workers_and_bills_each_call_once(self) -> None:
        node = self.workers_node()
        provisioned = node.provision(self.upstream.base_url)
        streams = [in_thread(lambda: chat(node, provisioned.api_key, stream=True))
                   for _ in range(6)]
        wait_for(lambda: self.upstream.requests == 6, 30, "the streams to reach the upstream")
        signalled = time.monotonic()
        node.terminate()
        texts: list[Any] = []
        for join in streams:
            answer = join(60)
            assert answer.status == 200, answer
            texts.append(stream_text(answer))
        for text in texts:
            assert all(f"tok{i} " in text for i in range(self.chunks)), text
            assert '"error"' not in text, text
        assert node.wait(timeout=GRACE + 15) in CLEAN_EXITS, node.output()[-3000:]
        assert time.monotonic() - signalled < GRACE + 15
        output = node.output()
        assert "Lockgate worker 0 exited" in output and "Lockgate worker 1 exited" in output
        assert "every worker stopped" in output, output[-3000:]
        assert "Traceback" not in output, output[-5000:]
        self.assert_billed_once(ledger_view(self.database, provisioned.user_id,
                                            provisioned.key_id),
                                provisioned, calls=6, start_nanos=100 * 10**9)

    def test_with_redis_the_workers_share_through_redis(self) -> None:
        node = self.workers_node("--redis", redis_server().url(fresh_prefix()))
        assert "shared state: Redis" in node.output()
        provisioned = node.provision(self.upstream.base_url, balance="3")
        self.per_call_model(node, provisioned)
        assert burst(node, provisioned.api_key, 10) == Counter({200: 3, 402: 7})
        assert self.upstream.requests == 3
        # no hub socket here: the workers notice their supervisor's death by their parent pid
        pids = worker_pids(node)
        node.process.kill()
        node.process.wait()
        wait_for(lambda: not any(alive(pid) for pid in pids.values()), 30,
                 "the orphaned workers to stop")
