"""The tools that need a session: the ``tasks_*`` checklist and ``ask_user`` (agents contract
§1.7 "Tools", §1.8 steps 4 and 8), through real runs against the tool-calling upstream.

The checklist belongs to the run (the contract keeps no checklist between turns: §1.8 names no
storage for it); ``ask_user`` ends the run's turn with the question as its answer.
"""

from __future__ import annotations

from tests.console.test_assistant_completions import AssistantCase
from tests.support.tool_upstream import tool_call


class TurnToolTests(AssistantCase):
    async def test_checklist_then_ask_user_ends_the_run_with_the_question(self) -> None:
        await self.provision()
        self.upstream.script(
            tool_call("tasks_plan", {"tasks": ["read the code", "fix the bug"]}, "c1"),
            tool_call("tasks_update", {"index": 1, "status": "completed"}, "c2"),
            tool_call("tasks_list", {}, "c3"),
            tool_call("ask_user", {"question": "Which branch?", "options": ["main", "dev"]},
                      "c4"))
        started = await self.complete({"messages": [{"role": "user", "content": "fix it"}],
                                       "mode": "assistant"})
        assert started.status == 202, started
        finished = await self.wait_for_run(started.json()["run"]["id"])
        assert finished["status"] == "completed", finished
        plan, update, listing, ask = finished["tool_call_details"]
        assert plan["result"] == "1. [pending] read the code\n2. [pending] fix the bug"
        assert update["result"] == "1. [completed] read the code\n2. [pending] fix the bug"
        assert listing["result"] == update["result"]
        assert ask["status"] == "ok" and ask["name"] == "ask_user"
        # the question is the answer and no fifth model round was made
        assert len(self.upstream.requests) == 4
        events = await self.events(finished["id"])
        assert events[-1]["event"] == "done"
        assert events[-1]["payload"]["message"]["content"] == "Which branch?\n- main\n- dev"
        # the system prompt told the model how to use them
        system = self.upstream.requests[0]["messages"][0]["content"]
        assert "tasks_plan" in system and "ask_user" in system

    async def test_bad_checklist_arguments_and_disabled_groups(self) -> None:
        await self.provision()
        self.upstream.script(tool_call("tasks_update", {"index": 3, "status": "done"}))
        started = await self.complete({"messages": [{"role": "user", "content": "x"}],
                                       "mode": "assistant"})
        finished = await self.wait_for_run(started.json()["run"]["id"])
        [detail] = finished["tool_call_details"]
        assert (detail["status"], detail["result"]) == (
            "invalid_arguments", "Invalid tool arguments: index must be between 1 and 0")
        self.upstream.requests.clear()
        started = await self.complete({"messages": [{"role": "user", "content": "x"}],
                                       "mode": "assistant",
                                       "disabled_tool_groups": ["tasks", "ask_user"]})
        await self.wait_for_run(started.json()["run"]["id"])
        offered = {t["function"]["name"] for t in self.upstream.requests[0].get("tools", [])}
        assert not offered & {"tasks_plan", "tasks_update", "tasks_list", "ask_user"}

    async def test_chat_without_a_session_offers_neither(self) -> None:
        await self.provision()
        answer = await self.complete({"messages": [{"role": "user", "content": "hi"}]})
        assert answer.status == 200, answer
        assert "tools" not in self.upstream.requests[0]
