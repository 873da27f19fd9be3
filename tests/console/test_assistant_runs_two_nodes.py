"""A run on node A is watched and stopped from node B (agents contract §1.10, §1.11).

Two Lockgate nodes share one SQLite database and one real redis-server.  The run's worker is on
A; B tails its events over SSE (woken only by the Redis bus: the test Clock never fires B's
slow re-check) and B stops it, which must cancel A's model call at once.
"""

from __future__ import annotations

import treq
from twisted.internet import reactor
from twisted.internet.defer import ensureDeferred
from twisted.internet.task import deferLater

from tests.console.test_assistant_completions import AssistantCase
from tests.support.app import Response
from tests.support.redis_nodes import SharedRedisNodes
from tests.support.tool_upstream import HANG, text


class RunsAcrossNodesTests(SharedRedisNodes, AssistantCase):
    async def start_node_b(self) -> None:
        node = self.node_b = self.open_app()
        self.addCleanup(node.close)
        self.base_b = self.serve(node)
        await node.state.settled()
        await self.app.state.settled()

    async def on_b(self, method: str, path: str, headers: dict[str, str] | None = None
                   ) -> Response:
        all_headers = {"Authorization": f"Bearer {self.user_token}", **(headers or {})}
        response = await treq.request(method, (self.base_b + path).encode(),
                                      headers={k: [v] for k, v in all_headers.items()},
                                      pool=self.pool)
        return Response(response.code, response.headers, await treq.content(response))

    async def run_hanging_on_a(self) -> str:
        self.upstream.script(HANG)
        started = await self.complete({"messages": [{"role": "user", "content": "x"}],
                                       "mode": "assistant"})
        assert started.status == 202, started
        await self.upstream.hung
        return str(started.json()["run"]["id"])

    async def test_sse_tail_on_b_sees_events_appended_on_a(self) -> None:
        await self.provision()
        await self.start_node_b()
        run_id = await self.run_hanging_on_a()
        tail = ensureDeferred(self.on_b("GET", f"/api/user/advanced-chat/runs/{run_id}/events",
                                        {"Accept": "text/event-stream"}))
        await deferLater(reactor, 0.2, lambda: None)  # B has read the first events, waits
        assert not tail.called
        self.upstream.release(text("finished on A"))
        response = await tail
        frames = [f for f in response.body.decode().split("\n\n") if f]
        assert [f.split("\n")[1] for f in frames] == [
            "event: status", "event: status", "event: status", "event: done"]
        assert '"finished on A"' in frames[-1]

    async def test_stop_on_b_cancels_the_worker_on_a(self) -> None:
        await self.provision()
        await self.start_node_b()
        run_id = await self.run_hanging_on_a()
        stopped = await self.on_b("POST", f"/api/user/advanced-chat/runs/{run_id}/stop")
        assert stopped.status == 200, stopped
        assert stopped.json()["status"] == "cancelled"
        [hanging] = self.upstream.hanging
        for _ in range(250):
            if getattr(hanging, "_disconnected", False) and not self.app.assistant.workers:
                break
            await deferLater(reactor, 0.02, lambda: None)
        assert hanging._disconnected  # A abandoned its model call
        assert self.app.assistant.workers == {}
        events = await self.events(run_id)
        assert events[-1]["payload"] == {"message": "cancelled"}
        await self.verify_ledger()
