"""Reading admin catalog bodies that several route groups share: group multiplier lists and
channel-model config fields (console contract §5.7, §5.8).

Only whitelisted fields are read; money is parsed exactly and stored in nano-units; every
refusal is a 400 naming the field before anything is written.
"""

from __future__ import annotations

from typing import Any

from console.http import bad_request
from console.validation import MISSING, Body
from gateway.billing.money import AmountError, parse_decimal, to_nanos
from gateway.store.schema import OVERRIDE_PRICE_NAMES

UPSTREAM_NAME_MAX = 200


def multiplier_items(raw: Any) -> list[tuple[int, int]]:
    """``[{"group_id", "multiplier"}, ...]`` -> ``[(group_id, nanos)]``.

    Items with ``group_id`` 0 or multiplier 0 are skipped (origin); a negative multiplier,
    a malformed item or a group listed twice is refused.
    """
    if not isinstance(raw, list):
        raise bad_request("body must be an array of {group_id, multiplier}")
    items: dict[int, int] = {}
    for index, item in enumerate(raw):
        if not isinstance(item, dict):
            raise bad_request(f"item {index} must be an object", field="group_id")
        group_id = item.get("group_id")
        if isinstance(group_id, bool) or not isinstance(group_id, int) or group_id < 0:
            raise bad_request(f"item {index}: group_id must be a group id", field="group_id")
        try:
            multiplier = parse_decimal(item.get("multiplier"))
        except AmountError as exc:
            raise bad_request(f"item {index}: multiplier {exc}", field="multiplier") from None
        if group_id == 0 or multiplier == 0:
            continue
        if group_id in items:
            raise bad_request(f"group {group_id} is listed twice", field="group_id")
        items[group_id] = to_nanos(multiplier)
    return list(items.items())


def override_prices(body: Body) -> dict[str, Any]:
    """Present price fields -> ``{name_nanos: nanos or None}``; null means inherit."""
    values: dict[str, Any] = {}
    for name in OVERRIDE_PRICE_NAMES:
        if not body.has(name):
            continue
        if body.data[name] is None:
            values[f"{name}_nanos"] = None
            continue
        values[f"{name}_nanos"] = to_nanos(body.decimal(name))
    return values


def model_reference(body: Body) -> tuple[int | None, str | None]:
    """``model_id`` or ``model_name`` (either may be absent)."""
    model_id = body.integer("model_id", minimum=1)
    model_name = body.string("model_name", max_length=100)
    return (None if model_id is MISSING else model_id,
            model_name if model_name is not MISSING and model_name else None)


def config_values(body: Body) -> dict[str, Any]:
    """The config fields other than the model reference."""
    values = override_prices(body)
    upstream = body.string("upstream_model_name", max_length=UPSTREAM_NAME_MAX)
    if upstream is not MISSING and upstream:
        values["upstream_model_name"] = upstream
    enabled = body.boolean("enabled")
    if enabled is not MISSING:
        values["enabled"] = enabled
    return values
