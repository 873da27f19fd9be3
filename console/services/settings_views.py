"""The admin and public JSON views of the settings (console contract §3.1, §5.4)."""

from __future__ import annotations

from typing import Any

from console.services.registration import agreement_required
from gateway.settings.catalog import SPECS, Spec
from gateway.settings.store import Settings


def _value(settings: Settings, spec: Spec) -> Any:
    if spec.kind == "bool":
        return settings.flag(spec.key)
    return settings.text(spec.key)


def admin_view(settings: Settings) -> dict[str, Any]:
    """Every known key; secrets omitted entirely (not masked), ``<key>_set`` says if stored."""
    view: dict[str, Any] = {"edition": "premium"}
    for spec in SPECS.values():
        if spec.secret:
            view[f"{spec.key}_set"] = bool(settings.raw(spec.key))
            continue
        view[spec.key] = _value(settings, spec)
    return view


def public_view(settings: Settings) -> dict[str, Any]:
    view: dict[str, Any] = {"edition": "premium"}
    for spec in SPECS.values():
        if spec.public and not spec.secret:
            view[spec.key] = _value(settings, spec)
    methods = [name for name, key in (("password", "password_login_enabled"),
                                      ("oidc", "oidc_enabled"), ("passkey", "passkey_enabled"))
               if settings.flag(key)]
    nav = settings.json("top_nav_items", [])
    layouts = settings.json("page_layouts", {})
    view.update({
        "logo_url": settings.text("icon_url"),
        "favicon_url": settings.text("icon_url"),
        "login_methods": methods,
        "registration_enabled": settings.flag("password_registration_enabled"),
        "auth_agreement_required": agreement_required(settings),
        "privacy_url": settings.text("privacy_policy_url"),
        "nav_items": nav if isinstance(nav, list) else [],
        "dashboard_widgets": (layouts.get("dashboard_widgets", [])
                              if isinstance(layouts, dict) else []),
        "status_page_enabled": settings.flag("status_monitor_enabled"),
    })
    return view
