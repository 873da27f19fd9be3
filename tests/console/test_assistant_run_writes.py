"""What an assistant run writes, and in how many transactions (agents contract §1.7-§1.10).

A run's own transactions are its 202 (preparation, interruption, session, run: one) and its
share of the group commits its start, events and finish go through; its model calls settle in
the settler's batches.  Many runs started at once each end with exactly their own events,
answer and cost.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import orjson
from sqlalchemy import select
from twisted.internet.defer import ensureDeferred, gatherResults

from gateway.assistant.run_service import events_channel
from gateway.store import schema
from gateway.store.assistant.rows import RunEventRow
from tests.console.test_assistant_completions import AssistantCase, cost_nanos
from tests.support.tool_upstream import tool_call

#: where the run path's transactions come from (periodic jobs of other services, the
#: caller's lookup and the settler's batches are not the run's own)
RUN_PATH = ("gateway.assistant.", "gateway.store.assistant.", "console.routes.assistant")
#: the run service's periodic lease work, which may fall into any window
PERIODIC = ("RunService._renew.", "RunService.sweep.")
#: the 202's one transaction, and the events' group commits (start, events, finish)
START = "RunService.start_run.<locals>.write"
BATCH = "_write_all"


class RunWritesTests(AssistantCase):
    def record_transactions(self) -> Counter[str]:
        """Every transaction of the run path from now on, by the name of the function it
        runs (the real ``transaction`` runs it; the wrapper only counts)."""
        seen: Counter[str] = Counter()
        db = self.ctx.db
        # Core transactions and the lean DB-API ones (the events' group commits)
        for method in ("transaction", "driver_transaction"):
            real = getattr(db, method)

            def counting(fn: Any, *args: Any, real: Any = real, **kwargs: Any) -> Any:
                name = getattr(fn, "__qualname__", repr(fn))
                if getattr(fn, "__module__", "").startswith(RUN_PATH) \
                        and not name.startswith(PERIODIC):
                    seen[name] += 1
                return real(fn, *args, **kwargs)

            setattr(db, method, counting)
            self.addCleanup(setattr, db, method, real)
        return seen

    async def start(self) -> dict[str, Any]:
        started = await self.complete({"messages": [{"role": "user", "content": "work"}],
                                       "mode": "assistant"})
        assert started.status == 202, started
        return dict(started.json())

    async def test_a_run_is_one_transaction_to_start_and_group_commits_after(self) -> None:
        await self.provision()
        self.upstream.script(tool_call("tasks_list", {}))
        # the default agent and the caches exist from here on
        await self.wait_for_run((await self.start())["run"]["id"])
        self.upstream.script(tool_call("tasks_list", {}))
        seen = self.record_transactions()
        started = await self.start()
        run_id = started["run"]["id"]
        # one transaction for preparation, session and run
        assert set(seen) <= {START, BATCH} and seen[START] == 1, seen
        await self.app.assistant.workers[run_id].done
        # nothing of its own to start or finish: its events' group commits
        assert set(seen) <= {START, BATCH} and seen[START] == 1, seen
        assert seen[BATCH] >= 1
        finished = await self.wait_for_run(run_id)
        assert (finished["status"], finished["current_round"]) == ("completed", 2)

    async def test_runs_started_together_each_end_with_their_own_rows(self) -> None:
        await self.provision()
        count = 8
        self.upstream.script(*[tool_call("tasks_list", {}) for _ in range(count)])
        starts = await gatherResults([ensureDeferred(self.start()) for _ in range(count)])
        runs = [await self.wait_for_run(s["run"]["id"]) for s in starts]
        assert all(r["status"] == "completed" for r in runs), runs
        assert max(self.app.assistant._events.batch_sizes) > 1  # commits were shared
        for started, run in zip(starts, runs, strict=True):
            events = await self.events(run["id"])
            assert [e["seq"] for e in events] == list(range(1, len(events) + 1))
            assert {e["run_id"] for e in events} == {run["id"]}
            # the scripted tool calls go to whichever run asks first: rounds differ per run
            names = [e["event"] for e in events]
            assert [e["payload"].get("message") for e in events[:3]] == [
                "assistant_started", "loading_tools", "model_round"]
            assert names[-1] == "done" and names.count("done") == 1
            assert names.count("tool_call") == 2 * run["tool_calls"]
            assert names.count("status") == 2 + run["current_round"]
            assert events[-1]["payload"]["cost"] == run["cost"]
            messages = schema.assistant_messages
            answer = await self.ctx.db.transaction(lambda conn, r=run: conn.execute(
                select(messages.c.content, messages.c.session_id)
                .where(messages.c.id == r["assistant_message_id"])).one())
            assert tuple(answer) == (events[-1]["payload"]["message"]["content"],
                                     started["session"]["id"])
        rows, total = await self.usage_cost()
        assert rows == sum(r["current_round"] for r in runs) == 2 * count
        assert sum(cost_nanos(r["cost"]) for r in runs) == total > 0

    async def test_rows_committed_together_wake_a_runs_tails_once(self) -> None:
        """A tail reads every event after its last one when woken, so the rows of one run
        committed together are announced once, with the newest row (three bus messages per
        round before, one now)."""
        await self.provision()
        now = self.ctx.now()
        heard: dict[str, list[dict[str, Any]]] = {"acr-a": [], "acr-b": []}
        for run_id, messages in heard.items():
            unsubscribe = self.ctx.state.subscribe(
                events_channel(run_id), lambda m, into=messages: into.append(orjson.loads(m)))
            self.addCleanup(unsubscribe)
        rows = [RunEventRow(id=n, run_id=run_id, session_id="s", seq=seq, event=event,
                            payload={}, created_at=now)
                for n, (run_id, seq, event) in enumerate([
                    ("acr-a", 4, "status"), ("acr-b", 7, "tool_call"), ("acr-a", 5, "tool_call"),
                    ("acr-a", 6, "tool_call")])]
        self.app.assistant.announce(rows)
        assert heard == {"acr-a": [{"seq": 6, "event": "tool_call"}],
                         "acr-b": [{"seq": 7, "event": "tool_call"}]}
