"""Every system setting Lockgate knows: type, default, visibility and validation.

Settings are stored as text rows (``settings`` table).  This catalog is the single place that
says how each key is read, what it defaults to, whether it is secret (never returned), public
(shown on ``/api/public/settings``), read-only (derived, ignored on PUT) or internal (never
shown, never accepted), and how a PUT value is normalised.  Unknown keys are refused on PUT
rather than stored.  The key lists live in ``catalog_site`` / ``catalog_auth`` /
``catalog_ops`` / ``catalog_payment`` (one module per area), written with the building blocks
of ``spec``; the PUT planner is ``catalog_update`` and the secrets nested in JSON settings are
handled by ``catalog_secrets``.
"""

from __future__ import annotations

from gateway.settings import (
    catalog_assistant,
    catalog_auth,
    catalog_ops,
    catalog_payment,
    catalog_site,
)
from gateway.settings.spec import Spec


def _catalog() -> tuple[dict[str, Spec], dict[str, str]]:
    specs: dict[str, Spec] = {}
    for spec in (*catalog_site.specs(), *catalog_auth.specs(), *catalog_ops.specs(),
                 *catalog_payment.specs(), *catalog_assistant.specs()):
        if spec.key in specs:
            raise RuntimeError(f"setting {spec.key} is defined twice")
        specs[spec.key] = spec
    return specs, {
        "registration_enabled": "password_registration_enabled",
        "logo_url": "icon_url",
        "status_page_enabled": "status_monitor_enabled",
    }


SPECS, ALIASES = _catalog()
"""``SPECS``: key -> spec.  ``ALIASES``: spec names accepted on PUT for stored keys (§5.4)."""

#: PUT prefix alias (contract D16): ``check_in_enabled`` -> ``checkin_enabled``
PREFIX_ALIASES: dict[str, str] = {"check_in_": "checkin_"}


def resolve_key(given: str) -> str:
    """The stored key a PUT body name refers to (aliases applied; may be unknown)."""
    if given in ALIASES:
        return ALIASES[given]
    for prefix, target in PREFIX_ALIASES.items():
        if given.startswith(prefix):
            return target + given[len(prefix):]
    return given
