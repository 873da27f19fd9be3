"""The request and response shapes the contracts fix, and the error body of each family.

Console routes validate imperatively (``console.validation.Body`` getters inside handlers),
which cannot be reflected, so the bodies the contracts fix are written down here, keyed by
``(method, path template)``; every key must name a route that exists (the OpenAPI tests
check it, so a removed route cannot leave a stale shape behind).  A route without an entry
takes or returns an open object.
"""

from __future__ import annotations

from typing import Any

OPEN_OBJECT: dict[str, Any] = {"type": "object", "additionalProperties": True}


def _object(mandatory: tuple[str, ...] = (), /, **properties: dict[str, Any]
            ) -> dict[str, Any]:
    """An object with these properties (others allowed); ``mandatory`` names are required."""
    shape: dict[str, Any] = {"type": "object", "properties": properties,
                             "additionalProperties": True}
    if mandatory:
        shape["required"] = list(mandatory)
    return shape


STRING: dict[str, Any] = {"type": "string"}
BOOLEAN: dict[str, Any] = {"type": "boolean"}
INTEGER: dict[str, Any] = {"type": "integer"}
ARRAY: dict[str, Any] = {"type": "array"}
#: money on the wire: a decimal string, numbers accepted on input (DESIGN.md, Money)
AMOUNT_IN: dict[str, Any] = {"type": ["string", "number"]}
TOKEN_USER = _object(("token", "user"), token=STRING, user=OPEN_OBJECT)
MESSAGE = _object(("message",), message=STRING)
TEXT_STREAM = {"type": "string", "description": "Server-sent events (with `stream: true`)"}

ERROR_SCHEMAS: dict[str, dict[str, Any]] = {
    "ConsoleError": _object(
        ("error", "type"), error={"type": "string", "description": "human message"},
        type={"type": "string", "description": "machine code"},
        field={"type": "string", "description": "the invalid field (validation errors)"}),
    "OpenAIError": _object(("error",), error=_object(
        ("message", "type"), message=STRING, type=STRING,
        code={"type": ["string", "null"]}, param={"type": ["string", "null"]})),
    "MessagesError": _object(
        ("type", "error"), type={"const": "error"},
        error=_object(("type", "message"), type=STRING, message=STRING)),
    "ModelActionError": _object(("error",), error=_object(
        ("code", "message", "status"), code=INTEGER, message=STRING, status={
            "type": "string", "enum": ["INVALID_ARGUMENT", "UNAUTHENTICATED",
                                       "PERMISSION_DENIED", "NOT_FOUND", "RESOURCE_EXHAUSTED",
                                       "INTERNAL", "UNAVAILABLE"]})),
}

