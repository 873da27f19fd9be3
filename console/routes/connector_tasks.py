"""``/api/user/advanced-chat/connector-tasks``: one of the caller's connector tasks and the
approval decision on it (agents contract §1.13).

A decision moves ``pending_approval`` to ``queued`` (the device is woken wherever its link is)
or to ``failed`` with ``denied by user``; a task already decided answers 409 with its status.
"""

from __future__ import annotations

from typing import Any

from console.context import ConsoleContext
from console.http import ApiError, bad_request, json_route, make_app, read_object
from gateway.links.node import AgentLinks
from gateway.links.tasks import TaskNotActive
from gateway.links.views import task_view
from gateway.store import connector_tasks as task_store

NOT_FOUND = "Connector task not found"


class ConnectorTaskRoutes:
    """Mounted at ``/api/user/advanced-chat/connector-tasks``."""

    app = make_app()

    def __init__(self, ctx: ConsoleContext) -> None:
        self.ctx = ctx

    @property
    def links(self) -> AgentLinks:
        assert self.ctx.links is not None
        return self.ctx.links

    @app.route("/<task_id>", methods=["GET"])
    @json_route
    async def show(self, request: Any, task_id: str) -> dict[str, Any]:
        user = await self.ctx.sessions.user(request)
        task = await self.ctx.db.transaction(task_store.get_for_user, user["id"], task_id)
        if task is None:
            raise ApiError(404, NOT_FOUND)
        return task_view(task)

    @app.route("/<task_id>/decision", methods=["POST"])
    @json_route
    async def decide(self, request: Any, task_id: str) -> dict[str, Any]:
        user = await self.ctx.sessions.user(request)
        body = read_object(request)
        approved = body.get("approved")
        if not isinstance(approved, bool):
            raise bad_request("approved must be a boolean", field="approved")
        if "input" in body and not isinstance(body["input"], dict):
            raise bad_request("input must be an object", field="input")
        task = await self.ctx.db.transaction(task_store.get_for_user, user["id"], task_id)
        if task is None:
            raise ApiError(404, NOT_FOUND)
        try:
            decided = await self.links.tasks.decide(task.id, approved, "user")
        except TaskNotActive as exc:
            raise ApiError(409, "Connector task already decided",
                           extra={"status": exc.status or ""}) from None
        return {"ok": True, "status": decided.status}
