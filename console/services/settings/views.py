"""The admin and public JSON views of the settings (console contract §3.1, §5.4).

Both are built from the catalog, so a key added there shows up here with the right visibility.
Secrets never leave: secret and write-only keys are omitted (the admin view says only whether
a secret is stored, as ``<key>_set``), and secrets nested in JSON settings are stripped.
"""

from __future__ import annotations

from typing import Any

from console.services.identity.registration import agreement_required
from gateway.settings import catalog_secrets
from gateway.settings.catalog import SPECS
from gateway.settings.catalog_derived import derived
from gateway.settings.spec import Spec
from gateway.settings.store import Settings


def _value(settings: Settings, spec: Spec) -> Any:
    if spec.kind == "bool":
        return settings.flag(spec.key)
    return settings.text(spec.key)


def _computed(settings: Settings, node_name: str) -> dict[str, Any]:
    return derived(settings.text, settings.flag, node_name=node_name)


def admin_view(settings: Settings, node_name: str = "") -> dict[str, Any]:
    """Every key an admin may see; secrets omitted entirely (not masked)."""
    computed = _computed(settings, node_name)
    view: dict[str, Any] = {}
    for spec in SPECS.values():
        if spec.internal or spec.writeonly:
            continue
        if spec.secret:
            view[f"{spec.key}_set"] = bool(settings.raw(spec.key))
            continue
        view[spec.key] = computed[spec.key] if spec.key in computed else _value(settings, spec)
    view["oauth_providers"] = catalog_secrets.redact_oauth_providers(
        settings.text("oauth_providers"))
    view["payment_channels"] = catalog_secrets.redact_payment_channels(
        settings.text("payment_channels"))
    view["smtp_security"] = computed["smtp_security"]
    return view


def public_view(settings: Settings) -> dict[str, Any]:
    """What anyone may read: the public origin keys plus the spec aliases (D1)."""
    computed = _computed(settings, "")
    view: dict[str, Any] = {}
    for spec in SPECS.values():
        if not spec.public or spec.secret or spec.writeonly or spec.internal:
            continue
        view[spec.key] = computed[spec.key] if spec.key in computed else _value(settings, spec)
    sms = settings.flag("sms_enabled")
    nav = settings.json("top_nav_items", [])
    layouts = settings.json("page_layouts", {})
    widgets = layouts.get("dashboard_widgets", []) if isinstance(layouts, dict) else []
    methods = [name for name, key in (("password", "password_login_enabled"),
                                      ("oidc", "oidc_enabled"), ("passkey", "passkey_enabled"))
               if settings.flag(key)]
    view.update({
        "oauth_providers": catalog_secrets.public_oauth_providers(
            settings.text("oauth_providers"), settings.text("base_url")),
        "payment_channels": "",
        "sms_login_enabled": sms and settings.flag("sms_login_enabled"),
        "sms_binding_required": sms and settings.flag("sms_binding_required"),
        # spec aliases (contract D1)
        "logo_url": settings.text("icon_url"),
        "favicon_url": settings.text("icon_url"),
        "login_methods": methods,
        "registration_enabled": settings.flag("password_registration_enabled"),
        "auth_agreement_required": agreement_required(settings),
        "privacy_url": settings.text("privacy_policy_url"),
        "nav_items": nav if isinstance(nav, list) else [],
        "dashboard_widgets": widgets if isinstance(widgets, list) else [],
        "status_page_enabled": settings.flag("status_monitor_enabled"),
    })
    return view
