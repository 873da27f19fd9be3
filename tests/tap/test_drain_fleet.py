"""Two ``twistd -n lockgate`` processes on one PostgreSQL + redis-server: SIGTERM node A in the
middle of a stream; the billing shows through node B's console API, and again after A restarts,
exactly once (issue 14 defect 1, operations contract §4 and §6).
"""

from __future__ import annotations

import os
import time

from tests.support.lockgate_node import LockgateNode, chat, ledger_view
from tests.support.postgres import postgres_url
from tests.support.redis_server import fresh_prefix, redis_server
from tests.support.slow_upstream import PROMPT_TOKENS
from tests.tap.test_drain import (
    CLEAN_EXITS,
    NANOS_PER_INPUT,
    NANOS_PER_OUTPUT,
    DrainTestCase,
    in_thread,
    stream_text,
    wait_for,
)

GRACE = 20


class FleetDrainTests(DrainTestCase):
    def fleet_node(self, name: str) -> LockgateNode:
        return self.node(self.database, "--redis", self.redis, "--shutdown-grace", str(GRACE),
                         name=name, secret_file=os.path.join(self.directory, "secret"))

    def test_a_stream_cut_short_by_sigterm_on_a_is_billed_once_as_b_sees_it(self) -> None:
        self.database = postgres_url()
        self.redis = redis_server().url(fresh_prefix())
        a = self.fleet_node("a")
        b = self.fleet_node("b")
        provisioned = a.provision(self.upstream.base_url)
        cost = PROMPT_TOKENS * NANOS_PER_INPUT + self.chunks * NANOS_PER_OUTPUT

        stream = in_thread(lambda: chat(a, provisioned.api_key, stream=True))
        wait_for(lambda: self.upstream.requests == 1, 20, "the stream to reach the upstream")
        signalled = time.monotonic()
        a.terminate()
        streamed = stream()
        assert streamed.status == 200, streamed
        text = stream_text(streamed)
        assert all(f"tok{i} " in text for i in range(self.chunks)), text
        assert '"error"' not in text, text
        assert a.wait(timeout=GRACE + 5) in CLEAN_EXITS, a.output()
        assert time.monotonic() - signalled < GRACE + 5

        def seen_by(node: LockgateNode) -> tuple[list[int], str]:
            logs = node.ok("GET", "/api/logs", token=provisioned.admin_token)
            me = node.ok("GET", "/api/user/me", token=provisioned.admin_token)
            items = logs["items"] if isinstance(logs, dict) else logs
            return [int(item["cost_nanos"]) if "cost_nanos" in item else item["cost"]
                    for item in items], str(me["balance"])

        costs, balance = seen_by(b)
        assert len(costs) == 1, (costs, b.output()[-2000:])
        assert balance == "99.981", balance  # 100 - (7 x 0.001 + 6 x 0.002)

        restarted = self.fleet_node("a-again")
        assert seen_by(restarted) == (costs, balance)
        assert seen_by(b) == (costs, balance)
        view = ledger_view(self.database, provisioned.user_id, provisioned.key_id)
        assert [row["cost_nanos"] for row in view.usage] == [cost], view.usage
        assert view.ledger_sum_nanos == view.balance_nanos == 100 * 10**9 - cost, view
        assert view.key_used_nanos == cost, view
