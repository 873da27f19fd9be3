"""``GET /api/public/models``: the public model catalog with prices (console contract §3.2).

One item per global model reachable through an enabled config on an enabled upstream channel of
an enabled user channel, sorted by name; each lists the user channels offering it with their
base and effective (x user-channel multiplier, no group multiplier) prices.  Enabled meta models
are listed among them (``gateway.catalog.meta_listing``).
"""

from __future__ import annotations

from typing import Any

from console.context import ConsoleContext
from console.http import json_route, make_app
from gateway.billing.pricing import PRICE_NAMES, QUOTA_TOKENS
from gateway.catalog import wire
from gateway.catalog.meta_listing import listed_meta_models, meta_price_strings
from gateway.catalog.offers import Offer, model_tiers, offers
from gateway.catalog.snapshot import CatalogSnapshot, Model
from gateway.metamodels.compiled import MetaModel


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


def _meta_item(meta: MetaModel) -> dict[str, Any]:
    """A meta model listed like a model (contract §0): its own prices in ``meta`` billing
    mode, ``null`` ones in ``actual`` mode; no user channels of its own."""
    item: dict[str, Any] = {
        "model_name": meta.model_name,
        "display_name": meta.name,
        "description": meta.description,
        "provider": meta.provider,
        "provider_name": meta.provider_name,
        "provider_icon_url": meta.provider_icon_url,
        "is_meta_model": True,
        "billing_mode": meta.billing_mode,
        "quota_type": QUOTA_TOKENS,
        "context": None,
    }
    item.update(meta_price_strings(meta, PRICE_NAMES))
    item.update({f"{n}_tiers": [] for n in PRICE_NAMES})
    item["video_billing_config"] = wire.video_config(None)
    item["user_channels"] = []
    return item


def public_models(snapshot: CatalogSnapshot) -> list[dict[str, Any]]:
    items = [_model_item(offer_list[0].model, offer_list)
             for name, offer_list in offers(snapshot).items()
             if name not in snapshot.hidden_models]
    items += [_meta_item(meta) for meta in listed_meta_models(snapshot)]
    return sorted(items, key=lambda item: str(item["model_name"]))


class PublicModelsRoutes:
    """Mounted at ``/api/public/models`` (no auth)."""

    app = make_app()

    def __init__(self, ctx: ConsoleContext) -> None:
        self.ctx = ctx

    @app.route("/", methods=["GET"])
    @json_route
    async def models(self, request: Any) -> list[dict[str, Any]]:
        return public_models(self.ctx.catalog.snapshot)
