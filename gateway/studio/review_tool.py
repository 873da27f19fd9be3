"""The chief's ``studio_review_work`` tool in a review run (agents contract §4.8).

Why the delegation is checked from the run's own record: the rule is that a decision is only
accepted after a reviewer member was consulted in *this* run, and the run's stored events are
the evidence (an ``agent_task`` event of ``agent_delegate`` with ``agent_type: reviewer`` that
completed).  The decision itself is recorded by ``gateway.store.studio.reviews``, atomically
with the item's new status.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from gateway.assistant.tool_set import (
    BadArguments,
    Tool,
    ToolFailed,
    ToolResult,
    object_schema,
    string_argument,
)
from gateway.store.assistant.refused import Refused
from gateway.store.pool import DBRunner
from gateway.store.studio import reviews

NAME = "studio_review_work"


def review_tool(db: DBRunner, now: Any, run_id: str,
                events_written: Callable[[], Awaitable[None]]) -> Tool:
    """``events_written`` waits for the run's emitted events to be committed: the reviewer's
    ``agent_task`` event may still be in the group-commit writer when the chief decides."""
    async def run(arguments: dict[str, Any], _call_id: str) -> ToolResult:
        decision = string_argument(arguments, "decision").strip()
        if decision not in reviews.DECISIONS:
            raise BadArguments(reviews.BAD_DECISION)
        summary = string_argument(arguments, "summary", required=False)
        await events_written()

        def write(conn: Any) -> str:
            return reviews.record_decision(conn, run_id, decision, summary,
                                           reviews.reviewer_consulted(conn, run_id), now())

        try:
            status = await db.transaction(write)
        except Refused as refused:
            raise ToolFailed(refused.message) from None
        return ToolResult(f"Review recorded: {decision}; work item is now {status}.")

    return Tool(
        name=NAME, group=NAME, run=run, tool=NAME,
        description="Record the review of this Studio work item, exactly once, after a "
                    "reviewer member has inspected it.",
        parameters=object_schema({
            "decision": {"type": "string", "enum": list(reviews.DECISIONS)},
            "summary": {"type": "string"}}, ["decision", "summary"]))
