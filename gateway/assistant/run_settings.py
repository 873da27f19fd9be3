"""The admin switches a completion or a run reads (agents contract §1.1, [P-1]).

Stored as ``advanced_chat_<field>`` rows of ``settings``; a missing row means the contract's
default (most switches default to *on*, which the generic settings reader cannot know).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from gateway.settings.spec import parse_bool
from gateway.settings.store import Settings

PREFIX = "advanced_chat_"
CONNECTOR_SWITCHES = ("list_files", "read_file", "write_file", "replace_text", "run_command",
                      "web_search", "static_site")


def _flag(settings: Settings, field: str, default: bool) -> bool:
    return parse_bool(settings.raw(PREFIX + field), default)


def _int(settings: Settings, field: str, default: int) -> int:
    raw = settings.raw(PREFIX + field)
    try:
        return int(raw) if raw is not None else default
    except ValueError:
        return default


def _json_list(settings: Settings, field: str) -> list[Any]:
    value = settings.json(PREFIX + field, [])
    return value if isinstance(value, list) else []


@dataclass(frozen=True)
class RunSettings:
    enabled: bool
    assistant_mode_enabled: bool
    mcp_tools_enabled: bool
    default_model: str
    default_system_prompt: str
    assistant_run_timeout: int
    agent_group_run_timeout: int
    builtin_mcp_servers: list[dict[str, Any]]
    #: the seven ``assistant_connector_<name>_enabled`` switches by name
    connector_switches: dict[str, bool]

    @property
    def workspace_tools_enabled(self) -> bool:
        return any(self.connector_switches.values())

    @classmethod
    def read(cls, settings: Settings) -> RunSettings:
        return cls(
            enabled=_flag(settings, "enabled", True),
            assistant_mode_enabled=_flag(settings, "assistant_mode_enabled", True),
            mcp_tools_enabled=_flag(settings, "assistant_mcp_tools_enabled", True),
            default_model=(settings.raw(PREFIX + "default_model") or "").strip(),
            default_system_prompt=settings.raw(PREFIX + "default_system_prompt") or "",
            assistant_run_timeout=_int(settings, "assistant_run_timeout_seconds", 1800),
            agent_group_run_timeout=_int(settings, "agent_group_run_timeout_seconds", 3600),
            builtin_mcp_servers=[s for s in _json_list(settings, "builtin_mcp_servers")
                                 if isinstance(s, dict) and s.get("id")],
            connector_switches={name: _flag(settings, f"assistant_connector_{name}_enabled", True)
                                for name in CONNECTOR_SWITCHES},
        )
