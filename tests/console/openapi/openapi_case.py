"""Shared pieces of the OpenAPI tests: fetching the document from a running app.

Not a test module itself (no ``test_`` prefix), so nothing here is collected twice.
"""

from __future__ import annotations

import re
from typing import Any

from tests.support.app import AppTestCase

_PARAMETER = re.compile(r"\{[^}]*\}")


def shape(path: str) -> str:
    """A path with every parameter name erased: ``/a/{id}`` and ``/a/:item_id`` compare equal."""
    return _PARAMETER.sub("{}", re.sub(r":(\w+)", r"{\1}", path))


def operations(document: dict[str, Any]) -> set[tuple[str, str]]:
    """Every documented ``(METHOD, path)``."""
    return {(method.upper(), path) for path, entry in document["paths"].items()
            for method in entry}


class OpenApiCase(AppTestCase):
    async def document(self) -> dict[str, Any]:
        response = await self.call("GET", "/openapi.json")
        self.assertEqual(response.status, 200, response)
        result: dict[str, Any] = response.json()
        return result
