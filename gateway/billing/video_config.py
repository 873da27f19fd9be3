"""Combined video billing configs (quota type 100) in one canonical, validated form.

A model billed per video lists prices per resolution, either per listed duration or per second
(console contract §5.9).  Admin input is normalised here before it is stored, so the charging
code can trust the stored document: resolutions lower-cased without spaces and with ``*`` read
as ``x``; durations with seconds <= 0 or a negative price dropped, de-duplicated by seconds (last
wins) and sorted; a resolution with durations has unit price 0; a resolution with neither
durations nor a positive unit price dropped; resolutions de-duplicated (last wins) and sorted.
Input that is not such a document at all raises ``VideoConfigError``.

Pure: no I/O.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import orjson

from gateway.billing.money import AmountError, format_decimal, parse_decimal

QUOTA_TYPE_VIDEO = 100
EMPTY: dict[str, Any] = {"resolutions": []}


class VideoConfigError(ValueError):
    """Not a usable video billing config; the message is shown to the admin."""


def canonical_resolution(value: str) -> str:
    return "".join(value.split()).lower().replace("*", "x")


def _price(value: Any, where: str) -> Decimal:
    try:
        return parse_decimal(value, allow_negative=True)
    except AmountError as exc:
        raise VideoConfigError(f"{where} {exc}") from None


def _seconds(value: Any, where: str) -> int:
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, str) and value.strip().lstrip("-").isdigit():
        value = int(value.strip())
    if isinstance(value, bool) or not isinstance(value, int):
        raise VideoConfigError(f"{where}: seconds must be an integer")
    return value


def _durations(value: Any, where: str) -> list[dict[str, Any]]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise VideoConfigError(f"{where}: durations must be an array")
    chosen: dict[int, Decimal] = {}
    for index, entry in enumerate(value):
        at = f"{where} duration {index}"
        if not isinstance(entry, dict):
            raise VideoConfigError(f"{at} must be an object")
        seconds = _seconds(entry.get("seconds"), at)
        if entry.get("price") is None:
            raise VideoConfigError(f"{at}: price is required")
        price = _price(entry["price"], f"{at}: price")
        if seconds <= 0 or price < 0:
            continue
        chosen[seconds] = price
    return [{"seconds": s, "price": format_decimal(chosen[s])} for s in sorted(chosen)]


def normalise_video_config(value: Any) -> dict[str, Any]:
    """Client input (object, JSON text or null) -> the stored canonical document."""
    if value is None or (isinstance(value, str) and not value.strip()):
        return {"resolutions": []}
    if isinstance(value, str):
        try:
            value = orjson.loads(value)
        except orjson.JSONDecodeError:
            raise VideoConfigError("video_billing_config must be valid JSON") from None
    if not isinstance(value, dict):
        raise VideoConfigError("video_billing_config must be an object")
    resolutions = value.get("resolutions")
    if resolutions is None:
        resolutions = []
    if not isinstance(resolutions, list):
        raise VideoConfigError("video_billing_config.resolutions must be an array")
    chosen: dict[str, dict[str, Any]] = {}
    for index, entry in enumerate(resolutions):
        where = f"resolution {index}"
        if not isinstance(entry, dict):
            raise VideoConfigError(f"{where} must be an object")
        name = entry.get("resolution")
        if not isinstance(name, str):
            raise VideoConfigError(f"{where}: resolution must be a string")
        name = canonical_resolution(name)
        durations = _durations(entry.get("durations"), where)
        unit = entry.get("duration_unit_price")
        unit_price = Decimal(0) if unit is None else _price(unit, f"{where}: duration_unit_price")
        if durations or unit_price < 0:
            unit_price = Decimal(0)
        if not name or (not durations and unit_price <= 0):
            continue
        chosen[name] = {
            "resolution": name,
            "duration_unit_price": format_decimal(unit_price),
            "durations": durations,
        }
    return {"resolutions": [chosen[name] for name in sorted(chosen)]}


def validate_for_quota_type(config: dict[str, Any], quota_type: int) -> None:
    """Quota type 100 needs at least one priced resolution (normalised configs always have
    durations or a positive unit price per resolution)."""
    if quota_type == QUOTA_TYPE_VIDEO and not config.get("resolutions"):
        raise VideoConfigError("Video billing requires at least one resolution price")
