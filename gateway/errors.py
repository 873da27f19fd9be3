"""Gateway error answers: one error value, three native wire shapes, and the message catalogue.

Official SDKs raise typed errors only when an error body looks like their own API's, so each
client protocol family answers in its native shape (gateway contract §0): ``openai`` for every
``/v1`` route except the two below, ``messages`` for ``/v1/messages`` and ``modelaction`` for
the Google-style ``/v1[beta]/models/<model>:<action>`` routes.  Status codes and message texts
are those of the catalogue (§7.2) and never depend on the family, so a pipeline step raises one
``GatewayError`` and the route renders it.

Upstream failures (§7.3) never carry the upstream body: it may hold the upstream account's
identifiers, our channel key echoed back, internal URLs or stack traces, and a client cannot act
on it anyway.  Mirrored statuses get our generic "Upstream request failed" text; the upstream
body belongs in the server log only.  The one thing passed on is a numeric ``Retry-After`` of an
upstream 429, because it is a number we re-emit ourselves, not upstream text.
"""

from __future__ import annotations

from typing import Any

import orjson

OPENAI = "openai"
MESSAGES = "messages"
MODELACTION = "modelaction"
FAMILIES = (OPENAI, MESSAGES, MODELACTION)


class GatewayError(Exception):
    """An error answer: status, catalogue message, OpenAI-family ``type``/``code`` and extras.

    ``type`` is the OpenAI-family error type (the origin's typed-refusal strings such as
    ``upstream_error`` or ``user_channel_rate_limit`` where the catalogue has one);
    ``code`` is a stable machine code naming the catalogue entry.  The messages and
    model-action families derive their own type/status strings from ``status``.  ``extra``
    keys (e.g. ``retry_after``, ``channel_id``) are added inside the error object.
    """

    def __init__(
        self,
        status: int,
        message: str,
        *,
        type: str,
        code: str | None = None,
        param: str | None = None,
        extra: dict[str, Any] | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.type = type
        self.code = code
        self.param = param
        self.extra = dict(extra or {})
        self.headers = dict(headers or {})

    def __repr__(self) -> str:
        return f"GatewayError({self.status}, {self.message!r}, type={self.type!r})"


# --- wire shapes ----------------------------------------------------------------------------

#: Messages API error types by status (other 4xx: invalid_request_error, other 5xx: api_error)
_MESSAGES_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    500: "api_error",
    502: "api_error",
    503: "overloaded_error",
    529: "overloaded_error",
}

#: Google RPC status names by HTTP status (other 4xx: INVALID_ARGUMENT, other 5xx: INTERNAL)
_MODELACTION_STATUS = {
    400: "INVALID_ARGUMENT",
    401: "UNAUTHENTICATED",
    402: "RESOURCE_EXHAUSTED",
    403: "PERMISSION_DENIED",
    404: "NOT_FOUND",
    429: "RESOURCE_EXHAUSTED",
    500: "INTERNAL",
    502: "UNAVAILABLE",
    503: "UNAVAILABLE",
    504: "UNAVAILABLE",
}


def messages_type(status: int) -> str:
    return _MESSAGES_TYPES.get(status, "api_error" if status >= 500 else "invalid_request_error")


def modelaction_status(status: int) -> str:
    return _MODELACTION_STATUS.get(status, "INTERNAL" if status >= 500 else "INVALID_ARGUMENT")


def payload(family: str, error: GatewayError) -> dict[str, Any]:
    """The JSON object for ``error`` in ``family`` (also the data of an in-stream error event)."""
    inner: dict[str, Any]
    if family == OPENAI:
        inner = {"message": error.message, "type": error.type, "code": error.code,
                 "param": error.param}
        inner.update(error.extra)
        return {"error": inner}
    if family == MESSAGES:
        inner = {"type": messages_type(error.status), "message": error.message}
        inner.update(error.extra)
        return {"type": "error", "error": inner}
    if family == MODELACTION:
        inner = {"code": error.status, "message": error.message,
                 "status": modelaction_status(error.status)}
        inner.update(error.extra)
        return {"error": inner}
    raise ValueError(f"unknown error family {family!r}")


