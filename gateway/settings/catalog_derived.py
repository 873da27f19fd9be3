"""Settings whose value is computed, not stored (console contract §5.4).

``edition``, ``enterprise_features_enabled``, the OpenPayment callback URLs and
``current_node_name`` are read-only; ``payment_enabled`` and ``smtp_security`` show their
effective value.  Both views and any server code that needs these values call ``derived``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

EDITION = "premium"
OPENPAYMENT_NOTIFY_PATH = "/api/payment/openpayment/notify"
OPENPAYMENT_RETURN_PATH = "/api/payment/openpayment/return"


def _joined(base_url: str, path: str) -> str:
    base = base_url.strip().rstrip("/")
    return base + path if base else ""


def derived(text: Callable[[str], str], flag: Callable[[str], bool], *,
            node_name: str = "") -> dict[str, Any]:
    """The computed keys, given the typed getters of a settings snapshot."""
    mode = text("system_mode")
    security = text("smtp_security")
    if not security:
        security = "tls" if text("smtp_port").strip() == "465" else "starttls"
    return {
        "edition": EDITION,
        "enterprise_features_enabled": mode == "enterprise",
        "payment_openpayment_notify_url": _joined(text("base_url"), OPENPAYMENT_NOTIFY_PATH),
        "payment_openpayment_return_url": _joined(text("base_url"), OPENPAYMENT_RETURN_PATH),
        "current_node_name": node_name,
        "payment_enabled": flag("payment_enabled") and mode != "personal",
        "smtp_security": security,
    }
