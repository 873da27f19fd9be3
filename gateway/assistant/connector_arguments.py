"""Argument schemas and checks of the connector tools (agents contract §1.8 step 4, §2.6).

The same check runs on the model's arguments and on a user's adjusted input at approval
([P-15]), so an adjusted ``run_command`` still needs a command and paths stay relative when a
workspace is set.  Returns the payload the device receives (defaults filled in, unknown keys
dropped).
"""

from __future__ import annotations

from typing import Any

from gateway.assistant.tool_set import BadArguments, object_schema

_STRING = {"type": "string"}


def _int_schema(low: int, high: int) -> dict[str, Any]:
    return {"type": "integer", "minimum": low, "maximum": high}


SCHEMAS: dict[str, dict[str, Any]] = {
    "list_files": object_schema({"path": _STRING, "max_entries": _int_schema(1, 500)}),
    "read_file": object_schema({"path": _STRING, "max_bytes": _int_schema(1, 200000)},
                               ["path"]),
    "write_file": object_schema({"path": _STRING, "content": _STRING,
                                 "overwrite": {"type": "boolean"},
                                 "create_dirs": {"type": "boolean"}}, ["path", "content"]),
    "replace_text": object_schema({
        "path": _STRING, "old_text": _STRING, "new_text": _STRING,
        "replacements": {"type": "array", "items": object_schema(
            {"path": _STRING, "old_text": _STRING, "new_text": _STRING},
            ["old_text", "new_text"])}}),
    "run_command": object_schema({"command": _STRING, "timeout_sec": _int_schema(1, 120)},
                                 ["command"]),
    "web_search": object_schema({
        "query": _STRING,
        "engine": {"type": "string", "enum": ["auto", "duckduckgo", "bing", "baidu", "google"]},
        "max_results": _int_schema(1, 10), "language": _STRING, "region": _STRING,
        "time_range": {"type": "string", "enum": ["day", "week", "month", "year"]}},
        ["query"]),
    "web_fetch": object_schema({"url": _STRING, "max_bytes": _int_schema(1000, 200000)},
                               ["url"]),
}


def _path(args: dict[str, Any], workspace: str, *, required: bool, key: str = "path") -> str:
    value = args.get(key, "")
    if not isinstance(value, str) or (required and not value.strip()):
        raise BadArguments(f"{key} must be a non-empty string")
    if workspace and value.startswith(("/", "\\")):
        raise BadArguments("path must be relative to the workspace")
    return value


def _text(args: dict[str, Any], key: str, *, required: bool = True) -> str:
    value = args.get(key, "")
    if not isinstance(value, str) or (required and not value.strip()):
        raise BadArguments(f"{key} must be a non-empty string")
    return value


def _bounded(args: dict[str, Any], key: str, low: int, high: int, default: int) -> int:
    value = args.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise BadArguments(f"{key} must be an integer between {low} and {high}")
    return value


def _flag(args: dict[str, Any], key: str) -> bool:
    value = args.get(key, False)
    if not isinstance(value, bool):
        raise BadArguments(f"{key} must be a boolean")
    return value


def _replacement(item: Any, workspace: str) -> dict[str, str]:
    if not isinstance(item, dict):
        raise BadArguments("replacements must be objects")
    return {"path": _path(item, workspace, required=False),
            "old_text": _text(item, "old_text"), "new_text": _text(item, "new_text",
                                                                   required=False)}


def check_arguments(action: str, args: dict[str, Any], workspace: str) -> dict[str, Any]:
    if action == "list_files":
        return {"path": _path(args, workspace, required=False),
                "max_entries": _bounded(args, "max_entries", 1, 500, 100)}
    if action == "read_file":
        return {"path": _path(args, workspace, required=True),
                "max_bytes": _bounded(args, "max_bytes", 1, 200000, 120000)}
    if action == "write_file":
        return {"path": _path(args, workspace, required=True),
                "content": _text(args, "content", required=False),
                "overwrite": _flag(args, "overwrite"), "create_dirs": _flag(args, "create_dirs")}
    if action == "replace_text":
        replacements = args.get("replacements")
        if isinstance(replacements, list) and replacements:
            return {"path": _path(args, workspace, required=False),
                    "replacements": [_replacement(r, workspace) for r in replacements]}
        return {"path": _path(args, workspace, required=True),
                "old_text": _text(args, "old_text"),
                "new_text": _text(args, "new_text", required=False)}
    if action == "run_command":
        return {"command": _text(args, "command").strip(),
                "timeout_sec": _bounded(args, "timeout_sec", 1, 120, 30)}
    if action == "web_search":
        payload: dict[str, Any] = {"query": _text(args, "query"),
                                   "max_results": _bounded(args, "max_results", 1, 10, 5)}
        for key in ("engine", "language", "region", "time_range"):
            if isinstance(args.get(key), str) and args[key]:
                payload[key] = args[key]
        return payload
    if action == "web_fetch":
        return {"url": _text(args, "url"),
                "max_bytes": _bounded(args, "max_bytes", 1000, 200000, 120000)}
    raise BadArguments(f"unsupported action \"{action}\"")
