"""A studio member's own tool loop inside the chief's run (agents contract §1.10, §1.12): what
``agent_delegate`` and ``agent_split`` both run.

Why shared: a delegated member and a split helper are the same thing at different sizes -- the
member's prompt and model, the run's device tools, the run's way to call the model (billed to
the same user through the internal /v1 path) and the run's events, where the loop's lines
appear as ``agent_message`` transcript events.  ``cancellable`` makes stopping the chief's run
stop the loop and abandon its model call in flight.
"""

from __future__ import annotations

from typing import Any

from twisted.internet.defer import Deferred, ensureDeferred
from twisted.python.failure import Failure

from gateway.assistant.prompt import ASSISTANT_INSTRUCTIONS
from gateway.assistant.run_loop import EventSink, LoopLimits, RunLoop
from gateway.assistant.run_service import RunTools
from gateway.assistant.studio_team import Member, StudioTeam
from gateway.assistant.tool_set import APPROVAL_REQUIRED, RUNNING, ToolSet

MEMBER_ROUNDS = 20


class MemberSink:
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


def member_prompt(team: StudioTeam, member: Member, role: str = "") -> str:
    role = role or (
        f"You are {member.name}, a {member.type} member of the studio {team.studio_name}. "
        f"{team.chief.name}, the chief, delegated a task to you. Do it with your tools and "
        "report the result with its evidence.")
    skills = [f"[Skill: {skill.name}]\n{skill.prompt.strip()}" for skill in member.skills
              if skill.prompt.strip()]
    return "\n\n".join(part for part in (member.prompt, *skills, ASSISTANT_INSTRUCTIONS, role)
                       if part)


def device_tools(hooked: RunTools) -> ToolSet:
    """The run's device or sandbox tools, under the run's approval rules and approver."""
    tools = ToolSet()
    if hooked.connector is not None:
        tools.extend(hooked.connector.tools(hooked.prepared.connector_switches))
    return tools


def member_loop(hooked: RunTools, member: Member, system: str, request: str, tools: ToolSet,
                sink: EventSink) -> RunLoop:
    return RunLoop(
        limits=LoopLimits(mode="agent_group", max_rounds=MEMBER_ROUNDS, retries=True,
                          text_events=True),
        call_model=hooked.call_model, tools=tools, sink=sink, clock=hooked.clock,
        messages=[{"role": "system", "content": system}, {"role": "user", "content": request}],
        model_options={"model": member.model})


def cancellable(loop: RunLoop) -> Deferred[Any]:
    """The loop's outcome; cancelling it (the chief's run stopped) cancels the loop, which also
    abandons the model call in flight."""
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
