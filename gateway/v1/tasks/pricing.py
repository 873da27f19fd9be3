"""The price of a task, known before the upstream is called (it is held in full at submit).

Quota type 100 (combined video billing, gateway contract §13.7) prices by resolution and
duration from the model's ``video_billing_config``; a resolution or duration the config does not
offer is a 400 *before* any upstream call (ours ⚑: the origin found out after starting the job).
Other quota types price a task like the media relays do: per call (quota type 1, one call per
generated item) or by estimated tokens with every item counted as 1M output tokens.

Pure: no I/O.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from gateway import errors
from gateway.billing.cost import QUOTA_PER_CALL, Cost, compute_cost, with_multipliers
from gateway.billing.money import parse_decimal
from gateway.billing.usage import Usage
from gateway.billing.video_config import (
    QUOTA_TYPE_VIDEO,
    VideoConfigError,
    canonical_resolution,
    normalise_video_config,
)
from gateway.metering import Priced
from gateway.protocols.estimate import estimate_tokens

ONE_MILLION = 1_000_000
_RESOLUTION_FIELDS = ("size", "resolution", "quality", "aspect_ratio", "aspectRatio")
_DURATION_FIELDS = ("duration", "duration_seconds", "seconds", "video_duration")
_COUNT_FIELDS = ("n", "num_videos", "num_images", "count")


def _int(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str):
        text = value.strip().lower().removesuffix("s").strip()
        if text.isdigit():
            return int(text)
    return None


def resolution_of(body: dict[str, Any]) -> str | None:
    for name in _RESOLUTION_FIELDS:
        value = body.get(name)
        if isinstance(value, str) and value.strip() and value.strip().lower() != "auto":
            return canonical_resolution(value)
    width = _int(body.get("width", body.get("video_width")))
    height = _int(body.get("height", body.get("video_height")))
    if width and height:
        return f"{width}x{height}"
    return None


def duration_of(body: dict[str, Any]) -> int | None:
    for name in _DURATION_FIELDS:
        seconds = _int(body.get(name))
        if seconds is not None:
            return seconds
    return None


def count_of(body: dict[str, Any]) -> int:
    for name in _COUNT_FIELDS:
        count = _int(body.get(name))
        if count is not None and count > 0:
            return min(count, 100)
    return 1


def _video_base(config: Any, body: dict[str, Any]) -> tuple[Decimal, str]:
    try:
        resolutions = normalise_video_config(config)["resolutions"]
    except VideoConfigError:
        resolutions = []
    if not resolutions:
        raise errors.invalid_request("Video billing resolutions are not configured")
    wanted = resolution_of(body)
    entry = next((r for r in resolutions if r["resolution"] == wanted), None)
    if entry is None:
        raise errors.invalid_request(f'Video resolution "{wanted or ""}" is not allowed',
                                     "resolution")
    seconds = duration_of(body)
    if seconds is None:
        raise errors.invalid_request("Video duration is required", "duration")
    for duration in entry["durations"]:
        if duration["seconds"] == seconds:
            return (parse_decimal(duration["price"]),
                    f"{entry['resolution']} {seconds}s = {duration['price']}")
    unit = parse_decimal(entry["duration_unit_price"])
    if entry["durations"] or unit <= 0 or seconds <= 0:
        raise errors.invalid_request(f"Video duration {seconds} seconds is not allowed",
                                     "duration")
    return unit * seconds, f"{entry['resolution']} {seconds}s * {entry['duration_unit_price']}"


def task_cost(priced: Priced, body: dict[str, Any]) -> tuple[Cost, Usage]:
    """What the task costs (raises a 400 GatewayError for a billing tier not offered)."""
    model = priced.candidate.model
    count = count_of(body)
    group = priced.effective.group_multiplier
    channel = priced.effective.user_channel_multiplier
    usage = Usage(input=estimate_tokens(str(body.get("prompt") or "")),
                  output=count * ONE_MILLION, estimated=True)
    if model.quota_type == QUOTA_TYPE_VIDEO:
        base, formula = _video_base(model.video_billing_config, body)
        return with_multipliers(base * count, group, channel, counts={"videos": count},
                                formula=f"{formula} * {count}",
                                quota_type=QUOTA_TYPE_VIDEO), usage
    if model.quota_type == QUOTA_PER_CALL:
        prices = priced.prices
        return compute_cost(Usage(output=count * ONE_MILLION), prices, group, channel), usage
    return compute_cost(usage, priced.prices, group, channel), usage
