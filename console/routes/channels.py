"""``/api/channels`` (admin): upstream channels, their group multipliers and model configs.

Console contract §5.7/§5.8 with our fixes: whitelisted fields only (weakness 6), explicit
``false``/``0`` honoured (22), the upstream ``api_key`` is write-only (lists show
``has_api_key`` and ``api_key_masked``; a blank or absent key on PUT keeps the stored one),
``base_url`` must pass ``gateway.net_policy`` (400 ``Unsafe or invalid base URL``), the
``api_key`` must be header-safe (printable ASCII: it is sent as a header value), ``type`` is
normalised to its canonical spelling, price sync is off by default (19), multipliers refuse
unknown groups and negatives (17), delete cascades (14).  Health fields are read-only.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import orjson

from console.context import ConsoleContext
from console.http import bad_request, json_route, make_app, not_found, read_json, read_object
from console.services.catalog import channel_test
from console.services.catalog import tx as catalog_tx
from console.services.catalog.inputs import (
    config_values,
    model_reference,
    multiplier_items,
)
from console.services.catalog.views import channel_view, config_view, multiplier_view
from console.validation import MISSING, Body
from gateway.billing.money import to_nanos
from gateway.channels.channel_types import PLUGIN_PREFIX, normalise_channel_type
from gateway.channels.net_policy import UnsafeUrl, UrlPolicy, check_url, header_safe
from gateway.invalidation import CATALOG
from gateway.jobs.cron import CronError, check_cron
from gateway.store import channel_models as config_store
from gateway.store import channels as store
from gateway.store.channel_upkeep import record_test

PLUGIN_CONFIG_MAX = 65536
NO_MODELS = "Channel has no models to test"


def channel_values(body: Body, policy: UrlPolicy, *, creating: bool) -> dict[str, Any]:
    values: dict[str, Any] = {}
    for field, label, limit in (("name", "Channel name", 100), ("type", "Channel type", 64),
                                ("base_url", "Base URL", 2048)):
        value = body.string(field, max_length=limit)
        if (creating and not value) or value == "":
            raise bad_request(f"{label} is required", field=field)
        if value is not MISSING:
            values[field] = value
    if "type" in values:
        values["type"] = normalise_channel_type(values["type"])
        if values["type"].startswith(PLUGIN_PREFIX):
            raise bad_request("plugin upstream channel type is unavailable", field="type")
    if "base_url" in values:
        try:
            values["base_url"] = check_url(values["base_url"], policy)
        except UnsafeUrl as exc:
            raise bad_request(f"Unsafe or invalid base URL: {exc}", field="base_url") from None
    api_key = body.string("api_key", max_length=4096)
    if api_key:
        if not header_safe(api_key):
            raise bad_request("api_key must be printable ASCII: it is sent in an HTTP header",
                              field="api_key")
        values["api_key"] = api_key
    if body.has("user_channel_id"):
        uc_id = body.data["user_channel_id"]
        values["user_channel_id"] = None if uc_id in (None, 0) else body.integer(
            "user_channel_id", minimum=1)
    plugin_config = body.data.get("plugin_config", MISSING)
    if isinstance(plugin_config, dict):
        values["plugin_config"] = _dump_plugin_config(plugin_config)
    elif plugin_config is not MISSING:
        values["plugin_config"] = body.string("plugin_config", max_length=PLUGIN_CONFIG_MAX) or ""
    multiplier = body.decimal("multiplier")
    if multiplier is not MISSING:
        values["multiplier_nanos"] = to_nanos(multiplier if multiplier != 0 else Decimal(1))
    priority = body.integer("priority", minimum=-1_000_000_000, maximum=1_000_000_000)
    if priority is not MISSING:
        values["priority"] = priority
    weight = body.integer("weight", minimum=0, maximum=1_000_000)
    if weight is not MISSING:
        values["weight"] = weight
    for flag in ("enabled", "price_sync_enabled"):
        value = body.boolean(flag)
        if value is not MISSING:
            values[flag] = value
    cron = body.string("price_sync_cron", max_length=100)
    if cron is not MISSING:
        try:
            values["price_sync_cron"] = check_cron(cron) if cron else ""
        except CronError as exc:
            raise bad_request(f"invalid price sync cron: {exc}", field="price_sync_cron") from None
    return values


def _dump_plugin_config(value: dict[str, Any]) -> str:
    text = orjson.dumps(value).decode()
    if len(text) > PLUGIN_CONFIG_MAX:
        raise bad_request("plugin_config is too large", field="plugin_config")
    return text


class ChannelRoutes:
    app = make_app()

    def __init__(self, ctx: ConsoleContext) -> None:
        self.ctx = ctx

    def _policy(self) -> UrlPolicy:
        return UrlPolicy.from_settings(self.ctx.settings)

    async def _view(self, channel_id: int) -> dict[str, Any]:
        cat = await catalog_tx.catalog(self.ctx)
        for channel in cat["channels"]:
            if channel["id"] == channel_id:
                return channel_view(channel, cat)
        raise not_found(store.NOT_FOUND)

    @app.route("/", methods=["GET"])
    @json_route
    async def index(self, request: Any) -> list[dict[str, Any]]:
        await self.ctx.sessions.admin(request)
        cat = await catalog_tx.catalog(self.ctx)
        return [channel_view(channel, cat) for channel in cat["channels"]]

    @app.route("/", methods=["POST"])
    @json_route
    async def create(self, request: Any) -> dict[str, Any]:
        await self.ctx.sessions.admin(request)
        values = channel_values(Body(read_object(request)), self._policy(), creating=True)
        channel_id = await catalog_tx.write(self.ctx, store.create_channel, values,
                                            self.ctx.now())
        return await self._view(channel_id)

    @app.route("/<int:item_id>", methods=["GET"])
    @json_route
    async def show(self, request: Any, item_id: int) -> dict[str, Any]:
        await self.ctx.sessions.admin(request)
        return await self._view(item_id)

    @app.route("/<int:item_id>", methods=["PUT"])
    @json_route
    async def update(self, request: Any, item_id: int) -> dict[str, Any]:
        await self.ctx.sessions.admin(request)
        values = channel_values(Body(read_object(request)), self._policy(), creating=False)
        await catalog_tx.write(self.ctx, store.update_channel, item_id, values, self.ctx.now())
        return await self._view(item_id)

    @app.route("/<int:item_id>", methods=["DELETE"])
    @json_route
    async def delete(self, request: Any, item_id: int) -> dict[str, Any]:
        await self.ctx.sessions.admin(request)
        await catalog_tx.write(self.ctx, store.delete_channel, item_id)
        return {"message": "Channel deleted"}

    @app.route("/<int:item_id>/group-multipliers", methods=["PUT"])
    @json_route
    async def group_multipliers(self, request: Any, item_id: int) -> list[dict[str, Any]]:
        await self.ctx.sessions.admin(request)
        items = multiplier_items(read_json(request))
        await catalog_tx.write(self.ctx, store.replace_multipliers, "channel", item_id, items,
                               self.ctx.now())
        cat = await catalog_tx.catalog(self.ctx)
        return [multiplier_view(row, cat["groups"], "channel_id")
                for row in cat["channel_multipliers"] if row["channel_id"] == item_id]

    @app.route("/<int:item_id>/models", methods=["GET"])
    @json_route
    async def models(self, request: Any, item_id: int) -> list[dict[str, Any]]:
        await self.ctx.sessions.admin(request)
        view = await self._view(item_id)
        return view["models"]

    @app.route("/<int:item_id>/models", methods=["POST"])
    @json_route
    async def add_model(self, request: Any, item_id: int) -> dict[str, Any]:
        await self.ctx.sessions.admin(request)
        body = Body(read_object(request))
        model_id, model_name = model_reference(body)
        new_model = {
            "provider": body.string("provider", max_length=100) or None,
            "provider_icon_url": body.string("provider_icon_url", max_length=2048) or None,
        }
        values = config_values(body)
        config_id = await catalog_tx.write(self.ctx, config_store.create_config, item_id,
                                           model_id, model_name, new_model, values,
                                           self.ctx.now())
        cat = await catalog_tx.catalog(self.ctx)
        config = next(c for c in cat["configs"] if c["id"] == config_id)
        return config_view(config, cat)

    @app.route("/<int:item_id>/test", methods=["POST"])
    @json_route
    async def test(self, request: Any, item_id: int) -> dict[str, Any]:
        """Web contract §6: one minimal upstream call; health recorded, nothing billed."""
        await self.ctx.sessions.admin(request)
        body = Body(read_object(request, optional=True))
        model = body.string("model", max_length=100)
        cat = await catalog_tx.catalog(self.ctx)
        channel = next((c for c in cat["channels"] if c["id"] == item_id), None)
        if channel is None:
            raise not_found(store.NOT_FOUND)
        config = channel_test.pick_config(item_id, cat, model if model else None)
        if config is None:
            raise bad_request(NO_MODELS, field="model" if model else None)
        call = channel_test.test_call(channel["type"], channel_test.upstream_model_name(
            config, cat))
        settings = self.ctx.settings
        timeout = max(1, settings.integer("reliability_auto_detect_timeout_seconds", 10))
        outcome = await channel_test.run_test(self.ctx.reactor, self.ctx.clock, channel, call,
                                              self._policy(), timeout)
        await self.ctx.db.transaction(record_test, item_id, outcome.success,
                                      self.ctx.now())
        await self.ctx.invalidation.announce(CATALOG)
        return outcome.view()
