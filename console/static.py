"""Tiny fixed resources: the JSON 404 used for unknown console and gateway paths."""

from __future__ import annotations

from typing import Any

import orjson
from twisted.web.resource import Resource


class JsonNotFound(Resource):
    isLeaf = True

    def render(self, request: Any) -> bytes:
        request.setResponseCode(404)
        request.setHeader(b"content-type", b"application/json")
        return orjson.dumps({"error": "Not found", "type": "not_found"})