def render(family: str, error: GatewayError) -> tuple[int, dict[str, str], bytes]:
    """``(status, headers, body)`` for a whole error answer in ``family``'s native shape."""
    body = orjson.dumps(payload(family, error))
    headers = {"Content-Type": "application/json"}
    headers.update(error.headers)
    return error.status, headers, body


def family_for_path(path: str) -> str:
    """The error family of a gateway route path (query string already removed)."""
    if path == "/v1/messages" or path.startswith("/v1/messages/"):
        return MESSAGES
    if path.startswith("/v1beta/") or (path.startswith("/v1/models/") and ":" in path):
        return MODELACTION
    return OPENAI


# --- catalogue (§2, §4, §7.2) ---------------------------------------------------------------

def gateway_disabled() -> GatewayError:
    return GatewayError(503, "Token API access is disabled by the administrator",
                        type="server_error", code="gateway_disabled")


def shutting_down() -> GatewayError:
    """This process is draining (operations contract §6): try again, another node answers."""
    return GatewayError(503, "The server is shutting down; retry the request",
                        type="service_unavailable", code="shutting_down",
                        headers={"Retry-After": "1", "Connection": "close"})


def auth_required() -> GatewayError:
    return GatewayError(401, "Authorization is required", type="authentication_error",
                        code="auth_required")


def invalid_api_key() -> GatewayError:
    return GatewayError(401, "Invalid API key", type="authentication_error",
                        code="invalid_api_key")


def invalid_session() -> GatewayError:
    return GatewayError(401, "Invalid session", type="authentication_error",
                        code="invalid_session")


def user_not_found() -> GatewayError:
    return GatewayError(401, "User not found", type="authentication_error",
                        code="user_not_found")


def ip_not_allowed() -> GatewayError:
    return GatewayError(403, "API key is not allowed from this IP", type="permission_error",
                        code="ip_not_allowed")


def model_not_allowed() -> GatewayError:
    return GatewayError(403, "API key is not allowed to use this model",
                        type="permission_error", code="model_not_allowed")


def _retry_headers(retry_after: int) -> dict[str, str]:
    return {"Retry-After": str(max(1, int(retry_after)))}


def rate_limited(retry_after: int) -> GatewayError:
    seconds = max(1, int(retry_after))
    return GatewayError(429, "Rate limit exceeded", type="rate_limit_error",
                        code="rate_limit_exceeded", extra={"retry_after": seconds},
                        headers=_retry_headers(seconds))


def user_channel_rate_limited(
    retry_after: int, channel_id: int, headers: dict[str, str] | None = None
) -> GatewayError:
    seconds = max(1, int(retry_after))
    return GatewayError(429, "User channel rate limit exceeded", type="user_channel_rate_limit",
                        code="user_channel_rate_limit",
                        extra={"retry_after": seconds, "channel_id": channel_id},
                        headers={**(headers or {}), **_retry_headers(seconds)})


def invalid_body() -> GatewayError:
    return GatewayError(400, "Invalid request body", type="invalid_request_error",
                        code="invalid_body")


def unreadable_body() -> GatewayError:
    return GatewayError(400, "Failed to read request body", type="invalid_request_error",
                        code="unreadable_body")


def body_too_large(limit: int) -> GatewayError:
    return GatewayError(413, f"Request body exceeds maximum {limit} bytes",
                        type="invalid_request_error", code="body_too_large")


def file_too_large(size: int, limit: int) -> GatewayError:
    return GatewayError(413, f"file size {size} exceeds maximum {limit} bytes",
                        type="invalid_request_error", code="file_too_large")


def model_not_specified() -> GatewayError:
    return GatewayError(400, "Model not specified", type="invalid_request_error",
                        code="model_not_specified", param="model")


