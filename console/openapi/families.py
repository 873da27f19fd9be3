"""What a route's mount point says about it: its tag, security and error shape.

Operations contract §3: gateway routes take ``apiKey`` or ``apiKeyHeader``; ``/api/user/**``
takes ``jwt``; every other ``/api/**`` route is an admin route (``jwt`` plus
``x-lockgate-admin: true``); the routes the spec marks ``auth: none`` (``/auth/**``, the
public routes, first-run setup, the probes, this document) and the payment providers'
signed notify callbacks have ``security: []``.  The error shape is the gateway family's
native one (``gateway.errors.family_for_path``) or the console's.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from gateway import errors

GATEWAY_PREFIXES = ("/v1/", "/v1beta/")
PROBES = ("/healthz", "/readyz", "/openapi.json")
#: console paths that need no credential (spec §4.2, §4.3, §5)
PUBLIC_PREFIXES = ("/auth/", "/api/public/", "/api/pricing", "/api/setup")
#: payment providers' notify callbacks and return pages: signed, plain-text answers
PAYMENT_CALLBACK_PREFIX = "/api/payment/"
#: where connector devices and sandbox hosts call in with their device token (agents §2.2)
DEVICE_PREFIX = "/api/advanced-chat/connectors/"
USER_PREFIX = "/api/user/"
ADMIN_PREFIX = "/api/"

KEY_SECURITY: list[dict[str, list[str]]] = [{"apiKey": []}, {"apiKeyHeader": []}]
JWT_SECURITY: list[dict[str, list[str]]] = [{"jwt": []}]
DEVICE_SECURITY: list[dict[str, list[str]]] = [{"connectorToken": []}, {"connectorBearer": []}]

#: gateway error family -> component schema name
GATEWAY_ERROR_SCHEMAS = {errors.OPENAI: "OpenAIError", errors.MESSAGES: "MessagesError",
                         errors.MODELACTION: "ModelActionError"}
CONSOLE_ERROR_SCHEMA = "ConsoleError"


@dataclass(frozen=True)
class RouteFamily:
    tag: str
    security: list[dict[str, list[str]]]
    admin: bool
    #: component schema of the error body; ``None`` for the probes (their own shapes) and the
    #: payment callbacks
    error_schema: str | None
    #: answers ``text/plain`` (``success`` / ``fail``) as the payment providers expect
    plain_text: bool = False


def _matches(path: str, prefix: str) -> bool:
    return path == prefix.rstrip("/") or path.startswith(prefix.rstrip("/") + "/")


def classify(path: str) -> RouteFamily:
    """The family of an OpenAPI path template (``/api/user/api-keys/{key_id}``)."""
    if any(_matches(path, prefix) for prefix in GATEWAY_PREFIXES):
        # the model-action routes are told apart by the ":" of a concrete "<model>:<action>"
        family = errors.family_for_path(path.replace("{modelAction}", "model:action"))
        return RouteFamily(f"gateway ({family})", KEY_SECURITY, False,
                           GATEWAY_ERROR_SCHEMAS[family])
    if path in PROBES:
        return RouteFamily("operations", [], False, None)
    if _matches(path, PAYMENT_CALLBACK_PREFIX):
        return RouteFamily("payment callbacks", [], False, None, plain_text=True)
    if any(_matches(path, prefix) for prefix in PUBLIC_PREFIXES):
        tag = "auth" if path.startswith("/auth/") else "public"
        return RouteFamily(tag, [], False, CONSOLE_ERROR_SCHEMA)
    if _matches(path, DEVICE_PREFIX):
        return RouteFamily("devices", DEVICE_SECURITY, False, CONSOLE_ERROR_SCHEMA)
    if _matches(path, USER_PREFIX):
        return RouteFamily("user", JWT_SECURITY, False, CONSOLE_ERROR_SCHEMA)
    if _matches(path, ADMIN_PREFIX):
        return RouteFamily("admin", JWT_SECURITY, True, CONSOLE_ERROR_SCHEMA)
    return RouteFamily("other", [], False, CONSOLE_ERROR_SCHEMA)


def security_schemes() -> dict[str, Any]:
    return {
        "apiKey": {"type": "http", "scheme": "bearer",
                   "description": "An API key or a login JWT: `Authorization: Bearer <key>`"},
        "apiKeyHeader": {"type": "apiKey", "in": "header", "name": "x-api-key",
                         "description": "An API key in the `x-api-key` header"},
        "jwt": {"type": "http", "scheme": "bearer", "bearerFormat": "JWT",
                "description": "A login JWT (admin routes: of an administrator)"},
        "connectorToken": {"type": "apiKey", "in": "header", "name": "X-Connector-Token",
                           "description": "A connector device's or sandbox host's token"},
        "connectorBearer": {"type": "http", "scheme": "bearer",
                            "description": "A device token as a bearer (`wpc_…`)"},
    }
