"""How a work item becomes an internal studio run (agents contract §4.8 (c), §4.7, §4.16).

Why its own module: the control loop decides *when* to start work; this module says *what*
the run is — a new read-only session ``pcw-…`` titled ``Personal Company: <title>`` (reviews:
``Personal Company Review: <title>``), one user message carrying the item, the studio's runtime,
approval ``manual`` — and starts it through the assistant's own run service, so the run is
billed, leased, stoppable and recorded exactly like any other assistant run.

The assistant base this builds on does not prepare ``agent_group`` runs yet (its preparation
answers ``Studio not found``), so the run is led by the studio's chief member as an assistant
run tagged with the studio id; the message, session, runtime and billing are those of §4.8.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from gateway.assistant.completion_request import read_completion
from gateway.assistant.ids import random_id
from gateway.assistant.preparation import prepare
from gateway.assistant.run_service import RunService
from gateway.assistant.tool_set import Tool
from gateway.store.assistant.refused import Refused
from gateway.store.assistant.rows import RunRow
from gateway.store.studio.rows import CompanyRow, WorkItemRow
from gateway.store.studio.studios import find_studio
from gateway.studio.json_text import JsonTextError, canonical
from gateway.studio.review_tool import review_tool

SESSION_PREFIX = "pcw"
NO_CHIEF = "Studio has no chief member"


class StartFailed(Exception):
    """The run could not be created; ``str(error)`` is what the audit records ([P-34])."""


class InternalRuns(Protocol):
    """What the control loop needs from the assistant: start a run, stop a run."""

    async def start(self, company: CompanyRow, work_item: WorkItemRow, kind: str) -> str: ...

    async def stop(self, user_id: int, run_id: str) -> None: ...


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


def completion_body(company: CompanyRow, chief: dict[str, Any], work_item: WorkItemRow,
                    kind: str) -> dict[str, Any]:
    """The internal completion of §4.8 (c), led by the chief member (its agent and model)."""
    body: dict[str, Any] = {
        "mode": "assistant", "agent_id": str(chief.get("chat_agent_id") or ""),
        "model": str(chief.get("default_model") or ""),
        "agent_group_id": company.agent_group_id,
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
    """``InternalRuns`` through the assistant's run service (§1.8-§1.11).  Review runs get
    the ``studio_review_work`` tool: their sessions are remembered until the run's tools are
    built (on this node, which runs what it starts)."""

    runs: RunService
    review_sessions: set[str] = field(default_factory=set)

    def __post_init__(self) -> None:
        self.runs.tool_hooks.append(self._review_tools)

    def _review_tools(self, run: RunRow) -> list[Tool]:
        if run.session_id not in self.review_sessions:
            return []
        self.review_sessions.discard(run.session_id)
        return [review_tool(self.runs.ctx.db, self.runs.ctx.now, run.id)]

    async def start(self, company: CompanyRow, work_item: WorkItemRow, kind: str) -> str:
        ctx = self.runs.ctx
        user_id = company.owner_user_id

        def build(conn: Any) -> Any:
            studio = find_studio(conn, user_id, company.agent_group_id)
            chief = next((m for m in (studio.agents if studio else [])
                          if m.get("type") == "chief"), None)
            if chief is None:
                raise StartFailed(NO_CHIEF)
            request = read_completion(completion_body(company, chief, work_item, kind))
            if kind == "review":
                self.review_sessions.add(request.session_id)
            return prepare(conn, user_id, request, self.runs.settings, ctx.now())

        try:
            prepared = await ctx.db.transaction(build)
            started = await self.runs.start_run(user_id, prepared)
        except Refused as refused:
            raise StartFailed(refused.message) from None
        return str(started["run"]["id"])

    async def stop(self, user_id: int, run_id: str) -> None:
        try:
            await self.runs.stop(user_id, run_id)
        except Refused:
            return
