"""The JSON shapes of the admin catalog: groups, user channels, channels, configs, models.

Built from ``gateway.store.catalog_admin.load_catalog`` rows.  Money, prices and multipliers
are decimal strings; config price overrides are null when inherited.  An upstream channel's
``api_key`` is write-only: views carry ``has_api_key`` and a masked hint, never the secret.
"""

from __future__ import annotations

from typing import Any

from console.user_view import group_view as base_group_view
from console.user_view import timestamp
from gateway.billing.money import format_nanos
from gateway.store.schema import OVERRIDE_PRICE_NAMES, PRICE_NAMES

PROVIDER_NAMES = {
    "custom": "Custom",
    "openai": "OpenAI",
    "anthropic": "Anthropic",
    "google": "Google",
    "gemini": "Google",
    "deepseek": "DeepSeek",
    "mistral": "Mistral",
    "meta": "Meta",
    "xai": "xAI",
    "qwen": "Qwen",
    "alibaba": "Alibaba",
    "moonshot": "Moonshot",
    "zhipu": "Zhipu",
}


def provider_name(provider: str) -> str:
    if not provider:
        return ""
    return PROVIDER_NAMES.get(provider.lower(), provider[:1].upper() + provider[1:])


def mask_key(key: str) -> str:
    """A hint that identifies a key without revealing it: ``sk-a...9xYz``."""
    if not key:
        return ""
    if len(key) < 12:
        return "****"
    return f"{key[:4]}...{key[-4:]}"


def group_view(group: dict[str, Any], default_id: int | None) -> dict[str, Any]:
    view = base_group_view(group)
    view["is_default"] = group["id"] == default_id
    return view


def multiplier_view(row: dict[str, Any], groups: dict[int, Any], owner: str) -> dict[str, Any]:
    group = groups.get(row["group_id"])
    return {
        "id": row["id"],
        owner: row[owner],
        "group_id": row["group_id"],
        "group": base_group_view(group) if group else None,
        "multiplier": format_nanos(row["multiplier_nanos"]),
        "created_at": timestamp(row["created_at"]),
        "updated_at": timestamp(row["updated_at"]),
    }


def model_view(model: dict[str, Any]) -> dict[str, Any]:
    view: dict[str, Any] = {
        "id": model["id"],
        "model_name": model["model_name"],
        "display_name": model["display_name"] or "",
        "provider": model["provider"],
        "provider_name": provider_name(model["provider"]),
        "provider_icon_url": model["provider_icon_url"] or "",
        "quota_type": model["quota_type"],
    }
    for name in PRICE_NAMES:
        view[name] = format_nanos(model[f"{name}_nanos"])
    for name in PRICE_NAMES:
        view[f"{name}_tiers"] = model[f"{name}_tiers"] or []
    view["video_billing_config"] = model["video_billing_config"] or {"resolutions": []}
    view["enabled"] = bool(model["enabled"])
    view["created_at"] = timestamp(model["created_at"])
    view["updated_at"] = timestamp(model["updated_at"])
    return view


def config_view(config: dict[str, Any], cat: dict[str, Any]) -> dict[str, Any]:
    model = cat["models"].get(config["model_id"])
    view: dict[str, Any] = {
        "id": config["id"],
        "channel_id": config["channel_id"],
        "model_id": config["model_id"],
        "model": model_view(model) if model else None,
        "model_name": model["model_name"] if model else "",
        "provider": model["provider"] if model else "",
        "provider_icon_url": (model["provider_icon_url"] or "") if model else "",
        "upstream_model_name": config["upstream_model_name"],
    }
    for name in OVERRIDE_PRICE_NAMES:
        nanos = config[f"{name}_nanos"]
        view[name] = None if nanos is None else format_nanos(nanos)
    view["enabled"] = bool(config["enabled"])
    view["group_multipliers"] = [
        multiplier_view(row, cat["groups"], "channel_model_id")
        for row in cat["config_multipliers"] if row["channel_model_id"] == config["id"]
    ]
    view["created_at"] = timestamp(config["created_at"])
    view["updated_at"] = timestamp(config["updated_at"])
    return view


