"""``GET /api/pricing``: model, base and per-user-channel prices (console contract §3.5).

Off unless ``pricing_endpoint_enabled`` (404 ``Not found``, like an unknown path).  Maps are
keyed by model name; unprefixed families are effective prices (x user-channel multiplier, the
lowest across user channels, tiers following the winning channel), ``base_*`` the global model
prices.  Exposure convention: token-priced models (quota type 0) show every price and tier
halved (the legacy ratio scale, 1 = 2 currency units per 1M tokens); other quota types as
stored.  Enabled meta models appear at the top level (contract §0; ``null`` prices in
``actual`` billing mode); the models they hide do not.
"""

from __future__ import annotations

from decimal import ROUND_HALF_EVEN, Decimal
from typing import Any

from console.context import ConsoleContext
from console.http import ApiError, json_route, make_app
from console.validation import optional_id
from gateway.billing.money import NANO
from gateway.billing.pricing import PRICE_NAMES, QUOTA_TOKENS, multiply
from gateway.catalog import wire
from gateway.catalog.meta_listing import listed_meta_models, meta_price_values
from gateway.catalog.offers import Offer, cheapest, model_tiers, offers
from gateway.catalog.snapshot import CatalogSnapshot, Model, UserChannel
from gateway.metamodels.compiled import MetaModel

HALF = Decimal("0.5")
ONE = Decimal(1)


def _exposure(model: Model) -> Decimal:
    return HALF if model.quota_type == QUOTA_TOKENS else ONE


def _ratio(output: Decimal, input_: Decimal) -> Decimal:
    if input_ == 0:
        return output if output != 0 else ONE
    return (output / input_).quantize(NANO, rounding=ROUND_HALF_EVEN)


class _Maps:
    """One set of price families keyed by model name (the top level or one user channel)."""

    def __init__(self, prefix: str = "") -> None:
        self.prefix = prefix
        self.maps: dict[str, dict[str, Any]] = {}

    def put(self, family: str, model_name: str, value: Any) -> None:
        self.maps.setdefault(self.prefix + family, {})[model_name] = value

    def add_model(self, model: Model, prices: dict[str, Decimal],
                  tier_multiplier: dict[str, Decimal], video_multiplier: Decimal) -> None:
        """``prices`` are unexposed; ``tier_multiplier`` is what scales each family's tiers."""
        exposure = _exposure(model)
        name = model.model_name
        shown = {n: multiply(prices[n], exposure) for n in PRICE_NAMES}
        for n in PRICE_NAMES:
            self.put(n, name, wire.money(shown[n]))
            self.put(f"{n}_tiers", name, wire.tiers(model_tiers(model, n),
                                                    multiply(tier_multiplier[n], exposure)))
        self.put("cache_read_input_price", name, wire.money(shown["cached_input_price"]))
        self.put("cache_read_input_price_tiers", name,
                 wire.tiers(model_tiers(model, "cached_input_price"),
                            multiply(tier_multiplier["cached_input_price"], exposure)))
        self.put("quota_type", name, model.quota_type)
        self.put("video_billing_config", name,
                 wire.video_config(model.video_billing_config, video_multiplier))
        if not self.prefix:
            self.put("model_ratio", name, wire.money(shown["input_price"]))
            self.put("completion_ratio", name,
                     wire.money(_ratio(shown["output_price"], shown["input_price"])))

    def add_meta(self, meta: MetaModel) -> None:
        """A meta model (contract §0): its own prices, exposed like any token-priced model's,
        in ``meta`` billing mode; ``null`` prices in ``actual`` mode; no tiers."""
        name = meta.model_name
        values = meta_price_values(meta, PRICE_NAMES, HALF)
        shown = {n: None if v is None else wire.money(v) for n, v in values.items()}
        for n in PRICE_NAMES:
            self.put(n, name, shown[n])
            self.put(f"{n}_tiers", name, [])
        self.put("cache_read_input_price", name, shown["cached_input_price"])
        self.put("cache_read_input_price_tiers", name, [])
        self.put("quota_type", name, QUOTA_TOKENS)
        self.put("video_billing_config", name, wire.video_config(None))
        if not self.prefix:
            self.put("model_ratio", name, shown["input_price"])
            input_, output = values["input_price"], values["output_price"]
            self.put("completion_ratio", name, None if input_ is None or output is None
                     else wire.money(_ratio(output, input_)))

    def empty(self) -> dict[str, dict[str, Any]]:
        families = [*PRICE_NAMES, *(f"{n}_tiers" for n in PRICE_NAMES),
                    "cache_read_input_price", "cache_read_input_price_tiers", "quota_type",
                    "video_billing_config"]
        if not self.prefix:
            families += ["model_ratio", "completion_ratio"]
        return {self.prefix + f: self.maps.get(self.prefix + f, {}) for f in families}


def _channel_block(uc: UserChannel, channel_offers: list[Offer]) -> dict[str, Any]:
    maps = _Maps()
    for offer in channel_offers:
        multiplier = offer.multiplier
        maps.add_model(offer.model, offer.effective, dict.fromkeys(PRICE_NAMES, multiplier),
                       multiplier)
    return {"id": uc.id, "name": uc.name, "description": uc.description,
            "multiplier": wire.money(uc.multiplier), **maps.empty()}


def pricing_data(snapshot: CatalogSnapshot, user_channel_id: int | None) -> dict[str, Any]:
    by_model = offers(snapshot, None if user_channel_id is None else [user_channel_id])
    effective, base = _Maps(), _Maps("base_")
    per_channel: dict[int, list[Offer]] = {}
    for name, offer_list in by_model.items():
        if name in snapshot.hidden_models:
            continue  # a meta model hides it (contract §0); still callable
        model = offer_list[0].model
        winners = {n: cheapest(offer_list, n) for n in PRICE_NAMES}
        effective.add_model(
            model, {n: winners[n].effective[n] for n in PRICE_NAMES},
            {n: winners[n].multiplier for n in PRICE_NAMES},
            min(offer.multiplier for offer in offer_list))
        base.add_model(model, dict(model.prices), dict.fromkeys(PRICE_NAMES, ONE), ONE)
        for offer in offer_list:
            per_channel.setdefault(offer.user_channel.id, []).append(offer)
    if user_channel_id is None:  # meta models belong to no user channel
        for meta in listed_meta_models(snapshot):
            effective.add_meta(meta)
            base.add_meta(meta)
    channels = sorted((snapshot.user_channels[uc_id] for uc_id in per_channel),
                      key=lambda uc: uc.name)
    return {
        "unit": "per_1m_tokens",
        **effective.empty(),
        **base.empty(),
        "user_channel_prices": {uc.name: _channel_block(uc, per_channel[uc.id])
                                for uc in channels},
    }


class PricingRoutes:
    """Mounted at ``/api/pricing`` (no auth; off by default)."""

    app = make_app()

    def __init__(self, ctx: ConsoleContext) -> None:
        self.ctx = ctx

    @app.route("/", methods=["GET"])
    @json_route
    async def pricing(self, request: Any) -> dict[str, Any]:
        if not self.ctx.settings.flag("pricing_endpoint_enabled"):
            raise ApiError(404, "Not found")
        raw = (request.args.get(b"user_channel_id") or [b""])[0].decode("utf-8", "replace")
        user_channel_id = optional_id(raw, "user_channel_id")
        data = pricing_data(self.ctx.catalog.snapshot, user_channel_id)
        return {"success": True, "message": "", "data": data}
