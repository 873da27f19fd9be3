"""The JSON shapes of agents, skills, sessions, messages and runs (agents contract §1.4-§1.9).

Spec and origin spellings are both emitted where the contract says so ([P-4], [P-7]); optional
timestamps and zero channel ids are omitted; money is a minimal decimal string.
"""

from __future__ import annotations

from typing import Any

from console.user_view import timestamp
from gateway.billing.money import format_nanos
from gateway.store.assistant.rows import AgentRow, MessageRow, RunRow, SkillRow
from gateway.store.assistant.sessions import StoredSession


def agent_view(agent: AgentRow) -> dict[str, Any]:
    view: dict[str, Any] = {
        "id": agent.key, "name": agent.name, "description": agent.description,
        "prompt": agent.prompt, "system_prompt": agent.prompt,
        "default_model": agent.default_model, "model": agent.default_model,
        "stream": agent.stream, "enabled": agent.enabled, "tools": list(agent.tools),
        "skill_ids": list(agent.skill_ids), "mcp_server_ids": list(agent.mcp_server_ids),
        "mcp_servers": list(agent.mcp_server_ids),
        "knowledge_base_ids": list(agent.knowledge_base_ids),
        "preset_messages": list(agent.preset_messages), "visibility": agent.visibility,
        "created_at": timestamp(agent.created_at), "updated_at": timestamp(agent.updated_at),
    }
    if agent.user_channel_id:
        view["user_channel_id"] = agent.user_channel_id
    return view


def skill_view(skill: SkillRow) -> dict[str, Any]:
    return {
        "id": skill.key, "user_id": skill.user_id, "name": skill.name,
        "description": skill.description, "prompt": skill.prompt, "content": skill.content,
        "enabled": skill.enabled, "mcp_server_ids": list(skill.mcp_server_ids),
        "created_at": timestamp(skill.created_at), "updated_at": timestamp(skill.updated_at),
    }


def message_view(message: MessageRow) -> dict[str, Any]:
    parts = list(message.content_parts)
    if not parts and message.content:
        parts = [{"round": 1, "content": message.content}]
    return {
        "id": message.id, "role": message.role, "content": message.content,
        "content_parts": parts, "tool_calls": list(message.tool_calls),
        "created_at": timestamp(message.created_at),
        "updated_at": timestamp(message.updated_at),
    }


def run_view(run: RunRow) -> dict[str, Any]:
    view: dict[str, Any] = {
        "id": run.id, "session_id": run.session_id,
        "assistant_message_id": run.assistant_message_id, "mode": run.mode,
        "status": run.status, "status_message": run.status_message,
        "current_round": run.current_round, "cost": format_nanos(run.cost_nanos),
        "tool_calls": run.tool_calls, "tool_call_details": list(run.tool_call_details),
        "created_at": timestamp(run.created_at), "updated_at": timestamp(run.updated_at),
    }
    if run.error_message:
        view["error_message"] = run.error_message
    if run.started_at is not None:
        view["started_at"] = timestamp(run.started_at)
    if run.finished_at is not None:
        view["finished_at"] = timestamp(run.finished_at)
    return view


def session_view(stored: StoredSession) -> dict[str, Any]:
    s = stored.session
    view: dict[str, Any] = {
        "id": s.id, "title": s.title,
        "messages": [message_view(m) for m in stored.messages],
        "run_mode": s.run_mode, "agent_id": s.agent_id,
        "skill_ids": list(s.skill_ids), "mcp_server_ids": list(s.mcp_server_ids),
        "knowledge_base_ids": list(s.knowledge_base_ids),
        "connector_device_id": s.connector_device_id,
        "connector_workspace_path": s.connector_workspace_path,
        "cloud_sandbox_id": s.cloud_sandbox_id,
        "connector_auto_approve": s.connector_approval_mode == "full_access",
        "connector_approval_mode": s.connector_approval_mode,
        "connector_command_prefixes": list(s.connector_command_prefixes),
        "model_name": s.model_name, "model": s.model_name,
        "user_channel_id": s.user_channel_id, "max_tokens": s.max_tokens,
        "temperature": s.temperature, "reasoning_effort": s.reasoning_effort,
        "auto_compress_context": s.auto_compress_context,
        "disabled_tool_groups": list(s.disabled_tool_groups), "folder_id": s.folder_id,
        "metadata": s.metadata, "created_at": timestamp(s.created_at),
        "updated_at": timestamp(s.updated_at),
    }
    if s.run_mode == "agent_group":
        view["agent_group_id"] = s.agent_group_id
    if stored.latest_run is not None:
        view["latest_run"] = run_view(stored.latest_run)
    return view