def invalid_request(message: str, param: str | None = None) -> GatewayError:
    """Typed 400 ``invalid_request`` (messages are required, unsupported protocol, ...)."""
    return GatewayError(400, message, type="invalid_request", code="invalid_request",
                        param=param)


def unsupported_upstream(message: str) -> GatewayError:
    return GatewayError(400, message, type="unsupported_upstream", code="unsupported_upstream")


def unsupported_stream(
    message: str = "Streaming is not supported for this endpoint",
) -> GatewayError:
    return GatewayError(400, message, type="unsupported_stream", code="unsupported_stream")


def insufficient_balance() -> GatewayError:
    return GatewayError(402, "Insufficient balance", type="insufficient_quota",
                        code="insufficient_balance")


def key_quota_exceeded() -> GatewayError:
    return GatewayError(402, "API key quota exceeded", type="insufficient_quota",
                        code="key_quota_exceeded")


def request_blocked() -> GatewayError:
    return GatewayError(403, "Request blocked by content policy", type="content_policy",
                        code="content_policy")


def response_blocked() -> GatewayError:
    return GatewayError(403, "Response blocked by content policy", type="content_policy",
                        code="content_policy")


def not_found(message: str = "Not found") -> GatewayError:
    return GatewayError(404, message, type="not_found_error", code="not_found")


def task_not_found() -> GatewayError:
    return not_found("Task not found")


def video_task_not_found() -> GatewayError:
    return not_found("Video task not found")


def internal(message: str = "Internal server error") -> GatewayError:
    """A 500 whose message says what failed ("Failed to ...") -- never an exception text."""
    return GatewayError(500, message, type="server_error", code="internal_error")


def meta_model_failed() -> GatewayError:
    return internal("Failed to resolve meta model")


def meta_model_unresolved() -> GatewayError:
    return GatewayError(503, "Meta model did not resolve to a model", type="server_error",
                        code="meta_model_unresolved")


def no_channel() -> GatewayError:
    return GatewayError(503, "No available channel for this model", type="server_error",
                        code="no_channel")


def no_model_config() -> GatewayError:
    return GatewayError(503, "No enabled model configuration for this model",
                        type="server_error", code="no_model_config")


def upstream_failed(status: int = 502) -> GatewayError:
    return GatewayError(status, "Upstream request failed", type="upstream_error",
                        code="upstream_error")


def upstream_read_failed() -> GatewayError:
    return GatewayError(502, "Failed to read upstream response", type="upstream_error",
                        code="upstream_read_failed")


def ssrf_blocked() -> GatewayError:
    return GatewayError(502, "Upstream URL blocked by SSRF protection", type="upstream_error",
                        code="ssrf_blocked")


# --- upstream status mapping (§0, §7.3) ----------------------------------------------------

#: upstream statuses answered with the same status (they describe the caller's request)
MIRRORED_UPSTREAM = frozenset({400, 404, 409, 413, 422, 429})


def client_status_for_upstream(status: int) -> int:
    """The status our client sees when the upstream answered ``status`` (>= 400).

    401/403 mean *our* channel credential failed, which is not the caller's fault: 502 (and
    the channel gets auto-disabled by ``gateway.health``).  5xx and anything not mirrored: 502.
    """
    return status if status in MIRRORED_UPSTREAM else 502


def from_upstream(status: int, retry_after: str | None = None) -> GatewayError:
    """Our answer for an upstream error status; ``retry_after`` = upstream Retry-After header.

    The upstream body is deliberately not a parameter: nothing of it reaches the client.
    """
    error = upstream_failed(client_status_for_upstream(status))
    if error.status == 429 and retry_after is not None:
        text = retry_after.strip()
        if text.isdigit() and len(text) <= 6:
            seconds = max(1, int(text))
            error.headers["Retry-After"] = str(seconds)
            error.extra["retry_after"] = seconds
    return error
