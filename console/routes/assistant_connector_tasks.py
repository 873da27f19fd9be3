"""``POST /api/user/advanced-chat/connector-tasks/:id/decision`` (agents contract §1.13)."""

from __future__ import annotations

from typing import Any

from console.context import ConsoleContext
from console.http import json_route, make_app, read_object
from console.routes.assistant_completions import refused_body
from gateway.assistant.connector_decision import decide, read_decision
from gateway.assistant.run_service import RunService
from gateway.store.assistant.refused import Refused


class ConnectorTaskRoutes:
    app = make_app()

    def __init__(self, ctx: ConsoleContext, runs: RunService) -> None:
        self.ctx = ctx
        self.runs = runs

    @app.route("/<string:task_id>/decision", methods=["POST"])
    @json_route
    async def decision(self, request: Any, task_id: str) -> Any:
        user = await self.ctx.sessions.user(request)
        user_id, now = user["id"], self.ctx.now()
        try:
            approved, given = read_decision(read_object(request))
            status, device_id = await self.ctx.db.transaction(
                decide, user_id, task_id, approved, given, now)
        except Refused as refusal:
            return refusal.status, refused_body(refusal)
        if status == "queued":
            self.runs.wake_device(device_id)
        return {"ok": True, "status": status}
