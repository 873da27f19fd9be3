"""The price of one request: measured ``Usage`` * a model's prices * the caller's multipliers.

Pure and exact (``Decimal`` only, no floats, no I/O) so that the same function prices the
admission estimate, the settlement and the console's "what would this cost" views, and so that
it can be tested with worked examples and properties.  Rules: gateway contract §10.4 and console
contract §5.9 (price tiers).  Prices are per 1,000,000 tokens; the only rounding is the final
cost to nano-units (half-even), so multipliers compose without drift.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from decimal import ROUND_HALF_EVEN, Context, Decimal, localcontext
from functools import cached_property
from typing import Any

from gateway.billing.money import NANO, from_nanos, to_nanos
from gateway.billing.per_request_cache import request_cached
from gateway.billing.tiers import Tier, load_tiers
from gateway.billing.usage import Usage
from gateway.frozen_init import direct_init

PER = Decimal(1_000_000)
ONE = Decimal(1)
ZERO = Decimal(0)
#: enough digits that no product of token counts, prices and multipliers is ever rounded
EXACT = Context(prec=80)

#: dimension name -> stored price column prefix (``<prefix>_nanos``, ``<prefix>_tiers``)
DIMENSIONS: dict[str, str] = {
    "input": "input_price",
    "cached_input": "cached_input_price",
    "cache_write_5m": "cache_write_input_price",
    "cache_write_1h": "cache_write_1h_input_price",
    "output": "output_price",
    "image_input": "image_input_price",
    "image_output": "image_output_price",
    "audio_input": "audio_input_price",
    "audio_output": "audio_output_price",
}

#: tier conditions that mean "the dimension's own token count" (progressive brackets)
DEFAULT_CONDITIONS = frozenset({"", "current_tokens"})
QUOTA_TOKENS = 0
QUOTA_PER_CALL = 1


@dataclass(frozen=True)
class PriceSet:
    """Per-1M prices of one model as billed (global price with channel-config overrides)."""

    input: Decimal = Decimal(0)
    output: Decimal = Decimal(0)
    cached_input: Decimal = Decimal(0)
    cache_write_5m: Decimal = Decimal(0)
    cache_write_1h: Decimal = Decimal(0)
    image_input: Decimal = Decimal(0)
    image_output: Decimal = Decimal(0)
    audio_input: Decimal = Decimal(0)
    audio_output: Decimal = Decimal(0)
    #: dimension name -> ``billing_tiers`` (sorted by min_tokens; absent/empty = flat price)
    tiers: Mapping[str, tuple[Tier, ...]] = field(default_factory=dict)
    quota_type: int = QUOTA_TOKENS

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> PriceSet:
        """Build from a ``models`` row (``*_nanos`` prices, ``*_tiers`` JSON lists)."""
        prices = {dim: from_nanos(int(row.get(f"{col}_nanos") or 0))
                  for dim, col in DIMENSIONS.items()}
        tiers = {dim: billing_tiers(row.get(f"{col}_tiers")) for dim, col in DIMENSIONS.items()}
        quota_type = int(row.get("quota_type") or 0)
        return cls(**prices, tiers={d: t for d, t in tiers.items() if t},
                   quota_type=quota_type if quota_type in (0, 1, 100) else 0)

    def price(self, dimension: str) -> Decimal:
        return getattr(self, dimension)  # type: ignore[no-any-return]

    def tiers_of(self, dimension: str) -> tuple[Tier, ...]:
        return tuple(self.tiers.get(dimension, ()))

    def dedicated(self, dimension: str) -> bool:
        """True when the model prices ``dimension`` itself (a non-zero base or tier price)."""
        return dimension in self._dedicated

    @cached_property
    def _dedicated(self) -> frozenset[str]:
        # computed once per price set (they live as long as a catalog snapshot), not per call
        return frozenset(dim for dim in DIMENSIONS if self.price(dim) > 0
                         or any(t.price > 0 for t in self.tiers_of(dim)))

    @cached_property
    def prices_by_dimension(self) -> dict[str, Decimal]:
        """``price(dim)`` of every dimension, once per price set (read per settled request)."""
        return {dim: self.price(dim) for dim in DIMENSIONS}

    @cached_property
    def price_texts(self) -> dict[str, str]:
        """Each dimension's flat price as a formula writes it (``_num``), once per price set:
        the usage-log formula of every settled request names them."""
        with localcontext(EXACT):
            return {dim: _num(self.price(dim)) for dim in DIMENSIONS}

    def as_json(self) -> dict[str, Any]:
        """Wire/log form: decimal strings per stored price name, plus the tiers used."""
        return dict(self._json)  # a copy: the cached form is shared by every request

    @cached_property
    def _json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"quota_type": self.quota_type}
        for dim, col in DIMENSIONS.items():
            out[col] = format(self.price(dim).normalize(), "f")
            if self.tiers_of(dim):
                out[f"{col}_tiers"] = [
                    {"min_tokens": t.min_tokens, "price": format(t.price.normalize(), "f"),
                     "condition": t.condition} for t in self.tiers_of(dim)]
        return out


def billing_tiers(stored: Iterable[Mapping[str, Any]] | None) -> tuple[Tier, ...]:
    """A stored (or raw) tier list -> canonical Tiers sorted by ``min_tokens`` for pricing."""
    if not stored:
        return ()
    return tuple(sorted(load_tiers(list(stored)), key=lambda t: (t.min_tokens, t.condition)))


@direct_init
@dataclass(frozen=True)
class Cost:
    """What one request costs, with the numbers that explain it (kept in the usage log)."""

    #: exact sum of count * price / 1M before multipliers (not rounded)
    base_cost: Decimal
    #: base * group * user channel, rounded once to nano-units
    cost: Decimal
    group_multiplier: Decimal
    user_channel_multiplier: Decimal
    #: priced token count per dimension (after carving image/audio and cache out of input)
    counts: Mapping[str, int]
    formula: str
    quota_type: int = QUOTA_TOKENS

    # cached: settlement reads these for every request on the hot path (no lock: a Cost
    # lives for one request, so every read is a first read)
    @request_cached
    def cost_nanos(self) -> int:
        return to_nanos(self.cost)

    @request_cached
    def base_cost_nanos(self) -> int:
        return to_nanos(self.base_cost)

    @request_cached
    def group_multiplier_nanos(self) -> int:
        return _multiplier_nanos(self.group_multiplier)

    @request_cached
    def user_channel_multiplier_nanos(self) -> int:
        return _multiplier_nanos(self.user_channel_multiplier)


#: ``to_nanos`` of the few multipliers in use (by value: equal Decimals give equal nanos)
_MULTIPLIER_NANOS: dict[Decimal, int] = {}


def _multiplier_nanos(value: Decimal) -> int:
    if not value.is_finite():  # (a signalling NaN cannot even be hashed): as to_nanos does
        return to_nanos(value)
    found = _MULTIPLIER_NANOS.get(value)
    if found is None:
        found = to_nanos(value)
        if len(_MULTIPLIER_NANOS) < 1024:
            _MULTIPLIER_NANOS[value] = found
    return found


def _num(value: Decimal) -> str:
    text = format(value.normalize(), "f") if value else "0"
    return text.rstrip("0").rstrip(".") if "." in text else text


def _multiplier(value: Decimal) -> str:
    """``_num`` of a multiplier; most are exactly 1."""
    return "1" if value == ONE else _num(value)


def _dimension_cost(count: int, base: Decimal, tiers: tuple[Tier, ...],
                    metrics: Mapping[str, int], explain: bool = True) -> tuple[Decimal, str]:
    """sum of price * tokens for one dimension (before / 1M) and its formula fragment
    (empty when not ``explain``: the admission estimate needs only the number)."""
    if not tiers:
        return count * base, f"{count} * {_num(base)}" if explain else ""
    if all(t.condition in DEFAULT_CONDITIONS for t in tiers):
        # progressive brackets over this dimension's own count
        total = Decimal(0)
        parts: list[str] = []
        bounds = [(0, base)] + [(t.min_tokens, t.price) for t in tiers]
        for i, (start, price) in enumerate(bounds):
            end = bounds[i + 1][0] if i + 1 < len(bounds) else None
            upper = count if end is None else min(count, end)
            tokens = max(0, upper - start)
            if tokens:
                total += tokens * price
                if explain:
                    parts.append(f"{tokens} * {_num(price)}")
        if not explain:
            return total, ""
        return total, " + ".join(parts) if parts else f"0 * {_num(base)}"
    # a single price chosen by the largest threshold whose condition metric reaches it
    chosen = base
    label = "base"
    for tier in tiers:  # sorted ascending by min_tokens: the last match is the largest
        metric = metrics.get(tier.condition, count)
        if metric >= tier.min_tokens:
            chosen = tier.price
            label = f"tier {tier.condition or 'current_tokens'} >= {tier.min_tokens}"
    return count * chosen, f"{count} * {_num(chosen)} ({label})" if explain else ""


def _counts(u: Usage, prices: PriceSet) -> dict[str, int]:
    """The priced count per dimension of an already clamped usage."""
    dedicated = prices._dedicated  # one cached-property read, not four
    image_in = u.image_in if "image_input" in dedicated else 0
    audio_in = u.audio_in if "audio_input" in dedicated else 0
    image_out = u.image_out if "image_output" in dedicated else 0
    audio_out = u.audio_out if "audio_output" in dedicated else 0
    cache = u.cache_read + u.cache_write_5m + u.cache_write_1h
    return {
        "input": max(0, u.input - cache - image_in - audio_in),
        "cached_input": u.cache_read,
        "cache_write_5m": u.cache_write_5m,
        "cache_write_1h": u.cache_write_1h,
        "output": max(0, u.output - image_out - audio_out),
        "image_input": image_in,
        "image_output": image_out,
        "audio_input": audio_in,
        "audio_output": audio_out,
    }


def base_cost(usage: Usage, prices: PriceSet, *,
              explain: bool = True) -> tuple[Decimal, dict[str, int], str]:
    """The exact pre-multiplier cost, the priced counts and the formula's first half (empty
    when not ``explain``)."""
    if not prices.tiers and prices.quota_type != QUOTA_PER_CALL:
        return _flat_base_cost(usage, prices, explain)
    with localcontext(EXACT):
        if prices.quota_type == QUOTA_PER_CALL:
            out = usage.clamped().output
            units = max(1, -(-out // 1_000_000))
            return (prices.output * units, {"calls": units},
                    f"{units} call(s) * {_num(prices.output)}" if explain else "")
        u = usage.clamped()
        counts = _counts(u, prices)
        metrics = {
            "full_input_tokens": u.input,
            "full_request_tokens": u.input + u.output,
            "billable_input_tokens": counts["input"],
            "billable_output_tokens": counts["output"],
        }
        total = Decimal(0)
        parts: list[str] = []
        all_tiers = prices.tiers
        texts = prices.price_texts if explain else None
        for dim, count in counts.items():
            if not count:
                continue
            tiers = all_tiers.get(dim)
            if not tiers:  # a flat price (the common case): its text is cached per price set
                total += count * prices.price(dim)
                if texts is not None:
                    parts.append(f"{dim} {count} * {texts[dim]}")
                continue
            amount, text = _dimension_cost(count, prices.price(dim), tuple(tiers), metrics,
                                           explain)
            total += amount
            if explain:
                parts.append(f"{dim} {text}")
        base = total / PER
        formula = f"({' + '.join(parts)}) / 1M" if parts else "0" if explain else ""
        return base, counts, formula


def _flat_base_cost(usage: Usage, prices: PriceSet,
                    explain: bool) -> tuple[Decimal, dict[str, int], str]:
    """``base_cost`` of a token-priced set without tiers (what most requests settle with):
    the same sums in ``EXACT``'s own methods -- no context switch, no tier metrics."""
    ctx = EXACT
    counts = _counts(usage.clamped(), prices)
    total = ZERO
    parts: list[str] = []
    texts = prices.price_texts if explain else None
    price_of = prices.prices_by_dimension
    for dim, count in counts.items():
        if not count:
            continue
        total = ctx.add(total, ctx.multiply(count, price_of[dim]))
        if texts is not None:
            parts.append(f"{dim} {count} * {texts[dim]}")
    base = ctx.divide(total, PER)
    formula = f"({' + '.join(parts)}) / 1M" if parts else "0" if explain else ""
    return base, counts, formula


