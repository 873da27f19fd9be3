"""``/api/user/advanced-chat/connector-tasks``: one of the caller's connector tasks and the
approval decision on it (agents contract §1.13) -- the one route group for them, used by the
assistant's runs and the device pages alike (the run's pending list is a run route).

A decision moves ``pending_approval`` to ``queued`` (the device is woken wherever its link is;
an object ``input`` replaces the arguments after the fresh-argument check, [P-15]) or to
``failed`` with ``denied by user``; a task already decided answers 409 with its status.
"""

from __future__ import annotations

from typing import Any

from console.context import ConsoleContext
from console.http import ApiError, bad_request, json_route, make_app, read_object
from gateway.assistant.connector_decision import InvalidAdjustment, adjusted_payload
from gateway.links.tasks import TaskNotActive
from gateway.links.views import task_view
from gateway.store import connector_tasks as task_store

NOT_FOUND = "Connector task not found"


class ConnectorTaskRoutes:
    """Mounted at ``/api/user/advanced-chat/connector-tasks``."""

    app = make_app()

    def __init__(self, ctx: ConsoleContext) -> None:
        self.ctx = ctx

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
        if body.get("input") is not None and not isinstance(body["input"], dict):
            raise bad_request("input must be an object", field="input")
        task = await self.ctx.db.transaction(task_store.get_for_user, user["id"], task_id)
        if task is None:
            raise ApiError(404, NOT_FOUND)
        if task.status != task_store.PENDING_APPROVAL:
            raise _decided(task.status)
        given = body.get("input")
        try:
            payload = adjusted_payload(task, given) if approved and given is not None else None
        except InvalidAdjustment as exc:
            raise bad_request(str(exc), field="input") from None
        try:
            decided = await self.ctx.agent_links.tasks.decide(
                task.id, approved, "user", payload=payload)
        except TaskNotActive as exc:
            raise _decided(exc.status) from None
        return {"ok": True, "status": decided.status}


def _decided(status: str | None) -> ApiError:
    return ApiError(409, "Connector task already decided", extra={"status": status or ""})