def user_channel_summary(uc: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": uc["id"],
        "name": uc["name"],
        "description": uc["description"] or "",
        "multiplier": format_nanos(uc["multiplier_nanos"]),
        "routing_algorithm": uc["routing_algorithm"],
        "enabled": bool(uc["enabled"]),
        "rate_limit_enabled": bool(uc["rate_limit_enabled"]),
        "rate_limit_requests_per_minute": uc["rate_limit_requests_per_minute"],
        "rate_limit_burst": uc["rate_limit_burst"],
        "created_at": timestamp(uc["created_at"]),
        "updated_at": timestamp(uc["updated_at"]),
    }


def channel_view(channel: dict[str, Any], cat: dict[str, Any], *,
                 embed_user_channel: bool = True) -> dict[str, Any]:
    view: dict[str, Any] = {
        "id": channel["id"],
        "user_channel_id": channel["user_channel_id"],
    }
    if embed_user_channel:
        owner = next((uc for uc in cat["user_channels"]
                      if uc["id"] == channel["user_channel_id"]), None)
        view["user_channel"] = user_channel_summary(owner) if owner else None
    view.update({
        "name": channel["name"],
        "type": channel["type"],
        "base_url": channel["base_url"],
        "has_api_key": bool(channel["api_key"]),
        "api_key_masked": mask_key(channel["api_key"] or ""),
        "plugin_config": channel["plugin_config"] or "",
        "multiplier": format_nanos(channel["multiplier_nanos"]),
        "priority": channel["priority"],
        "weight": channel["weight"],
        "enabled": bool(channel["enabled"]),
        "price_sync_enabled": bool(channel["price_sync_enabled"]),
        "price_sync_cron": channel["price_sync_cron"] or "",
        "price_sync_last_at": timestamp(channel["price_sync_last_at"]),
        "consecutive_failures": channel["consecutive_failures"],
        "last_failure_at": timestamp(channel["last_failure_at"]),
        "last_failure_reason": channel["last_failure_reason"] or "",
        "auto_disabled_at": timestamp(channel["auto_disabled_at"]),
        "auto_disabled_reason": channel["auto_disabled_reason"] or "",
        "last_health_checked_at": timestamp(channel["last_health_checked_at"]),
        "last_health_status": channel["last_health_status"],
        "created_at": timestamp(channel["created_at"]),
        "updated_at": timestamp(channel["updated_at"]),
    })
    view["models"] = [config_view(c, cat) for c in cat["configs"]
                      if c["channel_id"] == channel["id"]]
    view["group_multipliers"] = [
        multiplier_view(row, cat["groups"], "channel_id")
        for row in cat["channel_multipliers"] if row["channel_id"] == channel["id"]
    ]
    return view


def access_group_view(row: dict[str, Any], cat: dict[str, Any]) -> dict[str, Any]:
    group = cat["groups"].get(row["group_id"])
    return {"id": row["id"], "user_channel_id": row["user_channel_id"],
            "group_id": row["group_id"], "group": base_group_view(group) if group else None,
            "created_at": timestamp(row["created_at"])}


def access_user_view(row: dict[str, Any]) -> dict[str, Any]:
    return {"id": row["id"], "user_channel_id": row["user_channel_id"],
            "user_id": row["user_id"],
            "user": {"id": row["user_id"], "username": row["username"], "email": row["email"]},
            "created_at": timestamp(row["created_at"])}


def user_channel_view(uc: dict[str, Any], cat: dict[str, Any]) -> dict[str, Any]:
    view = user_channel_summary(uc)
    view["channels"] = [channel_view(ch, cat, embed_user_channel=False)
                        for ch in cat["channels"] if ch["user_channel_id"] == uc["id"]]
    rows = [row for row in cat["access"] if row["user_channel_id"] == uc["id"]]
    view["allowed_groups"] = [access_group_view(r, cat) for r in rows if r["group_id"]]
    view["allowed_users"] = [access_user_view(r) for r in rows if r["user_id"]]
    return view
