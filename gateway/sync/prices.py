"""Reading upstream price lists into per-model price items (contract §5.10, price sync).

Upstream gateways publish prices in many shapes; the reading is deliberately heuristic:

- containers: an array or a map, possibly nested under ``data``/``prices``/``models``/
  ``model_prices``/``list``/``items``;
- per-model objects with many spellings of the input/output/cached/cache-write prices and their
  tier lists, the new-api ``model_ratio`` + ``completion_ratio`` (+ ``cache_ratio``) pair,
  a per-request ``model_price`` (quota type 1), or a generic ``price``/``ratio``;
- split maps: ``{"model_ratio": {"m": 0.5}, "completion_ratio": {"m": 4}, "model_price":
  {...}}``.

A missing output price copies the input price and vice versa; a missing cached price copies
the input price.  Token-priced items (quota type 0) not taken from an explicit billing
expression are on the ratio scale and are multiplied by 2 (ratio 1 = 2 per 1M tokens);
per-request items are kept as they are.  Values with more than 9 decimals are rounded; negative
or non-numeric values are ignored.

Pure: no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from decimal import ROUND_HALF_EVEN, Decimal, InvalidOperation
from typing import Any

from gateway.billing.money import MAX_AMOUNT, format_decimal
from gateway.billing.tiers import TierError, normalise_tiers
from gateway.sync.model_lists import (
    SyncFormatError,
    custom_path,
    decode_payload,
    format_key,
)

NANO = Decimal("0.000000001")
RATIO_SCALE = Decimal(2)
PRICE_FIELDS = ("input_price", "output_price", "cached_input_price", "cache_write_input_price")

PRICING_PATH = "/api/pricing"
PRICES_PATH = "/api/prices"
_FORMAT_PATHS = {
    "newapi_prices": PRICING_PATH,
    "newapi_pricing": PRICING_PATH,
    "api_pricing": PRICING_PATH,
    "api_prices": PRICES_PATH,
    "legacy_api_prices": PRICES_PATH,
    "generic_models": "/models",
    "models": "/models",
    "api_models": "/api/models",
    "oneapi_models": "/api/models",
}
AUTO_PATHS = (PRICING_PATH, PRICES_PATH)
#: paths read without the channel key (public pricing pages)
UNAUTHENTICATED = frozenset({PRICING_PATH})

CONTAINERS = ("data", "prices", "models", "model_prices", "list", "items")
NAME_KEYS = ("model_name", "model", "name", "id")
SPELLINGS: dict[str, tuple[str, ...]] = {
    "input_price": ("input_price", "input", "prompt_price", "prompt", "input_cost",
                    "price_input", "inputprice"),
    "output_price": ("output_price", "output", "completion_price", "completion",
                     "output_cost", "price_output", "outputprice"),
    "cached_input_price": ("cached_input_price", "cache_read_price", "cached_price",
                           "cache_read_input_price", "input_cache_read", "cached_input",
                           "cache_hit_price", "cache_read"),
    "cache_write_input_price": ("cache_write_input_price", "cache_write_price",
                                "cache_creation_price", "input_cache_write",
                                "cache_creation_input_price", "cache_write"),
}
EXPRESSION_KEYS = ("billing_expression", "billing_expr", "price_expression")
SPLIT_KEYS = ("model_ratio", "completion_ratio", "model_price", "cache_ratio")


@dataclass
class PriceItem:
    """One model's upstream prices, already on the per-1M (or per-request) scale."""

    model_name: str
    quota_type: int = 0
    prices: dict[str, Decimal] = field(default_factory=dict)
    tiers: dict[str, list[dict[str, Any]] | None] = field(default_factory=dict)

    def wire(self) -> dict[str, Any]:
        out: dict[str, Any] = {"model_name": self.model_name, "quota_type": self.quota_type}
        for name in PRICE_FIELDS:
            out[name] = format_decimal(self.prices.get(name, Decimal(0)))
        for name in PRICE_FIELDS:
            out[f"{name}_tiers"] = self.tiers.get(name)
        return out


def price_paths(fmt: str | None, path: str | None = None) -> tuple[str, ...]:
    key = format_key(fmt)
    if key == "auto":
        return AUTO_PATHS
    if key == "custom":
        return (custom_path(path),)
    found = _FORMAT_PATHS.get(key)
    if found is None:
        raise SyncFormatError("unsupported price sync format")
    return (found,)


def number(value: Any) -> Decimal | None:
    """A non-negative finite number, or None (rounded to 9 places only after scaling)."""
    if isinstance(value, bool) or value is None:
        return None
    try:
        if isinstance(value, int | float):
            result = Decimal(repr(value)) if isinstance(value, float) else Decimal(value)
        elif isinstance(value, str) and value.strip():
            result = Decimal(value.strip())
        else:
            return None
    except InvalidOperation:
        return None
    if not result.is_finite() or result < 0 or result > MAX_AMOUNT:
        return None
    return result


def _first(obj: dict[str, Any], keys: tuple[str, ...]) -> Decimal | None:
    for key in keys:
        if key in obj:
            found = number(obj[key])
            if found is not None:
                return found
    return None


def _scaled_tiers(raw: Any, factor: Decimal) -> list[dict[str, Any]] | None:
    try:
        tiers = normalise_tiers(raw)
    except TierError:
        return None
    if tiers is None or factor == 1:
        return tiers
    scaled = []
    for tier in tiers:
        price = (Decimal(tier["price"]) * factor).quantize(NANO, rounding=ROUND_HALF_EVEN)
        scaled.append({**tier, "price": format_decimal(price)})
    return scaled


