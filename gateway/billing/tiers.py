"""Price tier lists in one canonical form, so billing, the console and exports agree.

A model's price for a dimension (input, output, cached input, ...) may come with tiers
(console contract §5.9): ``[{"min_tokens": 0, "price": "1.25", "condition": ""}, ...]``.  This
module turns whatever an admin (or a price sync) sent into the stored form -- entries with
negative ``min_tokens`` or price dropped, conditions mapped to their canonical names,
de-duplicated by (condition, min_tokens) with the last entry winning, sorted by condition then
``min_tokens`` -- and refuses input that is not a tier list at all (``TierError``).  The
selection/bracket semantics live in the cost computation; this module only shapes the data.

Pure: no I/O.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any, NamedTuple

from gateway.billing.money import AmountError, format_decimal, parse_decimal

#: canonical condition names; "" is the default (the priced token count itself)
CURRENT = ""
FULL_INPUT = "full_input_tokens"
FULL_REQUEST = "full_request_tokens"
BILLABLE_INPUT = "billable_input_tokens"
BILLABLE_OUTPUT = "billable_output_tokens"
CONDITIONS = (CURRENT, FULL_INPUT, FULL_REQUEST, BILLABLE_INPUT, BILLABLE_OUTPUT)

_SYNONYMS = {
    "": CURRENT,
    "current": CURRENT,
    "current_tokens": CURRENT,
    "default": CURRENT,
    "tokens": CURRENT,
    "full_input_tokens": FULL_INPUT,
    "full_input": FULL_INPUT,
    "input_tokens": FULL_INPUT,
    "prompt_tokens": FULL_INPUT,
    "context_tokens": FULL_INPUT,
    "context": FULL_INPUT,
    "context_length": FULL_INPUT,
    "total_input_tokens": FULL_INPUT,
    "full_request_tokens": FULL_REQUEST,
    "full_request": FULL_REQUEST,
    "request_tokens": FULL_REQUEST,
    "total_tokens": FULL_REQUEST,
    "billable_input_tokens": BILLABLE_INPUT,
    "billable_input": BILLABLE_INPUT,
    "uncached_input_tokens": BILLABLE_INPUT,
    "billable_output_tokens": BILLABLE_OUTPUT,
    "billable_output": BILLABLE_OUTPUT,
    "output_tokens": BILLABLE_OUTPUT,
    "completion_tokens": BILLABLE_OUTPUT,
}


class TierError(ValueError):
    """The value is not a usable tier list; the message names what is wrong."""


class Tier(NamedTuple):
    min_tokens: int
    price: Decimal
    condition: str


def canonical_condition(value: str) -> str:
    """Map a condition spelling to its canonical name; unknown spellings are the default."""
    key = value.strip().lower().replace("-", "_").replace(" ", "_")
    return _SYNONYMS.get(key, CURRENT)


def _min_tokens(value: Any, index: int) -> int:
    if isinstance(value, bool):
        raise TierError(f"tier {index}: min_tokens must be an integer")
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str) and value.strip().lstrip("-").isdigit():
        return int(value.strip())
    if not isinstance(value, int):
        raise TierError(f"tier {index}: min_tokens must be an integer")
    return value


def parse_tiers(value: Any) -> list[Tier]:
    """Validate and normalise; returns the canonical, sorted list (possibly empty)."""
    if value is None:
        return []
    if not isinstance(value, list):
        raise TierError("must be an array of tiers")
    chosen: dict[tuple[str, int], Tier] = {}
    for index, entry in enumerate(value):
        if not isinstance(entry, dict):
            raise TierError(f"tier {index} must be an object")
        min_tokens = _min_tokens(entry.get("min_tokens", 0), index)
        if "price" not in entry or entry["price"] is None:
            raise TierError(f"tier {index}: price is required")
        try:
            price = parse_decimal(entry["price"], allow_negative=True)
        except AmountError as exc:
            raise TierError(f"tier {index}: price {exc}") from None
        condition = entry.get("condition")
        if condition is None:
            condition = ""
        if not isinstance(condition, str):
            raise TierError(f"tier {index}: condition must be a string")
        if min_tokens < 0 or price < 0:
            continue
        tier = Tier(min_tokens, price, canonical_condition(condition))
        key = (tier.condition, tier.min_tokens)
        chosen.pop(key, None)
        chosen[key] = tier
    return sorted(chosen.values(), key=lambda t: (t.condition, t.min_tokens))


def stored_form(tiers: list[Tier]) -> list[dict[str, Any]] | None:
    """The JSON stored in ``*_tiers`` columns (None when there are no tiers)."""
    if not tiers:
        return None
    return [
        {"min_tokens": t.min_tokens, "price": format_decimal(t.price), "condition": t.condition}
        for t in tiers
    ]


def normalise_tiers(value: Any) -> list[dict[str, Any]] | None:
    """Input (as sent by a client) -> stored JSON form; raises TierError."""
    return stored_form(parse_tiers(value))


def load_tiers(stored: Any) -> list[Tier]:
    """Stored JSON (or None) -> Tier tuples with Decimal prices, for billing."""
    return parse_tiers(stored)
