"""``GET /api/user/catalog``: what the signed-in user can call and what they pay (D2, §4.2).

Read from the in-memory catalog snapshot (the same one the gateway routes with), so a price an
admin just changed shows here at once.  ``prices[m]`` is, per dimension, the lowest effective
price (config-adjusted base x the user's group multiplier x user-channel multiplier) over the
visible user channels offering ``m`` -- computed by ``gateway.billing.pricing``, as billing is.
Enabled meta models are listed with their own prices (``null`` ones in ``actual`` billing mode)
and hide the models they are told to (contract §0).
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from console.context import ConsoleContext
from console.http import json_route, make_app
from gateway.billing.pricing import (
    OVERRIDABLE,
    QUOTA_TOKENS,
    QUOTA_VIDEO,
    active_group_ids,
    one_if_zero,
)
from gateway.catalog import wire
from gateway.catalog.meta_listing import listed_meta_models, meta_price_strings
from gateway.catalog.offers import lowest, offers
from gateway.catalog.snapshot import CatalogSnapshot, UserChannel


def _channel_item(uc: UserChannel, models: list[Any]) -> dict[str, Any]:
    multiplier = one_if_zero(uc.multiplier)
    return {
        "id": uc.id,
        "name": uc.name,
        "description": uc.description,
        "multiplier": wire.money(uc.multiplier),
        "enabled": uc.enabled,
        "models": [m.model_name for m in models],
        "model_icons": {m.model_name: m.provider_icon_url for m in models
                        if m.provider_icon_url},
        "video_billing_configs": {
            m.model_name: wire.video_config(m.video_billing_config, multiplier)
            for m in models if m.quota_type == QUOTA_VIDEO},
    }


def user_catalog(snapshot: CatalogSnapshot, user_id: int, group_ids: list[int],
                 mode: str) -> dict[str, Any]:
    visible = snapshot.visible_user_channels(user_id, group_ids)
    by_model = offers(snapshot, [uc.id for uc in visible])
    rates = snapshot.group_rates(group_ids)
    per_channel: dict[int, list[Any]] = {uc.id: [] for uc in visible}
    prices: dict[str, Any] = {}
    quota_type: dict[str, int] = {}
    video: dict[str, Any] = {}
    for name in snapshot.hidden_models & by_model.keys():
        del by_model[name]  # a meta model hides it (contract §0); still callable
    for name, offer_list in by_model.items():
        model = offer_list[0].model
        effective = [c.prices_for(rates, mode) for o in offer_list for c in o.candidates]
        prices[name] = wire.prices(lowest(e.prices for e in effective), OVERRIDABLE)
        quota_type[name] = model.quota_type
        if model.quota_type == QUOTA_VIDEO:
            multiplier: Decimal = min(e.multiplier for e in effective)
            video[name] = wire.video_config(model.video_billing_config, multiplier)
        for offer in offer_list:
            per_channel[offer.user_channel.id].append(model)
    metas = listed_meta_models(snapshot)
    for meta in metas:
        prices[meta.model_name] = meta_price_strings(meta, OVERRIDABLE)
        quota_type[meta.model_name] = QUOTA_TOKENS
    return {
        "channels": [_channel_item(uc, per_channel[uc.id]) for uc in visible],
        "models": sorted([*by_model, *(meta.model_name for meta in metas)]),
        "prices": prices,
        "quota_type": quota_type,
        "video_billing_configs": video,
    }


class CatalogRoutes:
    """Mounted at ``/api/user/catalog``."""

    app = make_app()

    def __init__(self, ctx: ConsoleContext) -> None:
        self.ctx = ctx

    @app.route("/", methods=["GET"])
    @json_route
    async def catalog(self, request: Any) -> dict[str, Any]:
        user, relations = await self.ctx.sessions.user_with_relations(request)
        group_ids = active_group_ids(
            [(m["group_id"], m["expires_at"]) for m in relations["memberships"]],
            user["group_id"], self.ctx.now())
        return user_catalog(self.ctx.catalog.snapshot, user["id"], group_ids,
                            self.ctx.settings.text("group_multiplier_mode"))
