"""Rules every account-creation path applies: username, email, password, email suffixes,
agreement -- one place, so OIDC and passkey paths cannot skip them (contract weakness 7)."""

from __future__ import annotations

import re
from typing import Any

from console.http import bad_request
from console.services.identity.passwords import MAX_LENGTH, MIN_LENGTH
from gateway.settings.store import Settings

_EMAIL = re.compile(r"^[^@\s]+@[^@\s]+\.[^@\s]+$")


def clean_username(value: Any) -> str:
    if not isinstance(value, str) or not value.strip():
        raise bad_request("username is required", field="username")
    name = value.strip()
    if len(name) < 3:
        raise bad_request("username is too short", field="username")
    if len(name) > 100:
        raise bad_request("username must be at most 100 characters", field="username")
    if any(ch.isspace() or ord(ch) < 32 for ch in name) or "@" in name:
        raise bad_request("username may not contain spaces, control characters or @",
                          field="username")
    return name


def clean_email(value: Any) -> str:
    if not isinstance(value, str) or not value.strip():
        raise bad_request("valid email is required", field="email")
    email = value.strip().lower()
    if len(email) > 100:
        raise bad_request("email is too long", field="email")
    if not _EMAIL.match(email):
        raise bad_request("valid email is required", field="email")
    return email


def clean_password(value: Any, field: str = "password") -> str:
    if not isinstance(value, str) or not value:
        raise bad_request(f"{field} is required", field=field)
    if len(value.encode()) < MIN_LENGTH:
        raise bad_request(f"{field} must be at least {MIN_LENGTH} characters", field=field)
    if len(value) > MAX_LENGTH:
        raise bad_request(f"{field} must be at most {MAX_LENGTH} characters", field=field)
    return value


def allowed_suffixes(settings: Settings) -> list[str]:
    raw = settings.text("registration_email_suffixes")
    parts = re.split(r"[,;\s]+", raw)
    return [part.lstrip("@").lower() for part in parts if part.strip().lstrip("@")]


def check_email_domain(settings: Settings, email: str) -> None:
    suffixes = allowed_suffixes(settings)
    if not suffixes:
        return
    domain = email.rsplit("@", 1)[-1]
    if not any(domain == s or domain.endswith("." + s) for s in suffixes):
        raise bad_request("email domain is not allowed for registration", field="email")


def routed_group_id(settings: Settings, email: str) -> int | None:
    """The group ``registration_email_routing`` assigns to this email's domain, if any."""
    rules = settings.json("registration_email_routing", [])
    if not isinstance(rules, list):
        return None
    domain = email.rsplit("@", 1)[-1]
    for rule in rules:
        if not isinstance(rule, dict):
            continue
        suffix = str(rule.get("suffix", "")).lstrip("@").lower()
        group_id = rule.get("group_id")
        if suffix and isinstance(group_id, int) and (
            domain == suffix or domain.endswith("." + suffix)
        ):
            return group_id
    return None


def agreement_required(settings: Settings) -> bool:
    if settings.text("auth_agreement_mode") != "checkbox":
        return False
    return any(
        settings.text(key).strip()
        for key in ("privacy_policy", "terms", "privacy_policy_url", "terms_url")
    )


def check_agreement(settings: Settings, accepted: Any) -> None:
    if agreement_required(settings) and accepted is not True:
        raise bad_request("agreement confirmation is required", field="agreement_accepted")

