"""Shared pieces of the OpenAPI tests: fetching the document from a running app.

Not a test module itself (no ``test_`` prefix), so nothing here is collected twice.
"""

from __future__ import annotations

import re
from typing import Any

import treq
from jsonschema import Draft202012Validator

from tests.support.app import AppTestCase, Response

_PARAMETER = re.compile(r"\{[^}]*\}")


def shape(path: str) -> str:
    """A path with every parameter name erased: ``/a/{id}`` and ``/a/:item_id`` compare equal."""
    return _PARAMETER.sub("{}", re.sub(r":(\w+)", r"{\1}", path))


def answer_schema(document: dict[str, Any], method: str, path: str,
                  status: int) -> dict[str, Any] | None:
    """The documented JSON schema of a ``status`` answer (``default`` for errors), refs
    resolved; ``None`` when that answer is documented without a JSON body."""
    responses = document["paths"][path][method.lower()]["responses"]
    response = responses.get(str(status)) or (
        responses.get("default") if status >= 400 else None)
    if response is None:
        raise AssertionError(f"{method} {path}: {status} is not documented")
    content = response.get("content", {}).get("application/json")
    if content is None:
        return None
    schema: dict[str, Any] = content["schema"]
    if "$ref" in schema:
        schema = document["components"]["schemas"][schema["$ref"].rsplit("/", 1)[-1]]
    return schema


def schema_errors(schema: dict[str, Any], value: Any) -> list[str]:
    return [error.message for error in Draft202012Validator(schema).iter_errors(value)]


def operations(document: dict[str, Any]) -> set[tuple[str, str]]:
    """Every documented ``(METHOD, path)``."""
    return {(method.upper(), path) for path, entry in document["paths"].items()
            for method in entry}


class OpenApiCase(AppTestCase):
    async def probe(self, method: str, path: str, *, token: str | None = None) -> Response:
        """One request as a client would send it, redirects not followed (a 302 is an answer)."""
        headers = {"X-Forwarded-For": [self.fresh_ip()]}
        if token:
            headers["Authorization"] = [f"Bearer {token}"]
        body = None
        if method in ("POST", "PUT"):
            body = b"{}"
            headers["Content-Type"] = ["application/json"]
        response = await treq.request(method, (self.base + path).encode(), data=body,
                                      headers=headers, pool=self.pool, allow_redirects=False)
        return Response(response.code, response.headers, await treq.content(response))

    async def enable_switched_routes(self, token: str) -> None:
        """Turn on the routes that answer an unknown-path 404 while their setting is off."""
        response = await self.call("PUT", "/api/settings", {
            "pricing_endpoint_enabled": True, "status_monitor_enabled": True}, token=token)
        assert response.status == 200, response

    async def document(self) -> dict[str, Any]:
        response = await self.call("GET", "/openapi.json")
        self.assertEqual(response.status, 200, response)
        result: dict[str, Any] = response.json()
        return result
