"""Assembles the OpenAPI 3.1 document from the walked routes, their families and shapes."""

from __future__ import annotations

import re
from typing import Any

from twisted.web.resource import Resource

from console.openapi import shapes
from console.openapi.families import RouteFamily, classify, security_schemes
from console.openapi.routes import Operation, collect

OPENAPI_VERSION = "3.1.0"
TITLE = "Lockgate"
DESCRIPTION = ("An AI model gateway (`/v1`, `/v1beta`) and its management console "
               "(`/auth`, `/api`). Generated from the route tables of this build.")


PLAIN_TEXT = {"text/plain": {"schema": {"type": "string"}}}


def _operation_id(operation: Operation) -> str:
    words = re.sub(r"[^A-Za-z0-9]+", "_", operation.path).strip("_")
    return f"{operation.method.lower()}_{words or 'root'}"


def _json_content(schema: dict[str, Any]) -> dict[str, Any]:
    return {"application/json": {"schema": schema}}


def _error_responses(operation: Operation, family: RouteFamily) -> dict[str, Any]:
    if family.plain_text:
        return {"default": {"description": "Refused", "content": PLAIN_TEXT}}
    if family.error_schema is None:
        probe_error = shapes.PROBE_ERRORS.get((operation.method, operation.path))
        if probe_error is None:
            return {}
        status, schema = probe_error
        return {status: {"description": "Not ready", "content": _json_content(schema)}}
    return {"default": {
        "description": "An error in the route family's native shape",
        "content": _json_content({"$ref": f"#/components/schemas/{family.error_schema}"})}}


def _success(operation: Operation, family: RouteFamily) -> tuple[str, dict[str, Any]]:
    if operation.path in shapes.REDIRECTS:
        return "302", {"description": "Redirect (the `Location` header)"}
    if family.plain_text:
        return "200", {"description": "Accepted", "content": PLAIN_TEXT}
    if operation.path in shapes.BINARY:
        return "200", {"description": "The upstream's bytes", "content": {
            "application/octet-stream": {"schema": {"type": "string"}}}}
    schema = shapes.RESPONSES.get((operation.method, operation.path), shapes.OPEN_OBJECT)
    content = _json_content(schema)
    if operation.path in shapes.STREAMING:
        content["text/event-stream"] = {"schema": shapes.TEXT_STREAM}
    return "200", {"description": "Success", "content": content}

#: path prefix -> the query parameter every route under it requires (agents contract §4.2)
REQUIRED_QUERY = {"/api/user/personal-company": "studio_id"}


def _operation(operation: Operation) -> dict[str, Any]:
    family = classify(operation.path)
    status, success = _success(operation, family)
    entry: dict[str, Any] = {
        "operationId": _operation_id(operation),
        "tags": [family.tag],
        "security": family.security,
        "responses": {status: success, **_error_responses(operation, family)},
    }
    if operation.summary:
        entry["summary"] = operation.summary
    if family.admin:
        entry["x-lockgate-admin"] = True
    parameters = [{"name": parameter.name, "in": "path", "required": True,
                   "schema": parameter.schema} for parameter in operation.parameters]
    parameters += [{"name": name, "in": "query", "required": False, "schema": schema}
                   for name, schema in shapes.QUERY_PARAMETERS.get(
                       (operation.method, operation.path), [])]
    parameters += [{"name": name, "in": "query", "required": True, "schema": {"type": "string"}}
                   for prefix, name in REQUIRED_QUERY.items()
                   if operation.path == prefix or operation.path.startswith(prefix + "/")]
    if parameters:
        entry["parameters"] = parameters
    body = shapes.REQUEST_BODIES.get((operation.method, operation.path))
    if body is not None:
        media_type, schema = body
        entry["requestBody"] = {"required": True, "content": {media_type: {"schema": schema}}}
    elif operation.method in ("POST", "PUT", "PATCH"):
        entry["requestBody"] = {"required": False,
                                "content": _json_content(shapes.OPEN_OBJECT)}
    return entry


def build_document(root: Resource, version: str) -> dict[str, Any]:
    """The whole document for the resource tree under ``root``."""
    paths: dict[str, dict[str, Any]] = {}
    for operation in collect(root):
        paths.setdefault(operation.path, {})[operation.method.lower()] = _operation(operation)
    return {
        "openapi": OPENAPI_VERSION,
        "info": {"title": TITLE, "version": version, "description": DESCRIPTION},
        "paths": paths,
        "components": {"securitySchemes": security_schemes(),
                       "schemas": dict(shapes.ERROR_SCHEMAS)},
    }
