"""``/api/user/advanced-chat/agent-groups``: the user's studios (agents contract §4.1).

A studio is the only way a ``studio_id`` comes to exist.  Another user's studio id answers
exactly like a missing one (404 ``Studio not found``).  Deleting a studio deletes its
operations record too and stops the runs of its executing work (hence the run service).
"""

from __future__ import annotations

from typing import Any

from twisted.logger import Logger

from console.context import ConsoleContext
from console.http import bad_request, json_route, make_app, read_object
from console.services.assistant import tx
from console.services.studio.views import studio_view
from gateway.assistant.ids import random_id
from gateway.assistant.run_service import RunService
from gateway.store.studio import studios as store
from gateway.studio.members import StudioInput, StudioInputError, read_studio

log = Logger()

BODY_LIMIT = 4 << 20
STUDIO_PREFIX = "agp"


def _read(request: Any, path_id: str | None) -> StudioInput:
    try:
        return read_studio(read_object(request, limit=BODY_LIMIT), path_id,
                           random_id(STUDIO_PREFIX))
    except StudioInputError as error:
        raise bad_request(str(error)) from None


class StudioRoutes:
    app = make_app()

    def __init__(self, ctx: ConsoleContext, runs: RunService) -> None:
        self.ctx = ctx
        self.runs = runs

    @app.route("/", methods=["GET"])
    @json_route
    async def index(self, request: Any) -> dict[str, Any]:
        user = await self.ctx.sessions.user(request)
        rows = await tx.run(self.ctx, store.list_studios, user["id"])
        return {"groups": [studio_view(row) for row in rows]}

    @app.route("/", methods=["POST"])
    @json_route
    async def create(self, request: Any) -> dict[str, Any]:
        user = await self.ctx.sessions.user(request)
        studio = _read(request, None)
        row = await tx.run(self.ctx, store.save_studio, user["id"], studio, self.ctx.now())
        return studio_view(row)

    @app.route("/<studio_id>", methods=["GET"])
    @json_route
    async def show(self, request: Any, studio_id: str) -> dict[str, Any]:
        user = await self.ctx.sessions.user(request)
        row = await tx.run(self.ctx, store.get_studio, user["id"], studio_id)
        return studio_view(row)

    @app.route("/<studio_id>", methods=["PUT"])
    @json_route
    async def update(self, request: Any, studio_id: str) -> dict[str, Any]:
        user = await self.ctx.sessions.user(request)
        studio = _read(request, studio_id)
        row = await tx.run(self.ctx, store.update_studio, user["id"], studio, self.ctx.now())
        return studio_view(row)

    @app.route("/<studio_id>", methods=["DELETE"])
    @json_route
    async def delete(self, request: Any, studio_id: str) -> dict[str, Any]:
        user = await self.ctx.sessions.user(request)
        run_ids = await tx.run(self.ctx, store.delete_studio, user["id"], studio_id)
        for run_id in run_ids:
            try:
                await self.runs.stop(user["id"], run_id, studio=True)
            except Exception:
                log.failure("stopping run {run_id} of a deleted studio failed", run_id=run_id)
        return {"message": "Studio deleted"}
