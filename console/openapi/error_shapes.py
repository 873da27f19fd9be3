"""The error body of each route family (gateway contract §0, console contract §1.1)."""

from __future__ import annotations

from typing import Any

from console.openapi.json_schema import INTEGER, STRING, obj

ERROR_SCHEMAS: dict[str, dict[str, Any]] = {
    "ConsoleError": obj(
        ("error", "type"), error={"type": "string", "description": "human message"},
        type={"type": "string", "description": "machine code"},
        field={"type": "string", "description": "the invalid field (validation errors)"}),
    "OpenAIError": obj(("error",), error=obj(
        ("message", "type"), message=STRING, type=STRING,
        code={"type": ["string", "null"]}, param={"type": ["string", "null"]})),
    "MessagesError": obj(
        ("type", "error"), type={"const": "error"},
        error=obj(("type", "message"), type=STRING, message=STRING)),
    "ModelActionError": obj(("error",), error=obj(
        ("code", "message", "status"), code=INTEGER, message=STRING, status={
            "type": "string", "enum": ["INVALID_ARGUMENT", "UNAUTHENTICATED",
                                       "PERMISSION_DENIED", "NOT_FOUND", "RESOURCE_EXHAUSTED",
                                       "INTERNAL", "UNAVAILABLE"]})),
}
