"""``GET /openapi.json``: the generated document, without authentication.

The document is built on the first request, when the root resource is complete, and kept:
the route tables do not change while the process runs.
"""

from __future__ import annotations

from typing import Any

import orjson
from twisted.web.resource import Resource

from console.openapi.document import build_document


class OpenApiDocument(Resource):
    """The OpenAPI 3.1 document of every route under ``root``."""

    isLeaf = True

    def __init__(self, root: Resource, version: str) -> None:
        super().__init__()
        self._root = root
        self._version = version
        self._body: bytes | None = None

    def render_GET(self, request: Any) -> bytes:
        if self._body is None:
            self._body = orjson.dumps(build_document(self._root, self._version))
        request.setResponseCode(200)
        request.setHeader(b"content-type", b"application/json")
        request.setHeader(b"cache-control", b"no-cache")
        return self._body
