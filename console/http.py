"""What every console route shares: JSON in and out, the error body, and the route wrapper.

Errors are ``{"error": "<human message>", "type": "<machine code>"}`` (plus ``field`` for
validation errors) -- the console contract §0/§1.1.  Handlers raise ``ApiError``; anything else
is logged and becomes a bare 500 so no stack trace or SQL reaches a client.
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import orjson
from klein import Klein
from twisted.internet.defer import Deferred, ensureDeferred
from twisted.logger import Logger
from twisted.python.failure import Failure
from twisted.web.iweb import IRequest
from werkzeug.exceptions import MethodNotAllowed, NotFound

from console.path_ids import MAX_ID, IdConverter, UnusableId

log = Logger()

TYPE_BY_STATUS = {
    400: "invalid_request",
    401: "unauthorized",
    402: "insufficient_balance",
    403: "forbidden",
    404: "not_found",
    405: "method_not_allowed",
    409: "conflict",
    413: "payload_too_large",
    429: "rate_limited",
    500: "internal",
    502: "upstream_error",
    503: "unavailable",
}

#: default cap on console JSON bodies (contract §1.6 caps everything at 128 MiB; the console
#: needs far less, and routes that need more pass their own limit)
DEFAULT_BODY_LIMIT = 1 << 20


class ApiError(Exception):
    """An error answer: status, human message, machine type, and optional extras."""

    def __init__(
        self,
        status: int,
        message: str,
        *,
        type: str | None = None,
        field: str | None = None,
        extra: dict[str, Any] | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.type = type or TYPE_BY_STATUS.get(status, "error")
        self.field = field
        self.extra = extra or {}
        self.headers = headers or {}

    def body(self) -> dict[str, Any]:
        payload: dict[str, Any] = {"error": self.message, "type": self.type}
        if self.field:
            payload["field"] = self.field
        payload.update(self.extra)
        return payload


def bad_request(message: str, field: str | None = None) -> ApiError:
    return ApiError(400, message, field=field)


def not_found(message: str = "Not found") -> ApiError:
    return ApiError(404, message)


def write_json(request: IRequest, status: int, payload: Any) -> bytes:
    request.setResponseCode(status)
    request.setHeader(b"content-type", b"application/json")
    request.setHeader(b"cache-control", b"no-store")
    return orjson.dumps(payload)


def _read_raw(request: IRequest, limit: int) -> bytes:
    content = request.content
    content.seek(0, 2)
    size = content.tell()
    if size > limit:
        raise ApiError(413, f"request body exceeds {limit} bytes")
    content.seek(0)
    return content.read()


def _parse(raw: bytes) -> Any:
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise bad_request(f"malformed JSON: {exc.msg} at position {exc.pos}") from None


def read_json(request: IRequest, *, limit: int = DEFAULT_BODY_LIMIT, optional: bool = False) -> Any:
    """Parse the request body as JSON; 413 over ``limit``; 400 when malformed."""
    raw = _read_raw(request, limit)
    if not raw.strip():
        if optional:
            return None
        raise bad_request("request body must be a JSON object")
    return _parse(raw)


def read_object(request: IRequest, *, limit: int = DEFAULT_BODY_LIMIT,
                optional: bool = False) -> dict[str, Any]:
    """The body as a JSON object; with ``optional`` an empty body is ``{}`` (a JSON
    ``null`` is still refused: it is a value, not an absent body)."""
    raw = _read_raw(request, limit)
    if not raw.strip():
        if optional:
            return {}
        raise bad_request("request body must be a JSON object")
    body = _parse(raw)
    if not isinstance(body, dict):
        raise bad_request("request body must be a JSON object")
    return body


H = TypeVar("H", bound=Callable[..., Awaitable[Any]])


def json_route(handler: Callable[..., Awaitable[Any]]) -> Callable[..., Deferred[bytes]]:
    """Wrap an ``async`` route handler: its return value becomes a 200 JSON body.

    A handler may return ``(status, payload)`` to choose another success status.
    """

    @functools.wraps(handler)
    def wrapper(self: Any, request: IRequest, *args: Any, **kwargs: Any) -> Deferred[bytes]:
        async def run() -> bytes:
            try:
                _check_path_ids(kwargs)
                result = await handler(self, request, *args, **kwargs)
            except ApiError as error:
                for name, value in error.headers.items():
                    request.setHeader(name.encode(), value.encode())
                return write_json(request, error.status, error.body())
            except Exception:
                log.failure("unhandled error in {path}", path=request.path)
                return write_json(request, 500, {"error": "Internal server error",
                                                 "type": "internal"})
            if isinstance(result, tuple):
                status, payload = result
                return write_json(request, status, payload)
            return write_json(request, 200, result)

        return ensureDeferred(run())

    return wrapper


def _check_path_ids(kwargs: dict[str, Any]) -> None:
    for name, value in kwargs.items():
        if isinstance(value, UnusableId):
            raise bad_request(f"Invalid {name}: ids are at most {MAX_ID}", field=name)


def _not_found(_instance: Any, request: IRequest, _failure: Failure) -> bytes:
    return write_json(request, 404, {"error": "Not found", "type": "not_found"})


def _not_allowed(_instance: Any, request: IRequest, _failure: Failure) -> bytes:
    return write_json(request, 405, {"error": "Method not allowed", "type": "method_not_allowed"})


def make_app() -> Klein:
    """A Klein app whose unmatched paths and methods answer in the console's JSON shape."""
    app = Klein()
    app.url_map.strict_slashes = False
    app.url_map.converters["int"] = IdConverter
    app.handle_errors(NotFound)(_not_found)  # type: ignore[arg-type]
    app.handle_errors(MethodNotAllowed)(_not_allowed)  # type: ignore[arg-type]
    return app
