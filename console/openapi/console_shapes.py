"""Console request and answer shapes that service-spec §4.2-§4.4 and the console contract fix.

Console handlers validate imperatively (``console.validation.Body`` getters), which cannot be
reflected; the settings bodies are reflected from their catalog (``settings_shapes``).
"""

from __future__ import annotations

from typing import Any

from console.openapi import settings_shapes
from console.openapi.json_schema import (
    AMOUNT,
    AMOUNT_IN,
    BOOLEAN,
    INTEGER,
    OPEN_OBJECT,
    STRING,
    array_of,
    obj,
)
from console.routes import payments
from console.services import log_query

TOKEN_USER = obj(("token", "user"), token=STRING, user=OPEN_OBJECT)
MESSAGE = obj(("message",), message=STRING)
GROUP_MULTIPLIERS = {"type": "array", "items": obj(
    ("group_id", "multiplier"), group_id=INTEGER, multiplier=AMOUNT_IN)}

#: RFC 3339 with ``Z``, or null (console contract §1.2)
TIMESTAMP: dict[str, Any] = {"type": ["string", "null"]}
IP_LIST: dict[str, Any] = {"type": ["array", "string"], "items": STRING}
#: service-spec §2 "API key" fields; console contract §4.9 spellings
API_KEY_INPUT = obj(
    name=STRING, allowed_models=array_of(STRING), allowed_user_channels=array_of(INTEGER),
    allowed_ips=IP_LIST, ip_whitelist=IP_LIST, quota_limit=AMOUNT_IN, quota=AMOUNT_IN,
    enabled=BOOLEAN)
#: the API key object (console contract §4.9)
API_KEY = obj(
    ("id", "name", "key_prefix", "allowed_models", "allowed_user_channels", "allowed_ips",
     "ip_whitelist", "quota_limit", "quota", "enabled", "usage", "last_used_at",
     "usage_reset_at", "created_at", "updated_at"),
    id=INTEGER, name=STRING, key_prefix=STRING, allowed_models=array_of(STRING),
    allowed_user_channels=array_of(INTEGER), allowed_ips=array_of(STRING),
    ip_whitelist=array_of(STRING), quota_limit=AMOUNT, quota=AMOUNT, quota_remaining=AMOUNT,
    enabled=BOOLEAN, usage=obj(
        ("request_count", "input_tokens", "output_tokens", "cached_input_tokens",
         "total_tokens", "total_cost"), request_count=INTEGER, input_tokens=INTEGER,
        output_tokens=INTEGER, cached_input_tokens=INTEGER, total_tokens=INTEGER,
        total_cost=AMOUNT),
    last_used_at=TIMESTAMP, usage_reset_at=TIMESTAMP, created_at=TIMESTAMP,
    updated_at=TIMESTAMP)
#: create and rotate (contract D5): the object, the plaintext once, and the object again
API_KEY_SECRET = {**API_KEY, "required": [*API_KEY["required"], "api_key", "key"],
                  "properties": {**API_KEY["properties"],
                                 "api_key": {"type": "string", "pattern": "^sk-"},
                                 "key": API_KEY}}

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
    ("POST", "/api/user/api-keys"): ("application/json", API_KEY_INPUT),
    ("PUT", "/api/user/api-keys/{key_id}"): ("application/json", API_KEY_INPUT),
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
    ("GET", "/api/user/api-keys"): array_of(API_KEY),
    ("POST", "/api/user/api-keys"): API_KEY_SECRET,
    ("PUT", "/api/user/api-keys/{key_id}"): API_KEY,
    ("POST", "/api/user/api-keys/{key_id}/rotate"): API_KEY_SECRET,
    ("POST", "/api/user/api-keys/{key_id}/reset-usage"): API_KEY,
    ("DELETE", "/api/user/api-keys/{key_id}"): MESSAGE,
    ("POST", "/api/user/api-key/rotate"): API_KEY_SECRET,
}



def _query(names: tuple[str, ...]) -> list[tuple[str, dict[str, Any]]]:
    """Query parameters as the list routes read them (``console.services.log_query``)."""
    times = {"from", "to", "start_time", "end_time", "start_date", "end_date"}
    return [(name, INTEGER if name in ("page", "page_size") or name.endswith("_id") else
             {"type": "string", "description": "a date, a local date-time or an RFC 3339 time"}
             if name in times else STRING) for name in names]


#: (method, path) -> the optional query parameters a list route reads (contract §1.4)
QUERY_PARAMETERS: dict[tuple[str, str], list[tuple[str, dict[str, Any]]]] = {
    ("GET", "/api/logs"): _query(log_query.ADMIN_ENVELOPE_PARAMS),
    ("GET", "/api/user/logs"): _query(log_query.ENVELOPE_PARAMS),
    ("GET", "/api/user/payment/orders"): _query(payments.ENVELOPE_PARAMS),
}

#: routes whose success is a redirect (console contract §2.7; a payment provider's return page
#: sends the browser on to the wallet, §4.7)
REDIRECTS = frozenset({"/auth/login", "/auth/callback", "/api/payment/epay/return",
                       "/api/payment/yipay/return", "/api/payment/stripe/return"})
