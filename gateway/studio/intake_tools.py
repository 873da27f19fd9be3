"""The chief's intake tools in the owner's studio chat (agents contract §4.16).

Why they exist: while operations are ``operating`` the owner's chat with the studio does not
do the work itself; the chief turns requests into work items (``studio_create_work``: an
``r0`` item, queued unless the charter's policy says otherwise, audit
``work_item.created_from_chat``) and reports the queue (``studio_list_work``).  Internal work
sessions get the same two names as tool errors, so a work run cannot spawn or inspect work.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable
from datetime import datetime
from typing import Any

import orjson

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
from gateway.store.studio import approvals, companies, connector_approvals, work_items
from gateway.store.studio.rows import WorkItemRow

CREATE = "studio_create_work"
LIST = "studio_list_work"
INTERNAL_CREATE = "internal Studio work sessions cannot create additional work items"
INTERNAL_LIST = "internal Studio work sessions cannot inspect the Studio work queue"
MAX_LISTED = 12
MAX_TITLE = 200

CREATE_PARAMETERS = object_schema({
    "title": {"type": "string"}, "definition_of_done": {"type": "string"},
    "description": {"type": "string"}, "priority": {"type": "integer"}},
    ["title", "definition_of_done"])
CREATE_DESCRIPTION = ("Create a Studio work item from the owner's request; the team will "
                      "deliver it later.")
LIST_DESCRIPTION = "List the Studio's work items and pending approvals."


def _priority(arguments: dict[str, Any]) -> int:
    value = arguments.get("priority", 0)
    if value is None:
        return 0
    if isinstance(value, bool) or not isinstance(value, int):
        raise BadArguments("priority must be an integer")
    return value


def intake_tools(db: DBRunner, now: Callable[[], datetime], user_id: int,
                 company_id: int) -> list[Tool]:
    """The intake desk's two tools for the studio's operations record ``company_id``."""

    async def create(arguments: dict[str, Any], _call_id: str) -> ToolResult:
        item = work_items.NewWorkItem(
            title=string_argument(arguments, "title").strip()[:MAX_TITLE],
            definition_of_done=string_argument(arguments, "definition_of_done").strip(),
            description=string_argument(arguments, "description", required=False).strip(),
            priority=_priority(arguments),
            idempotency_key=f"chief-work_{secrets.token_hex(16)}")

        def write(conn: Any) -> WorkItemRow:
            return work_items.create(conn, companies.get(conn, company_id), user_id, item,
                                     now(), actor_type="chief",
                                     event_type="work_item.created_from_chat")

        try:
            created = await db.transaction(write)
        except Refused as refused:
            raise ToolFailed(refused.message) from None
        return ToolResult(f"Created Studio work item #{created.id}. Status: {created.status}. "
                          "The Chief scheduler will start it.")

    async def listing(_arguments: dict[str, Any], _call_id: str) -> ToolResult:
        def read(conn: Any) -> dict[str, Any]:
            record = companies.get(conn, company_id)
            items = work_items.list_items(conn, company_id, MAX_LISTED)
            return {"studio": {"name": record.name, "state": record.state},
                    "work_items": [{"id": i.id, "title": i.title, "status": i.status,
                                    "priority": i.priority} for i in items],
                    "pending_approvals": {
                        "work": len(approvals.list_approvals(conn, company_id,
                                                             pending_only=True)),
                        "connector": len(connector_approvals.pending(conn, company_id))}}

        return ToolResult(orjson.dumps(await db.transaction(read)).decode("utf-8"))

    return [Tool(name=CREATE, description=CREATE_DESCRIPTION, parameters=CREATE_PARAMETERS,
                 group=CREATE, run=create, tool=CREATE),
            Tool(name=LIST, description=LIST_DESCRIPTION, parameters=object_schema({}),
                 group=LIST, run=listing, tool=LIST)]


def refused_intake_tools() -> list[Tool]:
    """The same names inside internal work sessions, where both are tool errors (§4.16)."""

    def refusing(text: str) -> Any:
        async def run(_arguments: dict[str, Any], _call_id: str) -> ToolResult:
            raise ToolFailed(text)

        return run

    return [Tool(name=CREATE, description=CREATE_DESCRIPTION, parameters=CREATE_PARAMETERS,
                 group=CREATE, run=refusing(INTERNAL_CREATE), tool=CREATE),
            Tool(name=LIST, description=LIST_DESCRIPTION, parameters=object_schema({}),
                 group=LIST, run=refusing(INTERNAL_LIST), tool=LIST)]
