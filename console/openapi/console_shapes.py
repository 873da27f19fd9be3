"""Console request and answer shapes that service-spec §4.2-§4.4 and the console contract fix.

Console handlers validate imperatively (``console.validation.Body`` getters), which cannot be
reflected; the settings bodies are reflected from their catalog (``settings_shapes``).
"""

from __future__ import annotations

from typing import Any

from console.openapi import settings_shapes
from console.openapi.json_schema import AMOUNT_IN, BOOLEAN, INTEGER, OPEN_OBJECT, STRING, obj

TOKEN_USER = obj(("token", "user"), token=STRING, user=OPEN_OBJECT)
MESSAGE = obj(("message",), message=STRING)
GROUP_MULTIPLIERS = {"type": "array", "items": obj(
    ("group_id", "multiplier"), group_id=INTEGER, multiplier=AMOUNT_IN)}

REQUEST_BODIES: dict[tuple[str, str], tuple[str, dict[str, Any]]] = {
    ("POST", "/auth/password/login"): ("application/json", obj(
        ("identifier", "password"), identifier=STRING, password=STRING, captcha_token=STRING,
        agreement_accepted=BOOLEAN)),
    ("POST", "/auth/password/register"): ("application/json", obj(
        ("username", "email", "password"), username=STRING, email=STRING, password=STRING,
        email_code=STRING, captcha_token=STRING, referral_code=STRING,
        agreement_accepted=BOOLEAN)),
    ("POST", "/auth/password/email-code"): ("application/json", obj(
        ("email",), email=STRING, captcha_token=STRING)),
    ("POST", "/auth/passkey/login/options"): ("application/json", obj(identifier=STRING)),
    ("POST", "/auth/passkey/login"): ("application/json", OPEN_OBJECT),
    ("POST", "/api/setup"): ("application/json", obj(
        ("username", "email", "password"), site_name=STRING, username=STRING, email=STRING,
        password=STRING)),
    ("POST", "/api/user/payment/orders"): ("application/json", obj(
        ("amount", "method"), amount=AMOUNT_IN, method=STRING)),
    ("POST", "/api/user/password/email-code"): ("application/json", obj(
        email=STRING, captcha_token=STRING)),
    ("POST", "/api/user/password/change"): ("application/json", obj(
        ("new_password",), current_password=STRING, email_code=STRING, new_password=STRING)),
    ("POST", "/api/user/redeem-code"): ("application/json", obj(("code",), code=STRING)),
    ("PUT", "/api/channels/{item_id}/group-multipliers"): ("application/json",
                                                           GROUP_MULTIPLIERS),
    ("PUT", "/api/channel-models/{item_id}/group-multipliers"): ("application/json",
                                                                 GROUP_MULTIPLIERS),
    ("PUT", "/api/settings"): ("application/json", settings_shapes.update_body()),
}

RESPONSES: dict[tuple[str, str], dict[str, Any]] = {
    ("POST", "/auth/password/login"): TOKEN_USER,
    ("POST", "/auth/password/register"): TOKEN_USER,
    ("POST", "/auth/passkey/login"): TOKEN_USER,
    ("POST", "/api/setup"): TOKEN_USER,
    ("POST", "/auth/password/email-code"): MESSAGE,
    ("GET", "/api/setup/status"): obj(("required",), required=BOOLEAN),
    ("POST", "/api/user/oidc/bind-url"): obj(("auth_url",), auth_url=STRING),
    ("GET", "/api/settings"): settings_shapes.admin_view(),
    ("GET", "/api/public/settings"): settings_shapes.public_view(),
}

#: routes whose success is a redirect (console contract §2.7; a payment provider's return page
#: sends the browser on to the wallet, §4.7)
REDIRECTS = frozenset({"/auth/login", "/auth/callback", "/api/payment/epay/return",
                       "/api/payment/yipay/return", "/api/payment/stripe/return"})
