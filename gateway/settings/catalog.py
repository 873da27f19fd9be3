"""Every system setting Lockgate knows: type, default, visibility and validation.

Settings are stored as text rows (``settings`` table).  This catalog is the single place that
says how each key is read, what it defaults to, whether it is secret (never returned), public
(shown on ``/api/public/settings``) or read-only, and how a PUT value is normalised.  Unknown
keys are refused on PUT rather than stored.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

import orjson

Kind = Literal["bool", "text", "json"]

TRUE_WORDS = frozenset({"1", "true", "yes", "on", "enabled"})
FALSE_WORDS = frozenset({"0", "false", "no", "off", "disabled"})


class SettingError(ValueError):
    """A PUT value that cannot be accepted; the message is shown to the admin."""

    def __init__(self, key: str, message: str) -> None:
        super().__init__(message)
        self.key = key


@dataclass(frozen=True)
class Spec:
    key: str
    kind: Kind
    #: default as stored text
    default: str = ""
    secret: bool = False
    public: bool = False
    readonly: bool = False
    #: normalise a PUT value (already converted to stored text); raise SettingError to refuse
    check: Callable[[str], str] | None = None


def parse_bool(text: str | None, default: bool) -> bool:
    if text is None:
        return default
    word = text.strip().lower()
    if word in TRUE_WORDS:
        return True
    if word in FALSE_WORDS:
        return False
    return default


def to_stored_text(spec: Spec, value: Any) -> str:
    """Convert a JSON value from a PUT body into the stored text form of ``spec``."""
    if spec.kind == "bool":
        if isinstance(value, bool):
            return "true" if value else "false"
        if isinstance(value, str) and value.strip().lower() in TRUE_WORDS | FALSE_WORDS:
            return "true" if value.strip().lower() in TRUE_WORDS else "false"
        raise SettingError(spec.key, f"{spec.key} must be a boolean")
    if spec.kind == "json":
        if isinstance(value, str):
            text = value.strip()
            if text:
                try:
                    orjson.loads(text)
                except orjson.JSONDecodeError:
                    raise SettingError(spec.key, f"{spec.key} must be valid JSON") from None
            return text
        if isinstance(value, (list, dict)):
            return orjson.dumps(value).decode()
        raise SettingError(spec.key, f"{spec.key} must be JSON (an array, object or JSON text)")
    if isinstance(value, bool):
        raise SettingError(spec.key, f"{spec.key} must be a string")
    if isinstance(value, (int, float)):
        return repr(value) if isinstance(value, float) else str(value)
    if not isinstance(value, str):
        raise SettingError(spec.key, f"{spec.key} must be a string")
    return value.strip()


def int_range(key: str, low: int, high: int, message: str | None = None) -> Callable[[str], str]:
    def check(text: str) -> str:
        try:
            number = int(text)
        except ValueError:
            raise SettingError(key, message or f"{key} must be a whole number") from None
        if not low <= number <= high:
            raise SettingError(key, message or f"{key} must be between {low} and {high}")
        return str(number)

    return check


def one_of(key: str, values: tuple[str, ...], message: str, empty: str | None = None
           ) -> Callable[[str], str]:
    def check(text: str) -> str:
        word = text.strip().lower()
        if not word and empty is not None:
            return empty
        if word not in values:
            raise SettingError(key, message)
        return word

    return check


def _site_name(text: str) -> str:
    if not text:
        raise SettingError("site_name", "Site name is required")
    if len(text) > 80:
        raise SettingError("site_name", "Site name is too long")
    return text


def _http_url(key: str) -> Callable[[str], str]:
    def check(text: str) -> str:
        if text and not (text.startswith("http://") or text.startswith("https://")):
            raise SettingError(key, f"{key} must be an http(s) URL")
        return text

    return check


def _specs() -> list[Spec]:
    b: Kind = "bool"
    t: Kind = "text"
    j: Kind = "json"
    return [
        Spec("site_name", t, "Lockgate", public=True, check=_site_name),
        Spec("site_description", t, "", public=True),
        Spec("base_url", t, "", public=True, check=_http_url("base_url")),
        Spec("icon_url", t, "", public=True, check=_http_url("icon_url")),
        Spec("session_lifetime_hours", t, "168",
             check=int_range("session_lifetime_hours", 1, 8760)),
        Spec("password_login_enabled", b, "true", public=True),
        Spec("password_registration_enabled", b, "true", public=True),
        Spec("email_verification_required", b, "false", public=True),
        Spec("password_hcaptcha_enabled", b, "false", public=True),
        Spec("hcaptcha_site_key", t, "", public=True),
        Spec("hcaptcha_secret", t, "", secret=True),
        Spec("auth_agreement_mode", t, "notice", public=True,
             check=one_of("auth_agreement_mode", ("notice", "checkbox"),
                          "Invalid auth agreement mode", empty="notice")),
        Spec("privacy_policy", t, "", public=True),
        Spec("terms", t, "", public=True),
        Spec("privacy_policy_url", t, "", public=True, check=_http_url("privacy_policy_url")),
        Spec("terms_url", t, "", public=True, check=_http_url("terms_url")),
        Spec("registration_email_suffixes", t, "", public=True),
        Spec("registration_email_routing", j, "[]"),
        Spec("oidc_enabled", b, "false", public=True),
        Spec("passkey_enabled", b, "false", public=True),
        Spec("token_api_enabled", b, "true", public=True),
        Spec("rate_limit_enabled", b, "true", public=True),
        Spec("rate_limit_requests_per_minute", t, "60", public=True,
             check=int_range("rate_limit_requests_per_minute", 0, 1_000_000)),
        Spec("rate_limit_burst", t, "10", public=True,
             check=int_range("rate_limit_burst", 0, 1_000_000)),
        Spec("pricing_endpoint_enabled", b, "false", public=True),
        Spec("status_monitor_enabled", b, "false", public=True),
        Spec("ssrf_protection_enabled", b, "true", public=True),
        Spec("ssrf_allow_private_networks", b, "false", public=True),
        Spec("ssrf_allowed_hosts", t, ""),
        Spec("group_multiplier_mode", t, "min", public=True,
             check=one_of("group_multiplier_mode", ("min", "max", "high", "higher"),
                          "group_multiplier_mode must be min or max")),
        Spec("smtp_host", t, ""),
        Spec("smtp_port", t, "587", check=int_range("smtp_port", 1, 65535)),
        Spec("smtp_username", t, ""),
        Spec("smtp_password", t, "", secret=True),
        Spec("smtp_from", t, ""),
    ]


SPECS: dict[str, Spec] = {spec.key: spec for spec in _specs()}

#: spec names accepted on PUT as aliases of stored keys (contract §5.4)
ALIASES: dict[str, str] = {
    "registration_enabled": "password_registration_enabled",
    "logo_url": "icon_url",
    "status_page_enabled": "status_monitor_enabled",
}
