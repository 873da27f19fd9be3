"""Which user channels offer which models, and at what base price -- the shared read model of the
user catalog, ``/api/public/models`` and ``/api/pricing``.

A user channel may reach one model through several configs (several upstream channels); each
config may override prices, so the user channel's base price per dimension is the lowest
config-adjusted price among them (every config is a route the user may be sent to at that
price).  Prices here carry no group multiplier; callers that price for a user apply
``Candidate.prices_for``.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from gateway.billing.pricing import PRICE_NAMES, base_prices, one_if_zero, scale
from gateway.catalog.snapshot import Candidate, CatalogSnapshot, Model, UserChannel


@dataclass(frozen=True)
class Offer:
    """One model offered by one user channel."""

    model: Model
    user_channel: UserChannel
    candidates: tuple[Candidate, ...]
    #: lowest config-adjusted price per dimension among the candidates
    base: dict[str, Decimal]

    @property
    def multiplier(self) -> Decimal:
        return one_if_zero(self.user_channel.multiplier)

    @property
    def effective(self) -> dict[str, Decimal]:
        """Base x user-channel multiplier (no group multiplier)."""
        return scale(self.base, self.multiplier)


def lowest(price_maps: Iterable[dict[str, Decimal]]) -> dict[str, Decimal]:
    """Per dimension, the lowest value among ``price_maps`` (which must not be empty)."""
    maps = list(price_maps)
    return {name: min(m[name] for m in maps) for name in maps[0]}


def offers(snapshot: CatalogSnapshot,
           user_channel_ids: Iterable[int] | None = None) -> dict[str, list[Offer]]:
    """Model name -> its offers (sorted by user-channel name), optionally for some channels only."""
    wanted = None if user_channel_ids is None else set(user_channel_ids)
    grouped: dict[tuple[str, int], list[Candidate]] = {}
    for candidate in snapshot.all_candidates():
        uc_id = candidate.user_channel.id
        if wanted is not None and uc_id not in wanted:
            continue
        grouped.setdefault((candidate.model.model_name, uc_id), []).append(candidate)
    result: dict[str, list[Offer]] = {}
    for (name, _uc_id), found in grouped.items():
        base = lowest(base_prices(c.model.prices, c.config.price_overrides) for c in found)
        result.setdefault(name, []).append(Offer(
            model=found[0].model, user_channel=found[0].user_channel,
            candidates=tuple(found), base=base))
    for name in result:
        result[name].sort(key=lambda offer: (offer.user_channel.name, offer.user_channel.id))
    return dict(sorted(result.items()))


def cheapest(offer_list: list[Offer], name: str) -> Offer:
    """The offer with the lowest effective price in dimension ``name`` (first on ties)."""
    assert name in PRICE_NAMES
    return min(offer_list, key=lambda offer: offer.effective[name])


def model_tiers(model: Model, name: str) -> Any:
    return model.tiers.get(name) or []
