"""The one place that turns catalog rows into effective prices (console contract §5.7, §5.8).

The user catalog, ``/api/pricing``, ``/api/public/models`` and the gateway's billing all call
these functions, so a price shown is the price charged.  Pure and exact: ``Decimal`` in, ``Decimal``
out, no rounding (callers round to nano-units only when they store an amount).

Precedence, per price dimension and request:

* base price = the global model's price, unless the channel-model config overrides that
  dimension with a non-null value (only the five ``OVERRIDABLE`` dimensions can be overridden);
* group multiplier = for each active group of the user: the config's override for that group if
  non-zero, else the channel's override if non-zero, else the group's own multiplier (0 -> 1);
  the per-group values are combined with ``group_multiplier_mode`` (``min`` by default, ``max``
  with the aliases ``high``/``higher``); a user with no groups gets 1;
* user-channel multiplier = the user channel's multiplier (0 -> 1);
* effective price = base x group multiplier x user-channel multiplier.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from decimal import Context, Decimal
from typing import Any

#: every priced dimension of a global model (per 1M tokens for token-priced models)
PRICE_NAMES: tuple[str, ...] = (
    "input_price", "output_price", "cached_input_price", "cache_write_input_price",
    "cache_write_1h_input_price", "image_input_price", "image_output_price",
    "audio_input_price", "audio_output_price",
)
#: the dimensions a channel-model config may override
OVERRIDABLE: tuple[str, ...] = (
    "input_price", "output_price", "cached_input_price", "image_input_price", "image_output_price",
)

ONE = Decimal(1)
ZERO = Decimal(0)
#: wide enough that products of three 1e12-range values with 9 decimals stay exact
_EXACT = Context(prec=80)

QUOTA_TOKENS = 0
QUOTA_PER_REQUEST = 1
QUOTA_VIDEO = 100


def normalize_quota_type(value: Any) -> int:
    """0 tokens, 1 per request/item, 100 combined video; anything else is 0 (contract §5.9)."""
    return value if value in (QUOTA_PER_REQUEST, QUOTA_VIDEO) else QUOTA_TOKENS


def one_if_zero(multiplier: Decimal) -> Decimal:
    """Stored multipliers of 0 mean "not set" and bill as 1."""
    return ONE if multiplier == 0 else multiplier


def multiply(*factors: Decimal) -> Decimal:
    result = ONE
    for factor in factors:
        result = _EXACT.multiply(result, factor)
    return result


def base_prices(model_prices: Mapping[str, Decimal],
                overrides: Mapping[str, Decimal | None] | None = None) -> dict[str, Decimal]:
    """All nine dimensions: the global price, replaced by a non-null config override."""
    prices = {name: model_prices.get(name, ZERO) for name in PRICE_NAMES}
    for name in OVERRIDABLE:
        override = (overrides or {}).get(name)
        if override is not None:
            prices[name] = override
    return prices


@dataclass(frozen=True)
class GroupRate:
    """One of the user's active groups and that group's own multiplier."""

    group_id: int
    multiplier: Decimal


def active_group_ids(memberships: Iterable[tuple[int, datetime | None]],
                     primary_group_id: int | None, now: datetime) -> list[int]:
    """Groups that count for pricing and access: unexpired memberships, else the primary group.

    ``memberships`` are ``(group_id, expires_at)`` pairs (``None`` = permanent).
    """
    active = sorted({group_id for group_id, expires_at in memberships
                     if expires_at is None or expires_at > now})
    if active:
        return active
    return [primary_group_id] if primary_group_id is not None else []


def combine_mode(mode: str) -> str:
    """``max`` for ``max``/``high``/``higher``; anything else is ``min``."""
    return "max" if mode.strip().lower() in ("max", "high", "higher") else "min"


def group_multiplier(groups: Sequence[GroupRate],
                     config_overrides: Mapping[int, Decimal],
                     channel_overrides: Mapping[int, Decimal],
                     mode: str = "min") -> Decimal:
    """The user's group multiplier on one channel-model config (precedence in the module doc)."""
    if not groups:
        return ONE
    values = []
    for group in groups:
        value = config_overrides.get(group.group_id, ZERO)
        if value == 0:
            value = channel_overrides.get(group.group_id, ZERO)
        if value == 0:
            value = one_if_zero(group.multiplier)
        values.append(value)
    return max(values) if combine_mode(mode) == "max" else min(values)


def scale(prices: Mapping[str, Decimal], multiplier: Decimal) -> dict[str, Decimal]:
    return {name: multiply(price, multiplier) for name, price in prices.items()}


@dataclass(frozen=True)
class EffectivePrices:
    """What one user pays on one channel-model config, with the factors that produced it."""

    base: dict[str, Decimal]
    group_multiplier: Decimal
    user_channel_multiplier: Decimal
    prices: dict[str, Decimal]

    @property
    def multiplier(self) -> Decimal:
        return multiply(self.group_multiplier, self.user_channel_multiplier)


def effective_prices(
    model_prices: Mapping[str, Decimal],
    config_price_overrides: Mapping[str, Decimal | None],
    groups: Sequence[GroupRate],
    config_group_overrides: Mapping[int, Decimal],
    channel_group_overrides: Mapping[int, Decimal],
    user_channel_multiplier: Decimal,
    mode: str = "min",
) -> EffectivePrices:
    """Effective prices of a model on one config for a user with ``groups`` (see module doc)."""
    base = base_prices(model_prices, config_price_overrides)
    group = group_multiplier(groups, config_group_overrides, channel_group_overrides, mode)
    channel = one_if_zero(user_channel_multiplier)
    return EffectivePrices(base=base, group_multiplier=group, user_channel_multiplier=channel,
                           prices=scale(base, multiply(group, channel)))


def scale_tiers(tiers: Any, multiplier: Decimal) -> list[dict[str, Any]]:
    """Price tiers (``[{min_tokens, price, condition?}]``) with each price multiplied."""
    scaled: list[dict[str, Any]] = []
    for tier in tiers or []:
        if not isinstance(tier, dict):
            continue
        item = dict(tier)
        item["price"] = multiply(_decimal(tier.get("price")), multiplier)
        scaled.append(item)
    return scaled


def scale_video_config(config: Any, multiplier: Decimal) -> dict[str, Any]:
    """A combined video billing config with unit and per-duration prices multiplied."""
    resolutions = []
    for entry in (config or {}).get("resolutions", []) if isinstance(config, dict) else []:
        if not isinstance(entry, dict):
            continue
        item = dict(entry)
        if "duration_unit_price" in entry:
            item["duration_unit_price"] = multiply(
                _decimal(entry["duration_unit_price"]), multiplier)
        if isinstance(entry.get("durations"), list):
            item["durations"] = [
                {**d, "price": multiply(_decimal(d.get("price")), multiplier)}
                for d in entry["durations"] if isinstance(d, dict)
            ]
        resolutions.append(item)
    return {"resolutions": resolutions}


def _decimal(value: Any) -> Decimal:
    if isinstance(value, Decimal):
        return value
    if isinstance(value, bool) or value is None:
        return ZERO
    try:
        return Decimal(repr(value)) if isinstance(value, float) else Decimal(str(value))
    except ArithmeticError:
        return ZERO
