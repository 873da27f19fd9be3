"""Typed rows of the assistant tables: one frozen dataclass per table, fields = columns.

Stores hand these (never live ``Result`` objects) back to the reactor thread.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from datetime import datetime
from typing import Any, TypeVar

R = TypeVar("R")

#: the largest value of an ``Integer`` key (PostgreSQL refuses a bigger number outright)
MAX_INT_KEY = 2**31 - 1


def numeric_key(text: str) -> int | None:
    """A client id of a numbered record as its key; None when it cannot be one."""
    if not (text.isascii() and text.isdigit()) or len(text) > 10:
        return None
    number = int(text)
    return number if 0 < number <= MAX_INT_KEY else None


def row_of(cls: type[R], mapping: Mapping[Any, Any]) -> R:
    """A typed row from a result mapping (``RowMapping`` or a plain dict)."""
    names = {f.name for f in fields(cls)}  # type: ignore[arg-type]
    return cls(**{name: mapping[name] for name in names})


@dataclass(frozen=True)
class UserSettingsRow:
    user_id: int
    title_model_name: str
    title_user_channel_id: int
    title_generation_scope: str
    connector_approval_agent_id: str
    custom_mcp_servers: list[dict[str, Any]]
    created_at: datetime
    updated_at: datetime


@dataclass(frozen=True)
class AgentRow:
    id: int
    user_id: int
    is_default: bool
    name: str
    description: str
    prompt: str
    default_model: str
    user_channel_id: int
    stream: bool
    enabled: bool
    visibility: str
    skill_ids: list[str]
    mcp_server_ids: list[str]
    knowledge_base_ids: list[str]
    preset_messages: list[dict[str, str]]
    tools: list[str]
    created_at: datetime
    updated_at: datetime

    @property
    def key(self) -> str:
        """The id clients use: ``"default"`` or the number as a string."""
        return "default" if self.is_default else str(self.id)


@dataclass(frozen=True)
class SkillRow:
    id: int
    user_id: int
    name: str
    description: str
    prompt: str
    content: str
    enabled: bool
    mcp_server_ids: list[str]
    created_at: datetime
    updated_at: datetime

    @property
    def key(self) -> str:
        return str(self.id)


@dataclass(frozen=True)
class MessageRow:
    session_id: str
    id: str
    position: int
    role: str
    content: str
    content_parts: list[dict[str, Any]]
    tool_calls: list[dict[str, Any]]
    created_at: datetime
    updated_at: datetime


@dataclass(frozen=True)
class SessionRow:
    id: str
    user_id: int
    title: str
    run_mode: str
    agent_id: str
    agent_group_id: str
    skill_ids: list[str]
    mcp_server_ids: list[str]
    knowledge_base_ids: list[str]
    connector_device_id: str
    connector_workspace_path: str
    cloud_sandbox_id: str
    connector_approval_mode: str
    connector_command_prefixes: list[str]
    model_name: str
    user_channel_id: int
    max_tokens: int
    temperature: float | None
    reasoning_effort: str
    auto_compress_context: bool
    disabled_tool_groups: list[str]
    folder_id: str
    metadata: dict[str, Any]
    internal: bool
    created_at: datetime
    updated_at: datetime


@dataclass(frozen=True)
class RunRow:
    id: str
    user_id: int
    session_id: str
    assistant_message_id: str
    mode: str
    status: str
    status_message: str
    current_round: int
    error_message: str
    cost_nanos: int
    tool_calls: int
    tool_call_details: list[dict[str, Any]]
    request: dict[str, Any]
    node_name: str
    lease_expires_at: datetime | None
    deadline_at: datetime | None
    started_at: datetime | None
    finished_at: datetime | None
    created_at: datetime
    updated_at: datetime

    @property
    def active(self) -> bool:
        return self.status in ACTIVE_RUN_STATUSES


ACTIVE_RUN_STATUSES = ("queued", "running")
TERMINAL_RUN_STATUSES = ("completed", "failed", "cancelled")


@dataclass(frozen=True)
class RunEventRow:
    id: int
    run_id: str
    session_id: str
    seq: int
    event: str
    payload: Any
    created_at: datetime
