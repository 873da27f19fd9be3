"""A delegated member's ``agent_split`` tool: temporary sibling loops in parallel (agents
contract §1.12).

Why: a member facing independent sub-tasks (1..8) runs them side by side as helpers with its
own prompt, model and tools (no further splitting, no delegation, so the depth stays
bounded).  Each helper is framed by ``agent_task`` events of kind ``split``; its
cost is added to the run's; the tool answers a JSON array ``[{id, status, result, error?,
mutations}]`` in the order the tasks were given.  A failing helper is an ``error`` entry, not a
failed tool; stopping the run cancels every helper.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import orjson
from twisted.internet.defer import CancelledError, DeferredList

from gateway.assistant.ids import AGENT_TASK, random_id
from gateway.assistant.run_loop import LoopFailed, LoopOutcome, RunLoop
from gateway.assistant.run_service import RunTools
from gateway.assistant.studio_team import Member, StudioTeam
from gateway.assistant.tool_set import BadArguments, Tool, ToolResult, ToolSet, object_schema
from gateway.studio.member_loop import MemberSink, cancellable, member_loop, member_prompt

NAME = "agent_split"
MAX_TASKS = 8
BAD_TASKS = "tasks must be a list of 1 to 8 objects with a goal"


@dataclass(frozen=True)
class _Task:
    id: str
    goal: str
    context: str


def read_tasks(arguments: dict[str, Any]) -> list[_Task]:
    raw = arguments.get("tasks")
    if not isinstance(raw, list) or not 1 <= len(raw) <= MAX_TASKS:
        raise BadArguments(BAD_TASKS)
    tasks: list[_Task] = []
    for index, item in enumerate(raw):
        goal = item.get("goal") if isinstance(item, dict) else None
        if not isinstance(goal, str) or not goal.strip():
            raise BadArguments(BAD_TASKS)
        given, context = item.get("id"), item.get("context")
        task_id = str(given).strip() if isinstance(given, str | int) and str(given).strip() \
            else f"task-{index + 1}"
        tasks.append(_Task(task_id, goal.strip(),
                           context.strip() if isinstance(context, str) else ""))
    return tasks


@dataclass
class Split:
    hooked: RunTools
    team: StudioTeam
    member: Member
    #: the member's own tools but ``agent_split`` (helpers do not split again)
    helper_tools: ToolSet

    def tool(self) -> Tool:
        return Tool(
            name=NAME, group="agent_group", run=self.run, tool=NAME,
            description="Run up to 8 independent sub-tasks in parallel helpers; returns a JSON "
                        "array of their results.",
            parameters=object_schema({"tasks": {
                "type": "array", "minItems": 1, "maxItems": MAX_TASKS,
                "items": object_schema({"id": {"type": "string"}, "goal": {"type": "string"},
                                        "context": {"type": "string"}}, ["goal"])}},
                ["tasks"]))

    def _role(self, count: int) -> str:
        return (f"You are one of {count} parallel helpers of {self.member.name}, a "
                f"{self.member.type} member of the studio {self.team.studio_name}. Do only the "
                "sub-task below with your tools and report its result with its evidence.")

    async def run(self, arguments: dict[str, Any], call_id: str) -> ToolResult:
        tasks = read_tasks(arguments)
        sink, member = self.hooked.sink, self.member
        who = {"group_id": self.team.studio_id, "agent_id": member.id,
               "agent_name": member.name, "agent_type": member.type}
        frames: list[dict[str, Any]] = []
        loops: list[RunLoop] = []
        system = member_prompt(self.team, member, self._role(len(tasks)))
        for task in tasks:
            frame = {"task_id": random_id(AGENT_TASK), "parent_id": call_id, "kind": "split",
                     **who, "group_name": self.team.studio_name,
                     "chat_agent_id": member.chat_agent_id, "goal": task.goal,
                     "context": task.context}
            await sink.emit("agent_task", {**frame, "status": "running"})
            request = task.goal if not task.context else f"{task.goal}\n\nContext: {task.context}"
            frames.append(frame)
            loops.append(member_loop(self.hooked, member, system, request,
                                     ToolSet(dict(self.helper_tools.tools)),
                                     MemberSink(sink, who)))
        outcomes = await DeferredList([cancellable(loop) for loop in loops],
                                      consumeErrors=True)
        if any(not ok and value.check(CancelledError) for ok, value in outcomes):
            # the run was stopped: every helper was cancelled with it
            for loop in loops:
                self.hooked.add_cost(loop.cost_nanos)
            raise CancelledError()
        results = []
        for task, frame, loop, (ok, value) in zip(tasks, frames, loops, outcomes, strict=True):
            results.append(await self._result(task, frame, loop, ok, value))
        return ToolResult(orjson.dumps(results).decode("utf-8"))

    async def _result(self, task: _Task, frame: dict[str, Any], loop: RunLoop, ok: bool,
                      value: Any) -> dict[str, Any]:
        self.hooked.add_cost(loop.cost_nanos)
        if ok and isinstance(value, LoopOutcome):
            await self.hooked.sink.emit("agent_task", {**frame, "status": "completed",
                                                       "result": value.content,
                                                       "mutation_count": 0})
            return {"id": task.id, "status": "completed", "result": value.content,
                    "mutations": 0}
        error = value.value.message if value.check(LoopFailed) else "Split agent failed"
        await self.hooked.sink.emit("agent_task", {**frame, "status": "error", "error": error})
        return {"id": task.id, "status": "error", "result": "", "error": error, "mutations": 0}