def _quota_type(obj: dict[str, Any]) -> int | None:
    value = obj.get("quota_type")
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float) and int(value) in (0, 1, 100):
        return int(value)
    if isinstance(value, str) and value.strip() in ("0", "1", "100"):
        return int(value.strip())
    return None


def item_from_object(name: str, obj: dict[str, Any]) -> PriceItem | None:
    """Read one per-model object; None when it carries no price at all."""
    source: dict[str, Any] = dict(obj)
    for nested in ("pricing", "price"):
        if isinstance(obj.get(nested), dict):
            source = {**obj[nested], **{k: v for k, v in obj.items() if k != nested}}
    quota_type = _quota_type(source)
    prices: dict[str, Decimal] = {}
    for target, keys in SPELLINGS.items():
        found = _first(source, keys)
        if found is not None:
            prices[target] = found
    ratio = number(source.get("model_ratio"))
    per_request = number(source.get("model_price"))
    if quota_type == 1 or (quota_type is None and per_request and not ratio
                           and not prices):
        quota_type = 1
        value = per_request if per_request is not None else prices.get(
            "output_price", prices.get("input_price"))
        if value is None:
            return None
        prices = {"input_price": value, "output_price": value}
    elif "input_price" not in prices and ratio is not None:
        completion = number(source.get("completion_ratio"))
        prices["input_price"] = ratio
        prices["output_price"] = ratio * (completion if completion is not None else 1)
        cache = number(source.get("cache_ratio"))
        if cache is not None:
            prices["cached_input_price"] = ratio * cache
        write = number(source.get("cache_creation_ratio"))
        if write is not None:
            prices["cache_write_input_price"] = ratio * write
    elif not prices:
        generic = _first(source, ("price", "ratio"))
        if generic is None:
            return None
        prices["input_price"] = generic
    return _finish(name, quota_type or 0, prices, source,
                   from_expression=any(key in source for key in EXPRESSION_KEYS))


def _finish(name: str, quota_type: int, prices: dict[str, Decimal], source: dict[str, Any],
            *, from_expression: bool) -> PriceItem | None:
    if not prices:
        return None
    if "output_price" not in prices and "input_price" in prices:
        prices["output_price"] = prices["input_price"]
    if "input_price" not in prices and "output_price" in prices:
        prices["input_price"] = prices["output_price"]
    prices.setdefault("cached_input_price", prices["input_price"])
    prices.setdefault("cache_write_input_price", Decimal(0))
    factor = RATIO_SCALE if quota_type == 0 and not from_expression else Decimal(1)
    scaled = {key: (value * factor).quantize(NANO, rounding=ROUND_HALF_EVEN)
              for key, value in prices.items()}
    tiers = {key: _scaled_tiers(source.get(f"{key}_tiers"), factor) for key in PRICE_FIELDS}
    return PriceItem(name, quota_type, scaled, tiers)


def _name_of(obj: dict[str, Any]) -> str | None:
    for key in NAME_KEYS:
        value = obj.get(key)
        if isinstance(value, str) and value.strip() and len(value.strip()) <= 100:
            return value.strip()
    return None


def _split_maps(node: dict[str, Any], items: dict[str, PriceItem]) -> bool:
    """``{"model_ratio": {...}, "completion_ratio": {...}, "model_price": {...}}``."""
    maps = {key: node[key] for key in SPLIT_KEYS if isinstance(node.get(key), dict)}
    if "model_ratio" not in maps and "model_price" not in maps:
        return False
    names = set(maps.get("model_ratio", {})) | set(maps.get("model_price", {}))
    for name in names:
        if not isinstance(name, str) or not name.strip() or len(name) > 100:
            continue
        obj = {key: table[name] for key, table in maps.items() if name in table}
        if name in maps.get("model_price", {}) and name not in maps.get("model_ratio", {}):
            obj["quota_type"] = 1
        item = item_from_object(name.strip(), obj)
        if item is not None:
            items[item.model_name] = item
    return True


def _collect(node: Any, items: dict[str, PriceItem], depth: int) -> None:
    if depth > 5:
        return
    if isinstance(node, list):
        for entry in node:
            if isinstance(entry, dict):
                name = _name_of(entry)
                item = item_from_object(name, entry) if name else None
                if item is not None:
                    items[item.model_name] = item
        return
    if not isinstance(node, dict):
        return
    if _split_maps(node, items):
        return
    for key in CONTAINERS:
        if isinstance(node.get(key), list | dict):
            _collect(node[key], items, depth + 1)
            return
    # a map keyed by model name: {"m": {...}} or {"m": 0.5}
    for key, value in node.items():
        if not isinstance(key, str) or not key.strip() or len(key) > 100:
            continue
        if isinstance(value, dict):
            item = item_from_object(_name_of(value) or key.strip(), value)
        else:
            item = item_from_object(key.strip(), {"ratio": value})
        if item is not None:
            items[item.model_name] = item


def parse_prices(payload: Any) -> list[PriceItem]:
    """Every priced model in an upstream (or pasted) price answer, sorted by name."""
    items: dict[str, PriceItem] = {}
    _collect(decode_payload(payload), items, 0)
    return [items[name] for name in sorted(items)]
