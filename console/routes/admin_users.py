"""``/api/users`` (admin): list/search, update and delete accounts (console contract §5.12).

``GET /`` answers the origin's plain array (newest first) when no query is given, and the
envelope ``{items, total, page, page_size}`` when ``page``, ``page_size`` or ``search`` is.
``PUT /:id`` takes only the whitelisted fields username, email, balance (absolute, >= 0,
ledgered), group_ids, group_id, is_admin and enabled.  The safety rules (last admin, self
demotion, token revocation) live in ``gateway.store.user_admin``.  Every change is announced on
the USERS channel so caches holding the user (sessions, API keys) reload.
"""

from __future__ import annotations

from typing import Any

from console.context import ConsoleContext
from console.http import bad_request, json_route, make_app, read_object
from console.services.catalog import tx as catalog_tx
from console.services.identity.registration import clean_email, clean_username
from console.user_view import user_view
from console.validation import MISSING, Body, page_value
from gateway.billing.money import to_nanos
from gateway.invalidation import USERS
from gateway.store import user_admin as store

DEFAULT_PAGE_SIZE = 20
MAX_PAGE_SIZE = 100


def _arg(request: Any, name: str) -> str | None:
    values = request.args.get(name.encode())
    if not values:
        return None
    text = values[0].decode("utf-8", "replace").strip()
    return text or None





def user_changes(body: Body) -> dict[str, Any]:
    changes: dict[str, Any] = {}
    if body.has("username"):
        changes["username"] = clean_username(body.data["username"])
    if body.has("email"):
        changes["email"] = clean_email(body.data["email"])
    balance = body.decimal("balance")
    if balance is not MISSING:
        changes["balance_nanos"] = to_nanos(balance)
    group_ids = body.int_list("group_ids", max_items=100)
    if group_ids is not MISSING:
        if not group_ids:
            raise bad_request("group_ids must list at least one group", field="group_ids")
        changes["group_ids"] = group_ids
    group_id = body.integer("group_id")
    if group_id is not MISSING:
        if group_id <= 0:
            raise bad_request("Group is required", field="group_id")
        changes["group_id"] = group_id
    for flag in ("is_admin", "enabled"):
        value = body.boolean(flag)
        if value is not MISSING:
            changes[flag] = value
    if not changes:
        raise bad_request("No fields to update")
    return changes


class AdminUserRoutes:
    app = make_app()

    def __init__(self, ctx: ConsoleContext) -> None:
        self.ctx = ctx

    @app.route("/", methods=["GET"])
    @json_route
    async def index(self, request: Any) -> Any:
        await self.ctx.sessions.admin(request)
        page_arg, size_arg = _arg(request, "page"), _arg(request, "page_size")
        search = _arg(request, "search")
        paged = page_arg is not None or size_arg is not None or search is not None
        page = page_value(page_arg, 1, "page")
        size = min(page_value(size_arg, DEFAULT_PAGE_SIZE, "page_size"), MAX_PAGE_SIZE)
        result = await self.ctx.db.transaction(
            store.list_users, search, page if paged else None, size if paged else None)
        items = [user_view(user, relations) for user, relations in result["users"]]
        if not paged:
            return items
        return {"items": items, "total": result["total"], "page": page, "page_size": size}

    @app.route("/<int:item_id>", methods=["PUT"])
    @json_route
    async def update(self, request: Any, item_id: int) -> dict[str, Any]:
        admin = await self.ctx.sessions.admin(request)
        changes = user_changes(Body(read_object(request)))
        result = await catalog_tx.run(self.ctx, store.update_user, admin["id"], item_id,
                                      changes, self.ctx.now())
        await self.ctx.invalidation.announce(USERS, str(item_id).encode())
        return user_view(result["user"], result["relations"])

    @app.route("/<int:item_id>", methods=["DELETE"])
    @json_route
    async def delete(self, request: Any, item_id: int) -> dict[str, Any]:
        admin = await self.ctx.sessions.admin(request)
        await catalog_tx.run(self.ctx, store.delete_user, admin["id"], item_id)
        await self.ctx.invalidation.announce(USERS, str(item_id).encode())
        return {"message": "User deleted"}
