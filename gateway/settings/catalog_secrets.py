"""Secrets nested inside JSON settings: ``oauth_providers`` and ``payment_channels`` (§5.4).

On read the secret members are removed; on write a blank (or absent) secret member keeps the
stored one of the same provider ``key`` / channel ``id``, so an admin UI can send back what it
was shown without wiping credentials.  Validation of both shapes lives here too, because the
merge needs the same parsing.
"""

from __future__ import annotations

import re
from typing import Any

import orjson

from gateway.settings.spec import SettingError, is_http_url

OAUTH_FIELDS = (
    "key", "name", "enabled", "issuer", "client_id", "client_secret", "auth_url", "token_url",
    "userinfo_url", "scope", "redirect_url", "subject_key", "email_key", "name_key",
    "avatar_key",
)
OAUTH_URL_FIELDS = ("issuer", "auth_url", "token_url", "userinfo_url", "redirect_url")
CHANNEL_SECRET_MEMBERS = (
    "key", "openpayment_key", "wechat_private_key", "wechat_platform_certificate",
    "wechat_api_v3_key", "alipay_private_key", "alipay_public_key", "paypal_client_secret",
    "stripe_secret_key", "stripe_webhook_secret",
)
_KEY_JUNK = re.compile(r"[^a-z0-9-]+")


def _load_list(text: str | None) -> list[Any]:
    if not text:
        return []
    try:
        value = orjson.loads(text)
    except orjson.JSONDecodeError:
        return []
    return value if isinstance(value, list) else []


def normalise_provider_key(raw: Any) -> str:
    """Lower-case, ``[a-z0-9-]`` only (other runs become ``-``), no leading/trailing ``-``."""
    if not isinstance(raw, str):
        return ""
    return _KEY_JUNK.sub("-", raw.strip().lower()).strip("-")


# --- oauth_providers ---------------------------------------------------------------------------

def merge_oauth_providers(text: str, stored: str | None) -> str:
    """Validate a PUT value and keep stored ``client_secret``s where the new one is blank."""
    key = "oauth_providers"
    if not text:
        return "[]"
    try:
        providers = orjson.loads(text)
    except orjson.JSONDecodeError:
        raise SettingError(key, "OAuth providers must be valid JSON") from None
    if not isinstance(providers, list) or not all(isinstance(p, dict) for p in providers):
        raise SettingError(key, "OAuth providers must be a JSON array of objects")
    old_secrets = {
        normalise_provider_key(p.get("key")): p.get("client_secret")
        for p in _load_list(stored) if isinstance(p, dict)
    }
    seen: set[str] = set()
    result = []
    for provider in providers:
        clean: dict[str, Any] = {}
        for field in OAUTH_FIELDS:
            value = provider.get(field)
            if field == "enabled":
                if value is not None and not isinstance(value, bool):
                    raise SettingError(key, "OAuth provider enabled must be a boolean")
                clean[field] = True if value is None else value
                continue
            if value is not None and not isinstance(value, str):
                raise SettingError(key, f"OAuth provider {field} must be a string")
            clean[field] = (value or "").strip()
        clean["key"] = normalise_provider_key(clean["key"])
        if not clean["key"]:
            raise SettingError(key, "OAuth provider key is required")
        if clean["key"] in seen:
            raise SettingError(key, "OAuth provider key must be unique")
        seen.add(clean["key"])
        for field in OAUTH_URL_FIELDS:
            if clean[field] and not is_http_url(clean[field]):
                raise SettingError(key, f"OAuth provider {clean['key']}: {field} must be an "
                                        "http(s) URL")
        if not clean["client_secret"] and isinstance(old_secrets.get(clean["key"]), str):
            clean["client_secret"] = old_secrets[clean["key"]]
        result.append(clean)
    return orjson.dumps(result).decode()


def redact_oauth_providers(text: str) -> str:
    """The admin form: every provider without its ``client_secret``."""
    providers = [
        {k: v for k, v in p.items() if k != "client_secret"}
        for p in _load_list(text) if isinstance(p, dict)
    ]
    return orjson.dumps(providers).decode()


def public_oauth_providers(text: str, base_url: str) -> str:
    """The public form: enabled providers as ``{key, name, login_url, callback_url}``."""
    base = base_url.rstrip("/")
    public = []
    for provider in _load_list(text):
        if not isinstance(provider, dict) or provider.get("enabled") is False:
            continue
        key = normalise_provider_key(provider.get("key"))
        if not key:
            continue
        redirect = provider.get("redirect_url")
        public.append({
            "key": key,
            "name": provider.get("name") or key,
            "login_url": f"/auth/oauth/{key}/login",
            "callback_url": redirect if isinstance(redirect, str) and redirect
            else f"{base}/auth/oauth/{key}/callback",
        })
    return orjson.dumps(public).decode()


# --- payment_channels --------------------------------------------------------------------------

def _channel_id(channel: dict[str, Any]) -> str | None:
    value = channel.get("id")
    if isinstance(value, bool) or value is None:
        return None
    return str(value)


def merge_payment_channels(text: str, stored: str | None) -> str:
    """Validate a PUT value and keep stored secret config members where the new one is blank."""
    key = "payment_channels"
    message = "Payment channels must be a JSON array of objects"
    if not text:
        return "[]"
    try:
        channels = orjson.loads(text)
    except orjson.JSONDecodeError:
        raise SettingError(key, "Payment channels must be valid JSON") from None
    if not isinstance(channels, list) or not all(isinstance(c, dict) for c in channels):
        raise SettingError(key, message)
    old = {
        _channel_id(c): c.get("config") for c in _load_list(stored)
        if isinstance(c, dict) and _channel_id(c) is not None
    }
    seen: set[str] = set()
    for channel in channels:
        config = channel.get("config")
        if config is None:
            config = channel["config"] = {}
        if not isinstance(config, dict):
            raise SettingError(key, "Payment channel config must be a JSON object")
        channel_id = _channel_id(channel)
        if channel_id is not None:
            if channel_id in seen:
                raise SettingError(key, "Payment channel id must be unique")
            seen.add(channel_id)
        previous = old.get(channel_id) if channel_id is not None else None
        for member in CHANNEL_SECRET_MEMBERS:
            value = config.get(member)
            if value is not None and not isinstance(value, str):
                raise SettingError(key, f"Payment channel config {member} must be a string")
            if (value is None or not value.strip()) and isinstance(previous, dict) \
                    and isinstance(previous.get(member), str) and previous[member]:
                config[member] = previous[member]
    return orjson.dumps(channels).decode()


def redact_payment_channels(text: str) -> str:
    """The admin form: every channel's ``config`` without its secret members."""
    channels = []
    for channel in _load_list(text):
        if not isinstance(channel, dict):
            continue
        copy = dict(channel)
        if isinstance(copy.get("config"), dict):
            copy["config"] = {k: v for k, v in copy["config"].items()
                              if k not in CHANNEL_SECRET_MEMBERS}
        channels.append(copy)
    return orjson.dumps(channels).decode()
