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

from twisted.internet.defer import CancelledError

from gateway.assistant.builtin_tools import SkillBody, skill_tool
from gateway.assistant.conversation_setup import through_device
from gateway.assistant.ids import AGENT_TASK, random_id
from gateway.assistant.mcp_tools import McpUnavailable, mcp_tools
from gateway.assistant.run_loop import LoopCancelled, LoopFailed
from gateway.assistant.run_service import RunTools
from gateway.assistant.studio_team import AGENT_MISSING, DELEGABLE, Member, StudioTeam
from gateway.assistant.tool_set import (
    Tool,
    ToolFailed,
    ToolResult,
    ToolSet,
    object_schema,
    string_argument,
)
from gateway.studio.member_loop import (
    MemberSink,
    cancellable,
    device_tools,
    member_loop,
    member_prompt,
)
from gateway.studio.split import Split

NAME = "agent_delegate"
FAILED = "Delegated agent failed: "
NO_MODEL = "model is required for delegated agent"


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
        if member.type not in DELEGABLE:
            raise ToolFailed(f"{FAILED}cannot delegate to the studio's {member.type}")
        if not member.available:
            raise ToolFailed(f"{FAILED}{AGENT_MISSING}")
        if not member.model:
            raise ToolFailed(f"{FAILED}{NO_MODEL}")
        if member.problem:
            raise ToolFailed(f"{FAILED}{member.problem}")
        return member

    async def _member_tools(self, member: Member) -> ToolSet:
        """What a member executes with: its MCP servers' tools (``connector``-type ones on the
        run's device, as the chief's would be, §1.3) and skills, the run's device or sandbox
        tools (under the run's approval rules and approver) and ``agent_split``."""
        tools = ToolSet()
        servers = through_device(self.hooked.mcp, self.hooked.connector)
        try:
            tools.extend(await mcp_tools(member.servers, servers))
        except McpUnavailable as exc:
            raise ToolFailed(f"{FAILED}{exc}") from None
        skill = skill_tool(SkillBody(s.key, s.name, s.description, s.content)
                           for s in member.skills)
        if skill is not None:
            tools.add(skill)
        tools.extend(device_tools(self.hooked).tools.values())
        helpers = ToolSet(dict(tools.tools))  # a split's helpers work with the same, no split
        tools.add(Split(self.hooked, self.team, member, helpers).tool())
        return tools

    async def run(self, arguments: dict[str, Any], call_id: str) -> ToolResult:
        member = self._member(arguments)
        tools = await self._member_tools(member)
        goal = string_argument(arguments, "goal")
        context = string_argument(arguments, "context", required=False)
        sink = self.hooked.sink
        who = {"group_id": self.team.studio_id, "agent_id": member.id,
               "agent_name": member.name, "agent_type": member.type}
        task = {"task_id": random_id(AGENT_TASK), "parent_id": call_id, "kind": "cps",
                **who, "group_name": self.team.studio_name,
                "chat_agent_id": member.chat_agent_id, "goal": goal, "context": context}
        await sink.emit("agent_task", {**task, "status": "running"})
        member_sink = MemberSink(sink, who)
        request = goal if not context else f"{goal}\n\nContext: {context}"
        await member_sink.line("user", request)
        loop = member_loop(self.hooked, member, member_prompt(self.team, member), request,
                           tools, member_sink)
        try:
            outcome = await cancellable(loop)
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
