"""``/api/groups`` (admin): user groups and their price multipliers (console contract §5.11).

Multipliers are decimals >= 0; 0 on input means 1 (the origin's rule).  ``is_default`` is
computed; ``is_default: true`` on a write makes that group the registration default (stored in
the ``default_group_id`` setting), ``false`` on the current default is refused (pick another
group instead).  Deleting the default group or a group still referenced is refused (400).
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from console.context import ConsoleContext
from console.http import ApiError, json_route, make_app, read_object
from console.services.catalog import tx as catalog_tx
from console.services.catalog.views import group_view
from console.validation import MISSING, Body
from gateway.billing.money import to_nanos
from gateway.store import groups as store

NAME_MAX = 50


def group_values(body: Body, *, creating: bool) -> dict[str, Any]:
    values: dict[str, Any] = {}
    name = body.string("name", max_length=NAME_MAX)
    if creating and not name:
        raise ApiError(400, "Group name is required", field="name")
    if name is not MISSING:
        if not name:
            raise ApiError(400, "Group name is required", field="name")
        values["name"] = name
    multiplier = body.decimal("multiplier")
    if multiplier is not MISSING:
        values["multiplier_nanos"] = to_nanos(multiplier if multiplier != 0 else Decimal(1))
    elif creating:
        values["multiplier_nanos"] = to_nanos(Decimal(1))
    return values


class GroupRoutes:
    app = make_app()

    def __init__(self, ctx: ConsoleContext) -> None:
        self.ctx = ctx

    def _view(self, result: dict[str, Any]) -> dict[str, Any]:
        return group_view(result["group"], result["default_id"])

    async def _after_write(self, body: Body) -> None:
        if body.has("is_default"):
            await self.ctx.live_settings.announce()

    @app.route("/", methods=["GET"])
    @json_route
    async def index(self, request: Any) -> list[dict[str, Any]]:
        await self.ctx.sessions.admin(request)
        result = await self.ctx.db.transaction(store.list_groups)
        return [group_view(g, result["default_id"]) for g in result["groups"]]

    @app.route("/", methods=["POST"])
    @json_route
    async def create(self, request: Any) -> dict[str, Any]:
        await self.ctx.sessions.admin(request)
        body = Body(read_object(request))
        values = group_values(body, creating=True)
        make_default = body.boolean("is_default")
        result = await catalog_tx.write(self.ctx, store.create_group, values,
                                        make_default is True, self.ctx.now())
        await self._after_write(body)
        return self._view(result)

    @app.route("/<int:item_id>", methods=["GET"])
    @json_route
    async def show(self, request: Any, item_id: int) -> dict[str, Any]:
        await self.ctx.sessions.admin(request)
        return self._view(await catalog_tx.run(self.ctx, store.get_group, item_id))

    @app.route("/<int:item_id>", methods=["PUT"])
    @json_route
    async def update(self, request: Any, item_id: int) -> dict[str, Any]:
        await self.ctx.sessions.admin(request)
        body = Body(read_object(request))
        values = group_values(body, creating=False)
        make_default = body.boolean("is_default")
        result = await catalog_tx.write(
            self.ctx, store.update_group, item_id, values,
            None if make_default is MISSING else make_default, self.ctx.now())
        await self._after_write(body)
        return self._view(result)

    @app.route("/<int:item_id>", methods=["DELETE"])
    @json_route
    async def delete(self, request: Any, item_id: int) -> dict[str, Any]:
        await self.ctx.sessions.admin(request)
        await catalog_tx.write(self.ctx, store.delete_group, item_id)
        return {"message": "Group deleted"}
