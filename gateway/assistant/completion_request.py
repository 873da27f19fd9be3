"""The body of ``POST /api/user/advanced-chat/completions``, read and checked (contract §1.7).

Pure: turns the JSON object into a ``CompletionRequest`` or raises ``Refused`` with the
contract's message.  Clamping (max_tokens, temperature) and coercion (roles, legacy approval
flags) happen here so nothing downstream sees a raw client value.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from gateway.assistant.ids import MESSAGE, random_id
from gateway.store.assistant.refused import Refused, invalid

MODES = ("chat", "assistant", "agent_group")
MAX_MESSAGES = 50
MAX_TOKENS = 200000
EFFORTS = ("minimal", "low", "medium", "high")
APPROVAL_MODES = ("manual", "full_access", "assistant")
MAX_SESSION_ID = 80
MAX_MODEL = 100
MAX_WORKSPACE = 1000


@dataclass
class CompletionRequest:
    mode: str
    model: str
    messages: list[dict[str, Any]]
    stream: bool
    session_id: str = ""
    title: str = ""
    agent_id: str = "default"
    agent_group_id: str = ""
    skill_ids: list[str] = field(default_factory=list)
    mcp_server_ids: list[str] = field(default_factory=list)
    mcp_servers: list[Any] = field(default_factory=list)
    user_channel_id: int = 0
    connector_device_id: str = ""
    connector_workspace_path: str = ""
    cloud_sandbox_id: str = ""
    connector_approval_mode: str = "manual"
    connector_command_prefixes: list[str] = field(default_factory=list)
    max_tokens: int = 0
    temperature: float | None = None
    reasoning_effort: str = ""
    auto_compress_context: bool = False
    disabled_tool_groups: list[str] = field(default_factory=list)

    @property
    def background(self) -> bool:
        return self.mode != "chat"

    def model_options(self, model: str) -> dict[str, Any]:
        options: dict[str, Any] = {"model": model}
        if self.max_tokens:
            options["max_tokens"] = self.max_tokens
        if self.temperature is not None:
            options["temperature"] = self.temperature
        if self.reasoning_effort:
            options["reasoning_effort"] = self.reasoning_effort
        return options


def _text(body: dict[str, Any], key: str) -> str:
    value = body.get(key)
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return str(value)
    return value.strip() if isinstance(value, str) else ""


def _ids(body: dict[str, Any], key: str) -> list[str]:
    value = body.get(key)
    if not isinstance(value, list):
        return []
    out: list[str] = []
    for item in value:
        text = item.get("id") if isinstance(item, dict) else item
        if isinstance(text, (int, str)) and not isinstance(text, bool):
            text = str(text).strip()
            if text and text not in out:
                out.append(text)
    return out


def _int(value: Any) -> int:
    if isinstance(value, bool):
        return 0
    if isinstance(value, (int, float)) and math.isfinite(value):
        return int(value)
    if isinstance(value, str) and value.strip().lstrip("-").isdigit():
        return int(value.strip())
    return 0


def read_messages(items: Any) -> list[dict[str, Any]]:
    """Roles coerced, empty items dropped, the last 50 kept; each with a message id."""
    if not isinstance(items, list):
        return []
    messages: list[dict[str, Any]] = []
    for item in items:
        if not isinstance(item, dict):
            continue
        content = item.get("content")
        content = content if isinstance(content, str) else ""
        tool_calls = item.get("tool_calls")
        tool_calls = [c for c in tool_calls if isinstance(c, dict)] if isinstance(
            tool_calls, list) else []
        if not content.strip() and not tool_calls:
            continue
        given = item.get("id")
        message_id = given.strip() if isinstance(given, str) else ""
        if not message_id or len(message_id) > MAX_SESSION_ID:
            message_id = random_id(MESSAGE)
        parts = item.get("content_parts")
        messages.append({
            "id": message_id, "role": "assistant" if item.get("role") == "assistant" else "user",
            "content": content, "tool_calls": tool_calls,
            "content_parts": [p for p in parts if isinstance(p, dict)]
            if isinstance(parts, list) else []})
    return messages[-MAX_MESSAGES:]


def valid_session_id(session_id: str) -> bool:
    return (0 < len(session_id) <= MAX_SESSION_ID
            and not any(ch in session_id for ch in "/\\?#"))


def read_completion(body: dict[str, Any]) -> CompletionRequest:
    """Checks in the contract's order: messages, then mode and model."""
    messages = read_messages(body.get("messages"))
    if not messages:
        raise invalid("Messages are required")
    mode = _text(body, "mode") or "chat"
    if mode not in MODES:
        raise invalid("mode must be chat, assistant or agent_group")
    model = _text(body, "model")
    if len(model) > MAX_MODEL:
        raise invalid("Model name is too long")
    request = CompletionRequest(mode=mode, model=model, messages=messages,
                                stream=body.get("stream") is True)
    if "session_id" in body:
        session_id = body.get("session_id")
        session_id = session_id.strip() if isinstance(session_id, str) else ""
        if session_id and not valid_session_id(session_id):
            raise invalid("Invalid session id")
        request.session_id = session_id
    request.title = _text(body, "title")[:200]
    request.agent_id = _text(body, "agent_id") or ("" if mode == "agent_group" else "default")
    request.agent_group_id = _text(body, "agent_group_id")
    request.skill_ids = _ids(body, "skill_ids")
    request.mcp_server_ids = _ids(body, "mcp_server_ids")
    servers = body.get("mcp_servers")
    request.mcp_servers = servers if isinstance(servers, list) else []
    request.user_channel_id = max(0, _int(body.get("user_channel_id") or body.get("channel_id")))
    request.max_tokens = min(MAX_TOKENS, max(0, _int(body.get("max_tokens"))))
    temperature = body.get("temperature")
    if isinstance(temperature, (int, float)) and not isinstance(temperature, bool) \
            and math.isfinite(temperature):
        request.temperature = min(2.0, max(0.0, float(temperature)))
    effort = _text(body, "reasoning_effort")
    request.reasoning_effort = effort if effort in EFFORTS else ""
    request.auto_compress_context = body.get("auto_compress_context") is True
    request.disabled_tool_groups = _ids(body, "disabled_tool_groups")
    if mode != "chat":
        _read_connector(body, request)
    return request


def _read_connector(body: dict[str, Any], request: CompletionRequest) -> None:
    request.connector_device_id = _text(body, "connector_device_id")
    request.connector_workspace_path = _text(body, "connector_workspace_path")
    request.cloud_sandbox_id = _text(body, "cloud_sandbox_id")
    if len(request.connector_workspace_path) > MAX_WORKSPACE:
        raise invalid("workspace path is too long")
    approval = _text(body, "connector_approval_mode")
    if approval not in APPROVAL_MODES:
        approval = "full_access" if body.get("connector_auto_approve") is True else "manual"
    request.connector_approval_mode = approval
    request.connector_command_prefixes = _ids(body, "connector_command_prefixes")


__all__ = ["CompletionRequest", "Refused", "read_completion", "read_messages",
           "valid_session_id"]
