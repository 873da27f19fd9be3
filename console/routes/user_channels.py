"""``/api/user-channels`` (admin): user channels, their settings and access grants (§5.6).

Only whitelisted fields are read (weakness 6: no nested channels in a user-channel body);
explicit ``false``/``0`` are stored as given (weakness 22); PUT merges onto the stored record.
``routing_algorithm`` is normalised (aliases ``rr``, ``wrr``, ...; unknown -> ``priority``); a
multiplier of 0 means 1.  ``PUT /:id/allowed-groups`` and ``/allowed-users`` replace the grant
sets (no grants = open to everyone).  DELETE detaches the user channel's upstream channels
rather than deleting them (see ``gateway.store.user_channels``).
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from console.context import ConsoleContext
from console.http import bad_request, json_route, make_app, not_found, read_object
from console.services.catalog import tx as catalog_tx
from console.services.catalog.views import user_channel_view
from console.validation import MISSING, Body
from gateway.billing.money import to_nanos
from gateway.channels.channel_types import normalise_routing_algorithm
from gateway.store import user_channels as store


def user_channel_values(body: Body, *, creating: bool) -> dict[str, Any]:
    values: dict[str, Any] = {}
    name = body.string("name", max_length=100)
    if (creating and not name) or name == "":
        raise bad_request("User channel name is required", field="name")
    if name is not MISSING:
        values["name"] = name
    description = body.string("description", max_length=2000)
    if description is not MISSING:
        values["description"] = description
    multiplier = body.decimal("multiplier")
    if multiplier is not MISSING:
        values["multiplier_nanos"] = to_nanos(multiplier if multiplier != 0 else Decimal(1))
    algorithm = body.string("routing_algorithm", max_length=64)
    if algorithm is not MISSING:
        values["routing_algorithm"] = normalise_routing_algorithm(algorithm)
    for flag in ("enabled", "rate_limit_enabled"):
        value = body.boolean(flag)
        if value is not MISSING:
            values[flag] = value
    for number in ("rate_limit_requests_per_minute", "rate_limit_burst"):
        value = body.integer(number)
        if value is not MISSING:
            values[number] = value
    return values


class UserChannelRoutes:
    app = make_app()

    def __init__(self, ctx: ConsoleContext) -> None:
        self.ctx = ctx

    async def _view(self, uc_id: int) -> dict[str, Any]:
        cat = await catalog_tx.catalog(self.ctx)
        for uc in cat["user_channels"]:
            if uc["id"] == uc_id:
                return user_channel_view(uc, cat)
        raise not_found(store.NOT_FOUND)

    @app.route("/", methods=["GET"])
    @json_route
    async def index(self, request: Any) -> list[dict[str, Any]]:
        await self.ctx.sessions.admin(request)
        cat = await catalog_tx.catalog(self.ctx)
        return [user_channel_view(uc, cat) for uc in cat["user_channels"]]

    @app.route("/", methods=["POST"])
    @json_route
    async def create(self, request: Any) -> dict[str, Any]:
        await self.ctx.sessions.admin(request)
        values = user_channel_values(Body(read_object(request)), creating=True)
        uc_id = await catalog_tx.write(self.ctx, store.create_user_channel, values,
                                       self.ctx.now())
        return await self._view(uc_id)

    @app.route("/<int:item_id>", methods=["GET"])
    @json_route
    async def show(self, request: Any, item_id: int) -> dict[str, Any]:
        await self.ctx.sessions.admin(request)
        return await self._view(item_id)

    @app.route("/<int:item_id>", methods=["PUT"])
    @json_route
    async def update(self, request: Any, item_id: int) -> dict[str, Any]:
        await self.ctx.sessions.admin(request)
        values = user_channel_values(Body(read_object(request)), creating=False)
        await catalog_tx.write(self.ctx, store.update_user_channel, item_id, values,
                               self.ctx.now())
        return await self._view(item_id)

    @app.route("/<int:item_id>", methods=["DELETE"])
    @json_route
    async def delete(self, request: Any, item_id: int) -> dict[str, Any]:
        await self.ctx.sessions.admin(request)
        await catalog_tx.write(self.ctx, store.delete_user_channel, item_id)
        return {"message": "User channel deleted"}

    @app.route("/<int:item_id>/allowed-groups", methods=["PUT"])
    @json_route
    async def allowed_groups(self, request: Any, item_id: int) -> list[dict[str, Any]]:
        await self.ctx.sessions.admin(request)
        ids = Body(read_object(request)).int_list("group_ids", required=True, max_items=1000)
        await catalog_tx.write(self.ctx, store.replace_access, item_id, "group_id", ids,
                               self.ctx.now())
        return (await self._view(item_id))["allowed_groups"]

    @app.route("/<int:item_id>/allowed-users", methods=["PUT"])
    @json_route
    async def allowed_users(self, request: Any, item_id: int) -> list[dict[str, Any]]:
        await self.ctx.sessions.admin(request)
        ids = Body(read_object(request)).int_list("user_ids", required=True, max_items=10000)
        await catalog_tx.write(self.ctx, store.replace_access, item_id, "user_id", ids,
                               self.ctx.now())
        return (await self._view(item_id))["allowed_users"]