def with_multipliers(base: Decimal, group_multiplier: Decimal,
                     user_channel_multiplier: Decimal, *, counts: Mapping[str, int] | None = None,
                     formula: str = "", quota_type: int = QUOTA_TOKENS) -> Cost:
    """Apply the multipliers to an exact base cost and round once (also used by video billing)."""
    # the exact context's own methods: ``base * group * channel`` under it, without a switch;
    # a multiplier equal to 1 (most are) changes the product's exponent at most, and the
    # quantize below fixes the exponent: skipping it gives the same cost
    exact = base
    if group_multiplier != ONE:
        exact = EXACT.multiply(exact, group_multiplier)
    if user_channel_multiplier != ONE:
        exact = EXACT.multiply(exact, user_channel_multiplier)
    cost = exact.quantize(NANO, rounding=ROUND_HALF_EVEN, context=EXACT)
    base_text = _num(base)
    text = (f"{formula or base_text} = {base_text}; * group {_multiplier(group_multiplier)}"
            f" * channel {_multiplier(user_channel_multiplier)} = {_num(cost)}")
    return Cost(base_cost=base, cost=cost, group_multiplier=group_multiplier,
                user_channel_multiplier=user_channel_multiplier, counts=dict(counts or {}),
                formula=text, quota_type=quota_type)


def compute_cost(usage: Usage, prices: PriceSet, group_multiplier: Decimal = ONE,
                 user_channel_multiplier: Decimal = ONE) -> Cost:
    """Cost of a measured request (quota types 0 and 1; type 100 uses ``with_multipliers``)."""
    base, counts, formula = base_cost(usage, prices)
    return with_multipliers(base, group_multiplier, user_channel_multiplier, counts=counts,
                            formula=formula, quota_type=prices.quota_type)
