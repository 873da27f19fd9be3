"""``GET /api/public/models``: the public model catalog with prices (console contract §3.2).

One item per global model reachable through an enabled config on an enabled upstream channel of
an enabled user channel, sorted by name; each lists the user channels offering it with their
base and effective (x user-channel multiplier, no group multiplier) prices.  Meta models are not
listed yet.
"""

from __future__ import annotations

from typing import Any

from console.context import ConsoleContext
from console.http import json_route, make_app
from gateway.billing.pricing import PRICE_NAMES
from gateway.catalog import wire
from gateway.catalog.offers import Offer, model_tiers, offers
from gateway.catalog.snapshot import CatalogSnapshot, Model


def _channel_item(offer: Offer) -> dict[str, Any]:
    uc, model, multiplier = offer.user_channel, offer.model, offer.multiplier
    item: dict[str, Any] = {
        "id": uc.id,
        "name": uc.name,
        "description": uc.description,
        "multiplier": wire.money(uc.multiplier),
        "quota_type": model.quota_type,
    }
    item.update(wire.prices(offer.base, PRICE_NAMES))
    item.update({f"{n}_tiers": wire.tiers(model_tiers(model, n)) for n in PRICE_NAMES})
    item.update(wire.prices(offer.effective, PRICE_NAMES, prefix="effective_"))
    item.update({f"effective_{n}_tiers": wire.tiers(model_tiers(model, n), multiplier)
                 for n in PRICE_NAMES})
    item["video_billing_config"] = wire.video_config(model.video_billing_config)
    item["effective_video_billing_config"] = wire.video_config(model.video_billing_config,
                                                               multiplier)
    return item


def _model_item(model: Model, offer_list: list[Offer]) -> dict[str, Any]:
    item: dict[str, Any] = {
        "model_name": model.model_name,
        "display_name": model.display_name,
        "provider": model.provider,
        "provider_name": wire.provider_name(model.provider),
        "provider_icon_url": model.provider_icon_url,
        "is_meta_model": False,
        "quota_type": model.quota_type,
        "context": None,
    }
    item.update(wire.prices(model.prices, PRICE_NAMES))
    item.update({f"{n}_tiers": wire.tiers(model_tiers(model, n)) for n in PRICE_NAMES})
    item["video_billing_config"] = wire.video_config(model.video_billing_config)
    item["user_channels"] = [_channel_item(offer) for offer in offer_list]
    return item


def public_models(snapshot: CatalogSnapshot) -> list[dict[str, Any]]:
    return [_model_item(offer_list[0].model, offer_list)
            for offer_list in offers(snapshot).values()]


class PublicModelsRoutes:
    """Mounted at ``/api/public/models`` (no auth)."""

    app = make_app()

    def __init__(self, ctx: ConsoleContext) -> None:
        self.ctx = ctx

    @app.route("/", methods=["GET"])
    @json_route
    async def models(self, request: Any) -> list[dict[str, Any]]:
        return public_models(self.ctx.catalog.snapshot)
