"""``/api/announcements`` (admin): announcement CRUD (console contract §5.13).

``title`` is trimmed, required and at most 120 characters; ``content`` is required;
``enabled`` defaults to true and ``sort_order`` to 0 -- on PUT too, because PUT replaces the
record with the form (the origin's rule).  Unknown ids are 404, non-numeric ids 400.
"""

from __future__ import annotations

from typing import Any

from console.context import ConsoleContext
from console.http import bad_request, json_route, make_app, not_found, read_object
from console.user_view import timestamp
from console.validation import MISSING, Body, id_value
from gateway.store import announcements as store

TITLE_MAX = 120
CONTENT_MAX = 100_000
NOT_FOUND = "Announcement not found"


def announcement_view(row: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": row["id"],
        "title": row["title"],
        "content": row["content"],
        "enabled": bool(row["enabled"]),
        "sort_order": row["sort_order"],
        "created_at": timestamp(row["created_at"]),
        "updated_at": timestamp(row["updated_at"]),
    }


def announcement_values(body: Body) -> dict[str, Any]:
    title = body.string("title")
    if not title:
        raise bad_request("Announcement title is required", field="title")
    if len(title) > TITLE_MAX:
        raise bad_request("Announcement title is too long", field="title")
    content = body.string("content", strip=False, max_length=CONTENT_MAX)
    if content is MISSING or not content.strip():
        raise bad_request("Announcement content is required", field="content")
    enabled = body.boolean("enabled")
    sort_order = body.integer("sort_order", minimum=-1_000_000_000, maximum=1_000_000_000)
    return {"title": title, "content": content,
            "enabled": True if enabled is MISSING else enabled,
            "sort_order": 0 if sort_order is MISSING else sort_order}


def parse_id(raw: str) -> int:
    return id_value(raw, "id", "Invalid announcement id")


class AnnouncementRoutes:
    app = make_app()

    def __init__(self, ctx: ConsoleContext) -> None:
        self.ctx = ctx

    @app.route("/", methods=["GET"])
    @json_route
    async def index(self, request: Any) -> list[dict[str, Any]]:
        await self.ctx.sessions.admin(request)
        rows = await self.ctx.db.transaction(store.list_announcements)
        return [announcement_view(row) for row in rows]

    @app.route("/", methods=["POST"])
    @json_route
    async def create(self, request: Any) -> dict[str, Any]:
        await self.ctx.sessions.admin(request)
        values = announcement_values(Body(read_object(request)))
        row = await self.ctx.db.transaction(store.create_announcement, values, self.ctx.now())
        return announcement_view(row)

    @app.route("/<item>", methods=["GET"])
    @json_route
    async def show(self, request: Any, item: str) -> dict[str, Any]:
        await self.ctx.sessions.admin(request)
        row = await self.ctx.db.transaction(store.get_announcement, parse_id(item))
        if row is None:
            raise not_found(NOT_FOUND)
        return announcement_view(row)

    @app.route("/<item>", methods=["PUT"])
    @json_route
    async def update(self, request: Any, item: str) -> dict[str, Any]:
        await self.ctx.sessions.admin(request)
        item_id = parse_id(item)
        values = announcement_values(Body(read_object(request)))
        row = await self.ctx.db.transaction(store.update_announcement, item_id, values,
                                            self.ctx.now())
        if row is None:
            raise not_found(NOT_FOUND)
        return announcement_view(row)

    @app.route("/<item>", methods=["DELETE"])
    @json_route
    async def remove(self, request: Any, item: str) -> dict[str, Any]:
        await self.ctx.sessions.admin(request)
        if not await self.ctx.db.transaction(store.delete_announcement, parse_id(item)):
            raise not_found(NOT_FOUND)
        return {"message": "Announcement deleted"}
