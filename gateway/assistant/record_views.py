"""The wire form of runs, run events and sessions (agents contract §0, §1.6, §1.9, §1.10).

Timestamps are RFC 3339 with fractional seconds and offset; optional ones are omitted when
unset; money is a minimal decimal string.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from gateway.billing.money import format_nanos
from gateway.store.assistant.rows import MessageRow, RunEventRow, RunRow
from gateway.store.assistant.sessions import StoredSession


def timestamp(value: datetime) -> str:
    return value.isoformat(timespec="microseconds")


def _optional(view: dict[str, Any], key: str, value: datetime | None) -> None:
    if value is not None:
        view[key] = timestamp(value)


def run_view(run: RunRow) -> dict[str, Any]:
    view: dict[str, Any] = {
        "id": run.id, "session_id": run.session_id,
        "assistant_message_id": run.assistant_message_id, "mode": run.mode,
        "status": run.status, "status_message": run.status_message,
        "current_round": run.current_round, "cost": format_nanos(run.cost_nanos),
        "tool_calls": run.tool_calls, "tool_call_details": run.tool_call_details,
        "created_at": timestamp(run.created_at), "updated_at": timestamp(run.updated_at)}
    if run.error_message:
        view["error_message"] = run.error_message
    _optional(view, "started_at", run.started_at)
    _optional(view, "finished_at", run.finished_at)
    return view


def event_view(event: RunEventRow) -> dict[str, Any]:
    return {"id": event.id, "run_id": event.run_id, "session_id": event.session_id,
            "seq": event.seq, "event": event.event, "payload": event.payload,
            "created_at": timestamp(event.created_at)}


def message_view(message: MessageRow) -> dict[str, Any]:
    parts = message.content_parts or (
        [{"round": 1, "content": message.content}] if message.content else [])
    return {"id": message.id, "role": message.role, "content": message.content,
            "content_parts": parts, "tool_calls": message.tool_calls,
            "created_at": timestamp(message.created_at),
            "updated_at": timestamp(message.updated_at)}


def session_view(stored: StoredSession) -> dict[str, Any]:
    s = stored.session
    view: dict[str, Any] = {
        "id": s.id, "title": s.title, "messages": [message_view(m) for m in stored.messages],
        "run_mode": s.run_mode, "agent_id": s.agent_id, "skill_ids": s.skill_ids,
        "mcp_server_ids": s.mcp_server_ids, "knowledge_base_ids": s.knowledge_base_ids,
        "connector_device_id": s.connector_device_id,
        "connector_workspace_path": s.connector_workspace_path,
        "cloud_sandbox_id": s.cloud_sandbox_id,
        "connector_auto_approve": s.connector_approval_mode == "full_access",
        "connector_approval_mode": s.connector_approval_mode,
        "connector_command_prefixes": s.connector_command_prefixes,
        "model_name": s.model_name, "model": s.model_name, "max_tokens": s.max_tokens,
        "temperature": s.temperature, "reasoning_effort": s.reasoning_effort,
        "auto_compress_context": s.auto_compress_context,
        "disabled_tool_groups": s.disabled_tool_groups, "folder_id": s.folder_id,
        "metadata": s.metadata,
        "created_at": timestamp(s.created_at), "updated_at": timestamp(s.updated_at)}
    if s.agent_group_id:
        view["agent_group_id"] = s.agent_group_id
    if s.user_channel_id:
        view["user_channel_id"] = s.user_channel_id
    if stored.latest_run is not None:
        view["latest_run"] = run_view(stored.latest_run)
    return view
