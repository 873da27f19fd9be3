"""``/api/models`` and ``/api/models/:id`` (admin): global models (console contract §5.9).

POST creates (``model_name`` required, ``enabled`` defaults true, a duplicate name is 409).
PUT keeps the origin's full-replace rule for the price form -- ``quota_type``, the nine prices,
the nine tier lists and ``video_billing_config`` are set from the body, absent meaning 0/empty,
because front ends send the whole form -- while name, display name, provider, icon and
``enabled`` change only when given.  ``quota_type`` must be 0, 1 or 100 (400 otherwise, rather
than silently normalising).  Tiers go through ``gateway.billing.tiers`` and the video config
through ``gateway.billing.video_config``.  DELETE cascades to the model's configs.

The sync routes (``/sync*``, ``/prices/sync*``, contract §5.10) only read the body and delegate
to ``console.services.model_sync`` / ``price_sync``.
"""

from __future__ import annotations

from typing import Any

from console.context import ConsoleContext
from console.http import bad_request, json_route, make_app, not_found, read_object
from console.services.catalog import model_sync, price_sync
from console.services.catalog import tx as catalog_tx
from console.services.catalog.views import model_view
from console.validation import MISSING, Body
from gateway.billing.money import to_nanos
from gateway.billing.tiers import TierError, normalise_tiers
from gateway.billing.video_config import (
    VideoConfigError,
    normalise_video_config,
    validate_for_quota_type,
)
from gateway.store import models as store
from gateway.store.schema import PRICE_NAMES

QUOTA_TYPES = (0, 1, 100)


def price_form(body: Body) -> dict[str, Any]:
    """The fully replaced part: quota type, prices, tiers, video config."""
    values: dict[str, Any] = {}
    quota_type = body.integer("quota_type")
    quota_type = 0 if quota_type is MISSING else quota_type
    if quota_type not in QUOTA_TYPES:
        raise bad_request("quota_type must be 0, 1 or 100", field="quota_type")
    values["quota_type"] = quota_type
    for name in PRICE_NAMES:
        price = body.decimal(name)
        values[f"{name}_nanos"] = 0 if price is MISSING else to_nanos(price)
    for name in PRICE_NAMES:
        field = f"{name}_tiers"
        try:
            values[field] = normalise_tiers(body.data.get(field))
        except TierError as exc:
            raise bad_request(f"{field}: {exc}", field=field) from None
    try:
        config = normalise_video_config(body.data.get("video_billing_config"))
        validate_for_quota_type(config, quota_type)
    except VideoConfigError as exc:
        raise bad_request(str(exc), field="video_billing_config") from None
    values["video_billing_config"] = config
    return values


def model_values(body: Body, *, creating: bool) -> dict[str, Any]:
    values: dict[str, Any] = {}
    name = body.string("model_name", max_length=100)
    if (creating and not name) or name == "":
        raise bad_request("Model is required", field="model_name")
    if name is not MISSING:
        values["model_name"] = name
    display = body.string("display_name", max_length=200)
    if display is not MISSING:
        values["display_name"] = display
    provider = body.string("provider", max_length=100)
    icon = body.string("provider_icon_url", max_length=2048)
    if provider is not MISSING:
        values["provider"] = provider.lower() or "custom"
        values["provider_icon_url"] = "" if icon is MISSING else icon
    elif icon is not MISSING:
        values["provider_icon_url"] = icon
    enabled = body.boolean("enabled")
    if enabled is not MISSING:
        values["enabled"] = enabled
    elif creating:
        values["enabled"] = True
    values.update(price_form(body))
    return values


