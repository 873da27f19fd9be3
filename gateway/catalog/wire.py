"""JSON-ready forms of catalog prices: decimal strings, never floats (console contract §1.2).

Shared by every route that shows prices so that the same number is spelled the same way
everywhere.  Also holds the provider display names derived from provider ids (§5.9).
"""

from __future__ import annotations

from collections.abc import Mapping
from decimal import Decimal
from typing import Any

from gateway.billing.money import format_decimal
from gateway.billing.pricing import scale_tiers, scale_video_config

_PROVIDER_NAMES = {
    "openai": "OpenAI", "anthropic": "Anthropic", "google": "Google", "gemini": "Google",
    "meta": "Meta", "mistral": "Mistral AI", "deepseek": "DeepSeek", "qwen": "Qwen",
    "alibaba": "Alibaba", "xai": "xAI", "cohere": "Cohere", "moonshot": "Moonshot AI",
    "zhipu": "Zhipu AI", "baidu": "Baidu", "tencent": "Tencent", "bytedance": "ByteDance",
    "minimax": "MiniMax", "custom": "Custom",
}


def provider_name(provider: str) -> str:
    key = (provider or "custom").strip().lower()
    return _PROVIDER_NAMES.get(key, provider or "Custom")


def money(value: Decimal) -> str:
    return format_decimal(value)


def prices(values: Mapping[str, Decimal], names: tuple[str, ...] | None = None,
           prefix: str = "") -> dict[str, str]:
    return {prefix + name: format_decimal(values[name]) for name in (names or tuple(values))}


def _stringify(value: Any) -> Any:
    if isinstance(value, Decimal):
        return format_decimal(value)
    if isinstance(value, dict):
        return {k: _stringify(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_stringify(v) for v in value]
    return value


def tiers(raw: Any, multiplier: Decimal = Decimal(1)) -> list[dict[str, Any]]:
    """Tier list with prices multiplied and spelled as decimal strings."""
    return _stringify(scale_tiers(raw, multiplier))


def video_config(raw: Any, multiplier: Decimal = Decimal(1)) -> dict[str, Any]:
    """Combined video billing config with prices multiplied; empty is ``{"resolutions": []}``."""
    return _stringify(scale_video_config(raw, multiplier))
