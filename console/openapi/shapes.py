"""Every shape the document describes, gathered from the per-area modules.

Keyed by ``(method, path template)``; every key must name a route that exists (the OpenAPI
tests check it, so a removed route cannot leave a stale shape behind).  A route without an
entry takes or returns an open object.
"""

from __future__ import annotations

from typing import Any

from console.openapi import console_shapes, gateway_shapes
from console.openapi.error_shapes import ERROR_SCHEMAS
from console.openapi.json_schema import OPEN_OBJECT, obj

__all__ = ["BINARY", "ERROR_SCHEMAS", "OPEN_OBJECT", "PROBE_ERRORS", "QUERY_PARAMETERS",
           "REDIRECTS", "REQUEST_BODIES", "RESPONSES", "STREAMING", "TEXT_STREAM"]

TEXT_STREAM: dict[str, Any] = {"type": "string",
                               "description": "Server-sent events (with `stream: true`)"}
PROBE_RESPONSES: dict[tuple[str, str], dict[str, Any]] = {
    ("GET", "/healthz"): obj(("status",), status={"const": "ok"}),
    ("GET", "/readyz"): obj(("status",), status={"type": "string", "enum": [
        "ready", "draining", "database unreachable", "migrations pending",
        "shared state unreachable"]}),
    ("GET", "/openapi.json"): obj(("openapi", "info", "paths"), openapi={"type": "string"}),
}
#: the one probe answer that is not a 200: not ready (operations contract §1)
PROBE_ERRORS: dict[tuple[str, str], tuple[str, dict[str, Any]]] = {
    ("GET", "/readyz"): ("503", PROBE_RESPONSES[("GET", "/readyz")]),
}

REQUEST_BODIES = {**console_shapes.REQUEST_BODIES, **gateway_shapes.REQUEST_BODIES}
RESPONSES = {**PROBE_RESPONSES, **console_shapes.RESPONSES, **gateway_shapes.RESPONSES}
STREAMING = gateway_shapes.STREAMING
BINARY = gateway_shapes.BINARY
REDIRECTS = console_shapes.REDIRECTS
QUERY_PARAMETERS = console_shapes.QUERY_PARAMETERS