class ModelRoutes:
    app = make_app()

    def __init__(self, ctx: ConsoleContext) -> None:
        self.ctx = ctx

    async def _view(self, model_id: int) -> dict[str, Any]:
        cat = await catalog_tx.catalog(self.ctx)
        model = cat["models"].get(model_id)
        if model is None:
            raise not_found(store.NOT_FOUND)
        return model_view(model)

    @app.route("/", methods=["GET"])
    @json_route
    async def index(self, request: Any) -> list[dict[str, Any]]:
        await self.ctx.sessions.admin(request)
        cat = await catalog_tx.catalog(self.ctx)
        return [model_view(model) for model in cat["models"].values()]

    @app.route("/", methods=["POST"])
    @json_route
    async def create(self, request: Any) -> dict[str, Any]:
        await self.ctx.sessions.admin(request)
        values = model_values(Body(read_object(request)), creating=True)
        model_id = await catalog_tx.write(self.ctx, store.create_model, values, self.ctx.now())
        return await self._view(model_id)

    @app.route("/<int:item_id>", methods=["GET"])
    @json_route
    async def show(self, request: Any, item_id: int) -> dict[str, Any]:
        await self.ctx.sessions.admin(request)
        return await self._view(item_id)

    @app.route("/<int:item_id>", methods=["PUT"])
    @json_route
    async def update(self, request: Any, item_id: int) -> dict[str, Any]:
        await self.ctx.sessions.admin(request)
        values = model_values(Body(read_object(request)), creating=False)
        await catalog_tx.write(self.ctx, store.update_model, item_id, values, self.ctx.now())
        return await self._view(item_id)

    @app.route("/<int:item_id>", methods=["DELETE"])
    @json_route
    async def delete(self, request: Any, item_id: int) -> dict[str, Any]:
        await self.ctx.sessions.admin(request)
        await catalog_tx.write(self.ctx, store.delete_model, item_id)
        return {"message": "Model deleted"}

    # --- model and price sync (contract §5.10) ------------------------------------------------

    @app.route("/sync", methods=["POST"])
    @json_route
    async def sync(self, request: Any) -> dict[str, Any]:
        await self.ctx.sessions.admin(request)
        body = Body(read_object(request, optional=True))
        ids = body.int_list("channel_ids")
        return await model_sync.sync(self.ctx, [] if ids is MISSING or ids is None else ids)

    @app.route("/sync/preview", methods=["POST"])
    @json_route
    async def sync_preview(self, request: Any) -> dict[str, Any]:
        await self.ctx.sessions.admin(request)
        body = Body(read_object(request))
        return await model_sync.preview(self.ctx, body.data.get("channel_id"),
                                        _text(body, "format"), _text(body, "path"))

    @app.route("/sync/preview/browser", methods=["POST"])
    @json_route
    async def sync_preview_browser(self, request: Any) -> dict[str, Any]:
        await self.ctx.sessions.admin(request)
        body = Body(read_object(request, limit=SYNC_BODY_LIMIT))
        return await model_sync.preview_browser(self.ctx, body.data.get("channel_id"),
                                                _text(body, "source") or "browser",
                                                _payload(body))

    @app.route("/sync/apply", methods=["POST"])
    @json_route
    async def sync_apply(self, request: Any) -> dict[str, Any]:
        await self.ctx.sessions.admin(request)
        body = Body(read_object(request, limit=SYNC_BODY_LIMIT))
        return await model_sync.apply(self.ctx, body.data.get("channel_id"), _items(body))

    @app.route("/prices/sync/preview", methods=["POST"])
    @json_route
    async def price_preview(self, request: Any) -> dict[str, Any]:
        await self.ctx.sessions.admin(request)
        body = Body(read_object(request))
        return await price_sync.preview(self.ctx, body.data.get("channel_id"),
                                        _text(body, "format"), _text(body, "path"))

    @app.route("/prices/sync/preview/browser", methods=["POST"])
    @json_route
    async def price_preview_browser(self, request: Any) -> dict[str, Any]:
        await self.ctx.sessions.admin(request)
        body = Body(read_object(request, limit=SYNC_BODY_LIMIT))
        return await price_sync.preview_browser(self.ctx, body.data.get("channel_id"),
                                                _text(body, "source") or "browser",
                                                _payload(body))

    @app.route("/prices/sync/apply", methods=["POST"])
    @json_route
    async def price_apply(self, request: Any) -> dict[str, Any]:
        await self.ctx.sessions.admin(request)
        body = Body(read_object(request, limit=SYNC_BODY_LIMIT))
        return await price_sync.apply(self.ctx, body.data.get("channel_id"), _items(body))


#: pasted upstream answers and apply lists can be large
SYNC_BODY_LIMIT = 16 << 20


def _text(body: Body, name: str) -> str | None:
    value = body.string(name, max_length=2048)
    return None if value is MISSING else value


def _payload(body: Body) -> Any:
    """The pasted upstream answer: ``payload``, or the contract alias ``body`` (D15)."""
    payload = body.data.get("payload")
    return body.data.get("body") if payload is None else payload


def _items(body: Body) -> Any:
    """Apply items: ``models``, or the contract alias ``items``."""
    items = body.data.get("models")
    return body.data.get("items") if items is None else items