#: (method, path) -> (content type, schema) of the request body (service-spec §4, contracts)
REQUEST_BODIES: dict[tuple[str, str], tuple[str, dict[str, Any]]] = {
    ("POST", "/v1/chat/completions"): ("application/json", _object(
        ("model", "messages"), model=STRING, messages=ARRAY, stream=BOOLEAN)),
    ("POST", "/v1/completions"): ("application/json", _object(
        ("model",), model=STRING, prompt={}, stream=BOOLEAN)),
    ("POST", "/v1/responses"): ("application/json", _object(
        ("model",), model=STRING, input={}, stream=BOOLEAN)),
    ("POST", "/v1/messages"): ("application/json", _object(
        ("model", "messages"), model=STRING, messages=ARRAY, max_tokens=INTEGER,
        stream=BOOLEAN)),
    ("POST", "/v1/models/{modelAction}"): ("application/json", _object(contents=ARRAY)),
    ("POST", "/v1beta/models/{modelAction}"): ("application/json", _object(contents=ARRAY)),
    ("POST", "/v1/audio/transcriptions"): ("multipart/form-data", _object(
        ("file",), file={"type": "string", "contentMediaType": "application/octet-stream"},
        model=STRING)),
    ("POST", "/v1/images/edits"): ("multipart/form-data", _object(
        ("image",), image={"type": "string", "contentMediaType": "application/octet-stream"},
        prompt=STRING, model=STRING)),
    ("POST", "/v1/uploads/images"): ("multipart/form-data", _object(
        ("file",), file={"type": "string", "contentMediaType": "application/octet-stream"})),
    ("POST", "/auth/password/login"): ("application/json", _object(
        ("identifier", "password"), identifier=STRING, password=STRING, captcha_token=STRING,
        agreement_accepted=BOOLEAN)),
    ("POST", "/auth/password/register"): ("application/json", _object(
        ("username", "email", "password"), username=STRING, email=STRING, password=STRING,
        email_code=STRING, captcha_token=STRING, referral_code=STRING,
        agreement_accepted=BOOLEAN)),
    ("POST", "/auth/password/email-code"): ("application/json", _object(
        ("email",), email=STRING, captcha_token=STRING)),
    ("POST", "/auth/passkey/login/options"): ("application/json", _object(identifier=STRING)),
    ("POST", "/auth/passkey/login"): ("application/json", OPEN_OBJECT),
    ("POST", "/api/setup"): ("application/json", _object(
        ("username", "email", "password"), site_name=STRING, username=STRING, email=STRING,
        password=STRING)),
    ("POST", "/api/user/payment/orders"): ("application/json", _object(
        ("amount", "method"), amount=AMOUNT_IN, method=STRING)),
    ("POST", "/api/user/password/email-code"): ("application/json", _object(
        email=STRING, captcha_token=STRING)),
    ("POST", "/api/user/password/change"): ("application/json", _object(
        ("new_password",), current_password=STRING, email_code=STRING, new_password=STRING)),
    ("POST", "/api/user/redeem-code"): ("application/json", _object(("code",), code=STRING)),
    ("PUT", "/api/channels/{item_id}/group-multipliers"): ("application/json", {
        "type": "array", "items": _object(("group_id", "multiplier"), group_id=INTEGER,
                                          multiplier=AMOUNT_IN)}),
    ("PUT", "/api/channel-models/{item_id}/group-multipliers"): ("application/json", {
        "type": "array", "items": _object(("group_id", "multiplier"), group_id=INTEGER,
                                          multiplier=AMOUNT_IN)}),
}

#: (method, path) -> schema of the 200 JSON answer
RESPONSES: dict[tuple[str, str], dict[str, Any]] = {
    ("GET", "/healthz"): _object(("status",), status={"const": "ok"}),
    ("GET", "/readyz"): _object(("status",), status={"type": "string", "enum": [
        "ready", "draining", "database unreachable", "migrations pending",
        "shared state unreachable"]}),
    ("GET", "/openapi.json"): _object(("openapi", "info", "paths"), openapi=STRING),
    ("POST", "/auth/password/login"): TOKEN_USER,
    ("POST", "/auth/password/register"): TOKEN_USER,
    ("POST", "/auth/passkey/login"): TOKEN_USER,
    ("POST", "/api/setup"): TOKEN_USER,
    ("POST", "/auth/password/email-code"): MESSAGE,
    ("GET", "/api/setup/status"): _object(("required",), required=BOOLEAN),
    ("POST", "/api/user/oidc/bind-url"): _object(("auth_url",), auth_url=STRING),
}

#: routes that answer a stream when the body asks for one (gateway contract §1)
STREAMING = frozenset({"/v1/chat/completions", "/v1/completions", "/v1/responses",
                       "/v1/messages", "/v1/models/{modelAction}",
                       "/v1beta/models/{modelAction}"})
#: routes whose success is a redirect (console contract §2.7; a payment provider's return page
#: sends the browser on to the wallet, §4.7)
REDIRECTS = frozenset({"/auth/login", "/auth/callback", "/api/payment/epay/return",
                       "/api/payment/yipay/return", "/api/payment/stripe/return"})
#: routes whose success body is not JSON
BINARY = frozenset({"/v1/audio/speech"})
