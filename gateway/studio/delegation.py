"""The chief's ``agent_delegate`` tool: a studio member's own tool loop as a sub-run (agents
contract §1.8 step 4, §1.10 ``agent_task``/``agent_message``, §1.12).

Why a sub-run inside the tool call rather than a second run record: the member works for the
chief's run -- its model calls are billed through the same internal /v1 path to the same user,
its cost is added to the run's cost to the nano-unit, its connector tasks belong to the run
(and so to the run's approver), and stopping the run stops the member with it.  What the member
does is visible in the run's events: ``agent_task`` (``running`` → ``completed``/``error``)
frames it, and its transcript lines arrive as ``agent_message`` events.

Rules (§1.12): only the chief delegates (members do not get this tool, so the depth is one);
delegating to the chief or the checker, to an unknown member or to one whose chat agent is gone
is a tool error; tool calls run one after another, so one member works at a time.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from twisted.internet.defer import CancelledError, Deferred, ensureDeferred
from twisted.python.failure import Failure

from gateway.assistant.ids import AGENT_TASK, random_id
from gateway.assistant.prompt import ASSISTANT_INSTRUCTIONS
from gateway.assistant.run_loop import EventSink, LoopCancelled, LoopFailed, LoopLimits, RunLoop
from gateway.assistant.run_service import RunTools
from gateway.assistant.studio_team import AGENT_MISSING, Member, StudioTeam
from gateway.assistant.tool_set import (
    APPROVAL_REQUIRED,
    RUNNING,
    Tool,
    ToolFailed,
    ToolResult,
    ToolSet,
    object_schema,
    string_argument,
)

NAME = "agent_delegate"
FAILED = "Delegated agent failed: "
NO_MODEL = "model is required for delegated agent"
MEMBER_ROUNDS = 20
#: members who may be delegated to; the chief coordinates and the checker only approves
DELEGATES = ("worker", "critic", "reviewer")


class _MemberSink:
    """A member loop's events as ``agent_message`` transcript lines of the parent run (its
    round markers stay out: the run's ``current_round`` is the chief's)."""

    def __init__(self, parent: EventSink, who: dict[str, Any]) -> None:
        self.parent, self.who = parent, who

    async def line(self, role: str, content: str, tool: str = "", status: str = "") -> None:
        await self.parent.emit("agent_message", {**self.who, "role": role, "content": content,
                                                 "tool": tool, "status": status})

    async def emit(self, event: str, payload: dict[str, Any]) -> None:
        if event == "text":
            await self.line("assistant", str(payload.get("delta") or ""))
        elif event == "tool_call" and payload.get("status") not in (RUNNING, APPROVAL_REQUIRED):
            await self.line("tool", str(payload.get("result") or ""),
                            str(payload.get("name") or ""), str(payload.get("status") or ""))


def member_prompt(team: StudioTeam, member: Member) -> str:
    role = (f"You are {member.name}, a {member.type} member of the studio {team.studio_name}. "
            f"{team.chief.name}, the chief, delegated a task to you. Do it with your tools and "
            "report the result with its evidence.")
    return "\n\n".join(part for part in (member.prompt, ASSISTANT_INSTRUCTIONS, role) if part)


@dataclass
class Delegation:
    hooked: RunTools
    team: StudioTeam

    def tool(self) -> Tool:
        return Tool(
            name=NAME, group="agent_group", run=self.run, tool=NAME,
            description="Delegate a task to a member of your studio; returns the member's "
                        "final answer.",
            parameters=object_schema({
                "group_id": {"type": "string", "description": "the studio id"},
                "agent_id": {"type": "string", "description": "the member's id"},
                "goal": {"type": "string"}, "context": {"type": "string"}},
                ["agent_id", "goal"]))

    def _member(self, arguments: dict[str, Any]) -> Member:
        group_id = string_argument(arguments, "group_id", required=False).strip()
        if group_id and group_id != self.team.studio_id:
            raise ToolFailed(f"{FAILED}unknown studio: {group_id}")
        agent_id = string_argument(arguments, "agent_id").strip()
        member = self.team.member(agent_id)
        if member is None:
            raise ToolFailed(f"{FAILED}unknown studio member: {agent_id}")
        if member.type not in DELEGATES:
            raise ToolFailed(f"{FAILED}cannot delegate to the studio's {member.type}")
        if not member.available:
            raise ToolFailed(f"{FAILED}{AGENT_MISSING}")
        if not member.model:
            raise ToolFailed(f"{FAILED}{NO_MODEL}")
        return member

    def _member_tools(self) -> ToolSet:
        tools = ToolSet()
        connector = self.hooked.connector
        if connector is not None:
            tools.extend(connector.tools(self.hooked.prepared.connector_switches))
        return tools

    async def run(self, arguments: dict[str, Any], call_id: str) -> ToolResult:
        member = self._member(arguments)
        goal = string_argument(arguments, "goal")
        context = string_argument(arguments, "context", required=False)
        sink = self.hooked.sink
        who = {"group_id": self.team.studio_id, "agent_id": member.id,
               "agent_name": member.name, "agent_type": member.type}
        task = {"task_id": random_id(AGENT_TASK), "parent_id": call_id, "kind": "cps",
                **who, "group_name": self.team.studio_name,
                "chat_agent_id": member.chat_agent_id, "goal": goal, "context": context}
        await sink.emit("agent_task", {**task, "status": "running"})
        member_sink = _MemberSink(sink, who)
        request = goal if not context else f"{goal}\n\nContext: {context}"
        await member_sink.line("user", request)
        loop = RunLoop(
            limits=LoopLimits(mode="agent_group", max_rounds=MEMBER_ROUNDS, retries=True,
                              text_events=True),
            call_model=self.hooked.call_model, tools=self._member_tools(), sink=member_sink,
            clock=self.hooked.clock,
            messages=[{"role": "system", "content": member_prompt(self.team, member)},
                      {"role": "user", "content": request}],
            model_options={"model": member.model})
        try:
            outcome = await _cancellable(loop)
        except (CancelledError, LoopCancelled):
            self.hooked.add_cost(loop.cost_nanos)
            raise
        except LoopFailed as failure:
            self.hooked.add_cost(loop.cost_nanos)
            await sink.emit("agent_task", {**task, "status": "error",
                                           "error": failure.message})
            raise ToolFailed(f"{FAILED}{failure.message}") from None
        self.hooked.add_cost(outcome.cost_nanos)
        await sink.emit("agent_task", {**task, "status": "completed",
                                       "result": outcome.content, "mutation_count": 0})
        return ToolResult(f"[{member.name}] {outcome.content}")


def _cancellable(loop: RunLoop) -> Deferred[Any]:
    """The member loop's outcome; cancelling it (the chief's run stopped) cancels the loop,
    which also abandons the member's model call in flight."""
    guard: Deferred[Any] = Deferred(lambda _d: loop.cancel())

    def relay(result: Any) -> None:
        if guard.called:
            return None  # the guard was cancelled first: the loop's own end is not news
        if isinstance(result, Failure):
            guard.errback(result)
        else:
            guard.callback(result)
        return None

    ensureDeferred(loop.run()).addBoth(relay)
    return guard
