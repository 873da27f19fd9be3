"""The administrator's assistant settings (agents contract §1.1, [P-1], [P-40]).

Stored as ``advanced_chat_<field>`` rows of the key/value settings table, so every node reads
them from its in-memory settings snapshot.  ``plan_update`` checks a whole PUT body before
anything is written (the origin saved keys one by one and could leave a half-applied body) and
returns the rows to write; ``read`` turns the stored text back into the full typed object.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import orjson

from gateway.assistant import mcp_servers
from gateway.assistant.ids import mcp_server_id

PREFIX = "advanced_chat_"

DEFAULT_TYPES = ["text/plain", "text/markdown", "application/json", "text/csv", "image/png",
                 "image/jpeg", "application/pdf"]
CONNECTOR_SWITCHES = (
    "assistant_connector_list_files_enabled", "assistant_connector_read_file_enabled",
    "assistant_connector_write_file_enabled", "assistant_connector_replace_text_enabled",
    "assistant_connector_run_command_enabled", "assistant_connector_web_search_enabled",
    "assistant_connector_static_site_enabled",
)


class SettingsRefused(ValueError):
    """A PUT body that cannot be saved (message verbatim from the contract)."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field


@dataclass(frozen=True)
class Field:
    name: str
    kind: str  # bool | int | text | types | servers
    default: Any
    low: int = 0
    high: int = 0
    message: str = ""


def _switch(name: str, default: bool) -> Field:
    return Field(name, "bool", default)


FIELDS: tuple[Field, ...] = (
    _switch("enabled", True),
    Field("default_model", "text", "", high=100, message="Default model is too long"),
    Field("default_system_prompt", "text", "", high=20000,
          message="Default system prompt is too long"),
    Field("attachment_max_mb", "int", 10, 1, 100,
          "Attachment size must be between 1 and 100 MB"),
    Field("attachment_allowed_types", "types", DEFAULT_TYPES,
          message="At least one attachment type is required"),
    _switch("file_storage_enabled", False),
    Field("file_storage_total_mb", "int", 100, 1, 102400,
          "File storage quota must be between 1 and 102400 MB"),
    _switch("file_storage_auto_save_images_enabled", False),
    _switch("file_storage_auto_save_videos_enabled", False),
    Field("builtin_mcp_servers", "servers", [], message=mcp_servers.INVALID),
    _switch("assistant_mode_enabled", True),
    Field("assistant_run_timeout_seconds", "int", 1800, 300, 86400,
          "Assistant run timeout must be between 300 and 86400 seconds"),
    Field("agent_group_run_timeout_seconds", "int", 3600, 300, 86400,
          "Studio run timeout must be between 300 and 86400 seconds"),
    _switch("assistant_mcp_tools_enabled", True),
    *(_switch(name, True) for name in CONNECTOR_SWITCHES),
    _switch("scheduled_tasks_enabled", True),
    _switch("message_channel_enabled", False),
    _switch("message_delivery_enabled", True),
    _switch("delivery_system_smtp_enabled", True),
    Field("sandbox_storage_settle_interval_seconds", "int", 3600, 10, 86400,
          "Storage settle interval must be between 10 and 86400 seconds"),
)
BY_NAME = {f.name: f for f in FIELDS}


def _from_text(field: Field, text: str | None) -> Any:
    if text is None:
        return field.default
    try:
        if field.kind == "bool":
            return text == "true"
        if field.kind == "int":
            return int(text)
        if field.kind in ("types", "servers"):
            value = orjson.loads(text)
            return value if isinstance(value, list) else field.default
    except (ValueError, orjson.JSONDecodeError):
        return field.default
    return text


def read(raw: Callable[[str], str | None]) -> dict[str, Any]:
    """The full settings object (admin view: builtin servers in stored form, headers included)
    from ``raw(key)`` (the settings snapshot's stored text, None when unset)."""
    return {f.name: _from_text(f, raw(PREFIX + f.name)) for f in FIELDS}


def _integer(field: Field, value: Any) -> int:
    if isinstance(value, bool):
        raise SettingsRefused(field.name, field.message)
    if isinstance(value, str):
        value = value.strip()
        if value.lstrip("-").isascii() and value.lstrip("-").isdigit() and len(value) < 20:
            value = int(value)
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if not isinstance(value, int) or not field.low <= value <= field.high:
        raise SettingsRefused(field.name, field.message)
    return value


def _types(field: Field, value: Any) -> list[str]:
    if not isinstance(value, list):
        raise SettingsRefused(field.name, field.message)
    kept: list[str] = []
    for item in value:
        if not isinstance(item, str):
            continue
        word = item.strip().lower()
        if word and len(word) <= 100 and word not in kept:
            kept.append(word)
    if not kept:
        raise SettingsRefused(field.name, field.message)
    return kept[:50]


def _servers(field: Field, value: Any, unix_nanos: int) -> list[dict[str, Any]]:
    try:
        return mcp_servers.read_servers(value, lambda i: mcp_server_id(unix_nanos, i))
    except mcp_servers.InvalidServers:
        raise SettingsRefused(field.name, field.message) from None


def _checked(field: Field, value: Any, unix_nanos: int) -> str:
    """The stored text of one field's new value (raises ``SettingsRefused``)."""
    if field.kind == "bool":
        if not isinstance(value, bool):
            raise SettingsRefused(field.name, f"{field.name} must be a boolean")
        return "true" if value else "false"
    if field.kind == "int":
        return str(_integer(field, value))
    if field.kind == "text":
        if not isinstance(value, str):
            raise SettingsRefused(field.name, f"{field.name} must be a string")
        value = value.strip()
        if len(value) > field.high:
            raise SettingsRefused(field.name, field.message)
        return value
    if field.kind == "types":
        return orjson.dumps(_types(field, value)).decode()
    return orjson.dumps(_servers(field, value, unix_nanos)).decode()


def plan_update(body: Mapping[str, Any], unix_nanos: int) -> dict[str, str]:
    """The settings rows a partial PUT writes; unknown keys are ignored (a UI may send the GET
    object back).  Raises ``SettingsRefused`` for the first bad field; writes nothing."""
    return {PREFIX + name: _checked(BY_NAME[name], value, unix_nanos)
            for name, value in body.items() if name in BY_NAME}


def workspace_tools_enabled(values: Mapping[str, Any]) -> bool:
    """False when every connector switch is off (§1.1: ``Workspace tools are disabled``)."""
    return any(values[name] for name in CONNECTOR_SWITCHES)
