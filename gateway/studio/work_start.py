"""How a work item becomes an internal studio run (agents contract §4.8 (c), §4.7, §4.16).

Why its own module: the control loop decides *when* to start work; this module says *what*
the run is — a new read-only session ``pcw-…`` titled ``Personal Company: <title>`` (reviews:
``Personal Company Review: <title>``), one user message carrying the item, the studio's runtime,
approval ``manual`` — and starts it through the assistant's own run service, so the run is
billed, leased, stoppable and recorded exactly like any other assistant run.

The run is a true ``agent_group`` run prepared as ``internal``: the studio's chief leads it
with ``agent_delegate`` (§1.12), the studio's checker decides its connector approvals (§4.13),
its session is read-only for the owner and its run can only be stopped by operations (§4.16).
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any, Protocol

from gateway.assistant.completion_request import read_completion
from gateway.assistant.ids import random_id
from gateway.assistant.preparation import prepare
from gateway.assistant.run_service import RunService, RunTools
from gateway.assistant.tool_set import Tool
from gateway.store.assistant.refused import Refused
from gateway.store.studio.rows import CompanyRow, WorkItemRow
from gateway.studio.json_text import JsonTextError, canonical
from gateway.studio.run_tools import studio_tools

SESSION_PREFIX = "pcw"


class StartFailed(Exception):
    """The run could not be created; ``str(error)`` is what the audit records ([P-34])."""


class InternalRuns(Protocol):
    """What the control loop needs from the assistant: start a run, stop a run."""

    async def start(self, company: CompanyRow, work_item: WorkItemRow, kind: str) -> str: ...

    async def stop(self, user_id: int, run_id: str) -> None: ...

    def watch(self, finished: Callable[[str], Coroutine[Any, Any, None]]) -> Callable[[], None]:
        """Call ``finished(run_id)`` when a run started here ends; returns the unwatch."""


def work_message(work_item: WorkItemRow, kind: str) -> str:
    """The one user message of an internal run (§4.8 (c) and the review start)."""
    try:
        snapshot = canonical(work_item.input_snapshot or "{}")
    except JsonTextError:
        snapshot = work_item.input_snapshot
    lines = [f"Work item: {work_item.title}",
             f"Description: {work_item.description}",
             f"Definition of done: {work_item.definition_of_done}",
             f"Input snapshot: {snapshot}", ""]
    if kind == "review":
        lines.append("Review this work item. Delegate the inspection to a reviewer member, then "
                     "call studio_review_work exactly once with decision verified, "
                     "needs_revision or blocked and a summary.")
    else:
        lines.append("Deliver this work item with the team. Use only the tools provided to you. "
                     "Report the evidence, the risks and the next steps.")
    return "\n".join(lines)


def session_title(work_item: WorkItemRow, kind: str) -> str:
    prefix = "Personal Company Review" if kind == "review" else "Personal Company"
    return f"{prefix}: {work_item.title}"[:200]


def completion_body(company: CompanyRow, work_item: WorkItemRow, kind: str) -> dict[str, Any]:
    """The internal completion of §4.8 (c): ``agent_group`` mode, the studio as the group."""
    body: dict[str, Any] = {
        "mode": "agent_group", "agent_group_id": company.agent_group_id,
        "session_id": random_id(SESSION_PREFIX), "title": session_title(work_item, kind),
        "messages": [{"role": "user", "content": work_message(work_item, kind)}],
        "connector_approval_mode": "full_access" if company.cloud_sandbox_id else "manual"}
    if company.cloud_sandbox_id:
        body["cloud_sandbox_id"] = company.cloud_sandbox_id
    elif company.connector_device_id:
        body["connector_device_id"] = company.connector_device_id
        body["connector_workspace_path"] = company.connector_workspace_path
    return body


@dataclass
class AssistantInternalRuns:
    """``InternalRuns`` through the assistant's run service (§1.8-§1.11).  Every studio run
    gets its studio tools (``run_tools``); review runs also get ``studio_review_work``: their
    sessions are remembered until the run's tools are built (on this node, which runs what it
    starts)."""

    runs: RunService
    review_sessions: set[str] = field(default_factory=set)

    def __post_init__(self) -> None:
        self.runs.tool_hooks.append(self._tools)

    def _tools(self, hooked: RunTools) -> list[Tool]:
        review = hooked.run.session_id in self.review_sessions
        self.review_sessions.discard(hooked.run.session_id)
        return studio_tools(hooked, review=review)

    async def start(self, company: CompanyRow, work_item: WorkItemRow, kind: str) -> str:
        ctx = self.runs.ctx
        user_id = company.owner_user_id

        body = completion_body(company, work_item, kind)

        def build(conn: Any) -> Any:
            return prepare(conn, user_id, read_completion(body), self.runs.settings, ctx.now(),
                           internal=True)

        if kind == "review":
            self.review_sessions.add(body["session_id"])
        try:
            prepared = await ctx.db.transaction(build)
            started = await self.runs.start_run(user_id, prepared)
        except Refused as refused:
            self.review_sessions.discard(body["session_id"])
            raise StartFailed(refused.message) from None
        return str(started["run"]["id"])

    def watch(self, finished: Callable[[str], Coroutine[Any, Any, None]]) -> Callable[[], None]:
        self.runs.finish_hooks.append(finished)

        def unwatch() -> None:
            if finished in self.runs.finish_hooks:
                self.runs.finish_hooks.remove(finished)

        return unwatch

    async def stop(self, user_id: int, run_id: str) -> None:
        try:
            await self.runs.stop(user_id, run_id, studio=True)
        except Refused:
            return
