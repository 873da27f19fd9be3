"""From a prepared completion to the loop's inputs: tool set, first messages, session columns.

Shared by chat mode (in the HTTP request) and assistant runs (in the background worker) so
both offer the same tools under the same rules (agents contract §1.7 "Tools", §1.8 steps 3-6).
"""

from __future__ import annotations

from typing import Any

from gateway.assistant.builtin_tools import TaskChecklist, ask_user_tool, skill_tool, task_tools
from gateway.assistant.connector_mcp import ConnectorMcpTools
from gateway.assistant.connector_tools import ConnectorTools
from gateway.assistant.ids import MESSAGE, random_id
from gateway.assistant.mcp_servers import CONNECTOR
from gateway.assistant.mcp_tools import McpClient, McpClientFactory, mcp_tools
from gateway.assistant.preparation import Prepared
from gateway.assistant.prompt import conversation, system_prompt
from gateway.assistant.tool_set import ToolSet

TITLE_CHARS = 28
#: the connector tools a studio chief keeps: read-only actions and run_command (§1.12)
CHIEF_CONNECTOR_TOOLS = frozenset({
    "workspace_list_files", "workspace_read_file", "workspace_list_windows_drives",
    "workspace_run_command", "workspace_web_search", "workspace_web_fetch",
    "list_static_sites"})


async def build_tools(prepared: Prepared, mcp: McpClientFactory | None,
                      connector: ConnectorTools | None = None) -> ToolSet:
    """MCP tools (listing failures raise ``McpUnavailable``), the connector device's tools,
    skills, and the tools that need a session; then the request's and agent's group filters."""
    tools = ToolSet()
    team = prepared.team
    if team is not None and team.intake:
        return tools  # §4.16: the intake desk gets only the intake tools (added by the studio)
    tools.extend(await mcp_tools(prepared.servers, through_device(mcp, connector)))
    if connector is not None:
        tools.extend(tool for tool in connector.tools(prepared.connector_switches)
                     if team is None or tool.name in CHIEF_CONNECTOR_TOOLS)
    skill = skill_tool(prepared.skill_bodies())
    if skill is not None:
        tools.add(skill)
    if prepared.request.session_id:
        tools.extend(task_tools(TaskChecklist()))
        tools.add(ask_user_tool())
    return tools.filtered(prepared.request.disabled_tool_groups, prepared.agent_tools)


def through_device(mcp: McpClientFactory | None,
                    connector: ConnectorTools | None) -> McpClientFactory | None:
    """``connector``-type servers go through the run's device when it has one (§1.3)."""
    if connector is None or mcp is None:
        return mcp

    def make(server: dict[str, Any]) -> McpClient:
        if server.get("type") == CONNECTOR:
            return ConnectorMcpTools(connector.tasks, connector.target, server)
        return mcp(server)

    return make


def first_messages(prepared: Prepared, tools: ToolSet,
                   connector: ConnectorTools | None = None) -> list[dict[str, Any]]:
    request = prepared.request
    system = system_prompt(
        admin_prompt=prepared.admin_prompt, agent_prompt=prepared.agent_prompt,
        skills=prepared.skill_prompts(), assistant_mode=request.background,
        tool_names=tools.tools,
        connector_description=connector.target.describe() if connector else "",
        studio_sections=_studio_sections(prepared))
    history = [{"role": m["role"], "content": m["content"]} for m in request.messages]
    return conversation(system, prepared.presets, history,
                        auto_compress=request.auto_compress_context)


def _studio_sections(prepared: Prepared) -> tuple[str, ...]:
    team = prepared.team
    if team is None:
        return ()
    return (team.identity(),) if team.intake else (team.identity(), team.roster())


def default_title(prepared: Prepared) -> str:
    request = prepared.request
    if request.title:
        return request.title
    for message in reversed(request.messages):
        if message["role"] == "user" and message["content"].strip():
            return message["content"].strip()[:TITLE_CHARS]
    return "Assistant session" if request.background else "New session"


def session_columns(prepared: Prepared) -> dict[str, Any]:
    request = prepared.request
    return {
        "title": default_title(prepared), "run_mode": request.mode,
        "agent_id": prepared.agent_key, "agent_group_id": request.agent_group_id,
        "skill_ids": prepared.skill_ids(), "mcp_server_ids": [
            sid for sid in prepared.server_ids() if not sid.startswith("tmp-")],
        "connector_device_id": request.connector_device_id,
        "connector_workspace_path": request.connector_workspace_path,
        "cloud_sandbox_id": request.cloud_sandbox_id,
        "connector_approval_mode": request.connector_approval_mode,
        "connector_command_prefixes": request.connector_command_prefixes,
        "model_name": prepared.model, "user_channel_id": request.user_channel_id,
        "max_tokens": request.max_tokens, "temperature": request.temperature,
        "reasoning_effort": request.reasoning_effort,
        "auto_compress_context": request.auto_compress_context,
        "disabled_tool_groups": request.disabled_tool_groups,
        "internal": prepared.team is not None and prepared.team.internal}


def session_messages(prepared: Prepared) -> tuple[list[dict[str, Any]], str]:
    """The request's messages plus the empty assistant message the answer goes into."""
    answer_id = random_id(MESSAGE)
    messages = [dict(m) for m in prepared.request.messages]
    messages.append({"id": answer_id, "role": "assistant", "content": ""})
    return messages, answer_id
