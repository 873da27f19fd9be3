"""``/api/channel-models/:id`` (admin): update or delete one channel-model config and replace
its group multipliers (console contract §5.8; created via ``POST /api/channels/:id/models``).

PUT may point the config at another existing model (``model_id`` or ``model_name``; never
creates or changes a global model), replaces ``upstream_model_name`` (absent -> the model
name, as the origin does), changes only the price overrides present in the body (null clears
an override) and ``enabled`` only when given.
"""

from __future__ import annotations

from typing import Any

from console.context import ConsoleContext
from console.http import json_route, make_app, not_found, read_json, read_object
from console.services.catalog import tx as catalog_tx
from console.services.catalog.inputs import config_values, model_reference, multiplier_items
from console.services.catalog.views import config_view, multiplier_view
from console.validation import Body
from gateway.store import channel_models as store
from gateway.store.channels import replace_multipliers


class ChannelModelRoutes:
    app = make_app()

    def __init__(self, ctx: ConsoleContext) -> None:
        self.ctx = ctx

    async def _view(self, config_id: int) -> dict[str, Any]:
        cat = await catalog_tx.catalog(self.ctx)
        for config in cat["configs"]:
            if config["id"] == config_id:
                return config_view(config, cat)
        raise not_found(store.NOT_FOUND)

    @app.route("/<int:item_id>", methods=["GET"])
    @json_route
    async def show(self, request: Any, item_id: int) -> dict[str, Any]:
        await self.ctx.sessions.admin(request)
        return await self._view(item_id)

    @app.route("/<int:item_id>", methods=["PUT"])
    @json_route
    async def update(self, request: Any, item_id: int) -> dict[str, Any]:
        await self.ctx.sessions.admin(request)
        body = Body(read_object(request))
        model_id, model_name = model_reference(body)
        values = config_values(body)
        await catalog_tx.write(self.ctx, store.update_config, item_id, model_id, model_name,
                               values, self.ctx.now())
        return await self._view(item_id)

    @app.route("/<int:item_id>", methods=["DELETE"])
    @json_route
    async def delete(self, request: Any, item_id: int) -> dict[str, Any]:
        await self.ctx.sessions.admin(request)
        await catalog_tx.write(self.ctx, store.delete_config, item_id)
        return {"message": "Model config deleted"}

    @app.route("/<int:item_id>/group-multipliers", methods=["PUT"])
    @json_route
    async def group_multipliers(self, request: Any, item_id: int) -> list[dict[str, Any]]:
        await self.ctx.sessions.admin(request)
        items = multiplier_items(read_json(request))
        await catalog_tx.write(self.ctx, replace_multipliers, "config", item_id, items,
                               self.ctx.now())
        cat = await catalog_tx.catalog(self.ctx)
        return [multiplier_view(row, cat["groups"], "channel_model_id")
                for row in cat["config_multipliers"] if row["channel_model_id"] == item_id]
