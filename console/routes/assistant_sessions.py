"""``/api/user/advanced-chat/sessions``: chat sessions and their messages (agents contract
§1.6, [P-6], [P-7]).

``POST`` creates or upserts (id from the body, else generated); ``PUT /:id`` upserts with the
path id.  Both replace the whole message list.  Another user's session is not found (404) --
except when a client picks an id someone else owns, which is a 409.
"""

from __future__ import annotations

from typing import Any

from console.context import ConsoleContext
from console.http import bad_request, json_route, make_app, read_object
from console.services.assistant import tx
from console.services.assistant.session_input import Switches, read_session
from console.services.assistant.session_save import save_draft
from console.services.assistant.settings_view import admin_values
from console.services.assistant.views import session_view
from gateway.assistant.admin_settings import workspace_tools_enabled
from gateway.store.assistant import sessions as store

#: whole conversations travel in one body
BODY_LIMIT = 16 << 20
MAX_PAGE_SIZE = 100


def _page_number(request: Any, name: str, default: int, high: int) -> int:
    raw = request.args.get(name.encode())
    if not raw:
        return default
    text = raw[0].decode("utf-8", "replace").strip()
    if not (text.isascii() and text.isdigit()) or not 1 <= int(text[:9]) <= high:
        raise bad_request(f"{name} must be between 1 and {high}", field=name)
    return int(text)


class AssistantSessionRoutes:
    app = make_app()

    def __init__(self, ctx: ConsoleContext) -> None:
        self.ctx = ctx

    def _switches(self) -> tuple[Switches, list[dict[str, Any]]]:
        admin = admin_values(self.ctx.settings)
        switches = Switches(admin["assistant_mode_enabled"], admin["assistant_mcp_tools_enabled"],
                            workspace_tools_enabled(admin))
        return switches, admin["builtin_mcp_servers"]

    async def _save(self, request: Any, path_id: str | None) -> dict[str, Any]:
        user = await self.ctx.sessions.user(request)
        body = read_object(request, limit=BODY_LIMIT)
        switches, builtin = self._switches()
        draft = read_session(body, path_id, switches)
        stored = await tx.run(self.ctx, save_draft, user["id"], draft, body, builtin, switches,
                              self.ctx.now())
        return session_view(stored)

    @app.route("/", methods=["GET"])
    @json_route
    async def index(self, request: Any) -> list[dict[str, Any]]:
        user = await self.ctx.sessions.user(request)
        page = _page_number(request, "page", 1, 1_000_000)
        size = _page_number(request, "page_size", MAX_PAGE_SIZE, MAX_PAGE_SIZE)
        rows = await tx.run(self.ctx, store.list_sessions, user["id"], (page - 1) * size, size)
        return [session_view(row) for row in rows]

    @app.route("/", methods=["POST"])
    @json_route
    async def create(self, request: Any) -> dict[str, Any]:
        return await self._save(request, None)

    @app.route("/<session_id>", methods=["GET"])
    @json_route
    async def show(self, request: Any, session_id: str) -> dict[str, Any]:
        user = await self.ctx.sessions.user(request)
        return session_view(await tx.run(self.ctx, store.get_session, user["id"], session_id))

    @app.route("/<session_id>", methods=["PUT"])
    @json_route
    async def update(self, request: Any, session_id: str) -> dict[str, Any]:
        return await self._save(request, session_id)

    @app.route("/<session_id>", methods=["DELETE"])
    @json_route
    async def delete(self, request: Any, session_id: str) -> dict[str, Any]:
        user = await self.ctx.sessions.user(request)
        await tx.run(self.ctx, store.delete_session, user["id"], session_id)
        return {"message": "Session deleted"}
