"""Step 1 of a completion (agents contract §1.7, §1.8 step 1): what the request refers to.

Runs inside one database transaction: the agent (``Agent not found`` / ``Agent is disabled``),
the skills (``Unknown skill``), the MCP servers (referenced + agent's + skills', then
inline temporary ones of [P-3]) and the model (request, else agent, else admin default; [P-1]).
Every refusal is a ``Refused`` with the contract's message, raised before anything is written.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

from gateway.assistant.approval_checker import CheckerAgent
from gateway.assistant.builtin_tools import SkillBody
from gateway.assistant.completion_request import CompletionRequest
from gateway.assistant.mcp_servers import InvalidServers, merged, read_servers
from gateway.assistant.prompt import SkillPrompt
from gateway.assistant.run_settings import RunSettings
from gateway.assistant.sandbox_binding import (
    FULL_ACCESS,
    SandboxTarget,
    SandboxUnavailable,
    select_sandbox,
)
from gateway.assistant.studio_team import (
    DELEGABLE,
    Member,
    StudioTeam,
    checker_agent,
    resolve_team,
)
from gateway.store import devices
from gateway.store.assistant.agents import find_agent
from gateway.store.assistant.references import UNKNOWN_SKILL, usable_skill_ids
from gateway.store.assistant.refused import Refused, invalid
from gateway.store.assistant.rows import SkillRow
from gateway.store.assistant.skills import skills_by_key
from gateway.store.assistant.user_settings import custom_servers, user_settings
from gateway.store.connection import Connection
from gateway.store.devices import DeviceRow

MAX_SERVERS = 20
INVALID_SERVERS = "Invalid MCP server configuration"


@dataclass
class Prepared:
    request: CompletionRequest
    model: str
    agent_key: str = "default"
    agent_prompt: str = ""
    presets: list[dict[str, str]] = field(default_factory=list)
    #: the agent's allowed tool groups ([P-4]); empty = all
    agent_tools: list[str] = field(default_factory=list)
    agent_stream: bool = False
    skills: list[SkillRow] = field(default_factory=list)
    servers: list[dict[str, Any]] = field(default_factory=list)
    admin_prompt: str = ""
    #: the connector device of an assistant run (online when prepared)
    device: DeviceRow | None = None
    connector_switches: dict[str, bool] = field(default_factory=dict)
    #: the cloud sandbox of an assistant run (§3.5); its host device is not ``device``
    sandbox: SandboxTarget | None = None
    #: approval mode ``assistant``: the user's approval agent decides tasks (§1.13); in
    #: ``agent_group`` mode the studio's checker member
    checker: CheckerAgent | None = None
    #: ``agent_group`` mode: the studio, its chief (the speaker) and its members (§1.12)
    team: StudioTeam | None = None

    def skill_prompts(self) -> list[SkillPrompt]:
        return [SkillPrompt(s.key, s.name, s.description, s.prompt, bool(s.content))
                for s in self.skills]

    def skill_bodies(self) -> list[SkillBody]:
        return [SkillBody(s.key, s.name, s.description, s.content) for s in self.skills]

    def skill_ids(self) -> list[str]:
        return [s.key for s in self.skills]

    def server_ids(self) -> list[str]:
        return [str(s["id"]) for s in self.servers]


def _union(*lists: list[str]) -> list[str]:
    return list(dict.fromkeys(item for items in lists for item in items))


def prepare(conn: Connection, user_id: int, request: CompletionRequest,
            settings: RunSettings, now: datetime, *, internal: bool = False) -> Prepared:
    """``internal``: a studio operations run (§4.8), never set from a client's request."""
    team = None
    if request.mode == "agent_group":
        team = resolve_team(conn, user_id, request.agent_group_id,
                            request.model or settings.default_model, now, internal=internal)
        agent = find_agent(conn, user_id, team.chief.chat_agent_id, now)
        model = team.chief.model
    else:
        agent = find_agent(conn, user_id, request.agent_id, now)
    if agent is None:
        raise invalid("Agent not found")
    if not agent.enabled:
        raise invalid("Agent is disabled")
    if team is None:
        model = request.model or agent.default_model.strip() or settings.default_model
    if not model:
        raise invalid("Model is required")
    skill_ids = _union(agent.skill_ids, request.skill_ids)
    if skill_ids and not set(skill_ids) <= usable_skill_ids(conn, user_id):
        raise invalid(UNKNOWN_SKILL)
    skills = skills_by_key(conn, user_id, skill_ids)
    prepared = Prepared(
        request=request, model=model, agent_key=agent.key, agent_prompt=agent.prompt,
        presets=list(agent.preset_messages), agent_tools=list(agent.tools),
        agent_stream=agent.stream, skills=skills, admin_prompt=settings.default_system_prompt,
        team=team)
    if request.background:
        prepared.device = _device(conn, user_id, request, settings, now)
        prepared.sandbox = _sandbox(conn, user_id, request, now)
        prepared.checker = _checker(conn, user_id, request, model, now)
        if team is not None and prepared.device is not None \
                and request.connector_approval_mode == "manual":
            prepared.checker = checker_agent(team)  # §4.13: the studio checker decides
        prepared.connector_switches = dict(settings.connector_switches)
    if team is not None:
        # a studio chief gets no MCP tools (§1.8 step 4, §1.12); its members do
        team.members = [_equip(conn, user_id, request, settings, member)
                        for member in team.members]
        return prepared
    prepared.servers = _servers(conn, user_id, request, settings, _union(
        agent.mcp_server_ids, request.mcp_server_ids,
        *(skill.mcp_server_ids for skill in skills)))
    return prepared


def _device(conn: Connection, user_id: int, request: CompletionRequest,
            settings: RunSettings, now: datetime) -> DeviceRow | None:
    """§1.8 step 1's execution target when it is a device (a sandbox: ``_sandbox``)."""
    selected = bool(request.connector_device_id or request.connector_workspace_path
                    or request.cloud_sandbox_id)
    if selected and not settings.workspace_tools_enabled:
        raise invalid("Workspace tools are disabled")
    if request.cloud_sandbox_id:
        if request.connector_device_id or request.connector_workspace_path:
            raise invalid("Choose either a cloud sandbox or a local connector")
        return None
    if not request.connector_device_id:
        if request.connector_workspace_path:
            raise invalid("connector device is required")
        return None
    device = devices.get_for_user(conn, user_id, request.connector_device_id)
    if device is None or device.hidden:
        raise invalid("connector device not found")
    if not device.online_at(now):
        raise invalid("connector device is offline")
    if not request.connector_workspace_path:
        # [P-22]: a web session's device needs a workspace (unrestricted mode is for
        # non-web channels only)
        raise invalid("Workspace path is required")
    if request.connector_approval_mode == "assistant":
        checker = user_settings(conn, user_id, now).connector_approval_agent_id
        if not checker:
            raise invalid("approval agent is not configured")
        if find_agent(conn, user_id, checker, now) is None:
            raise invalid("Approval agent not found")
    return device


def _sandbox(conn: Connection, user_id: int, request: CompletionRequest,
             now: datetime) -> SandboxTarget | None:
    """A selected cloud sandbox (checked after ``_device``): approval ``full_access``, no
    workspace path (§1.8 step 1)."""
    if not request.cloud_sandbox_id:
        return None
    try:
        target = select_sandbox(conn, user_id, request.cloud_sandbox_id, now)
    except SandboxUnavailable as exc:
        raise invalid(str(exc)) from None
    request.connector_approval_mode = FULL_ACCESS
    request.connector_workspace_path = ""
    return target


def _checker(conn: Connection, user_id: int, request: CompletionRequest, model: str,
             now: datetime) -> CheckerAgent | None:
    """The checker of approval mode ``assistant`` (``_device`` refused a missing one)."""
    if request.connector_approval_mode != "assistant" or not request.connector_device_id:
        return None
    agent_id = user_settings(conn, user_id, now).connector_approval_agent_id
    agent = find_agent(conn, user_id, agent_id, now) if agent_id else None
    if agent is None:
        return None
    return CheckerAgent(agent_id=agent.key, name=agent.name, prompt=agent.prompt,
                        model=agent.default_model.strip() or model)


def _equip(conn: Connection, user_id: int, request: CompletionRequest, settings: RunSettings,
           member: Member) -> Member:
    """A delegable member's skills and MCP servers, resolved like an agent's; a member whose
    servers cannot be used keeps the refusal as its ``problem`` (a tool error if delegated)."""
    if member.type not in DELEGABLE or not member.available:
        return member
    try:
        if member.skill_ids and not set(member.skill_ids) <= usable_skill_ids(conn, user_id):
            raise invalid(UNKNOWN_SKILL)
        skills = skills_by_key(conn, user_id, list(member.skill_ids))
        servers = _servers(conn, user_id, replace(request, mcp_servers=[]), settings, _union(
            list(member.server_ids), *(skill.mcp_server_ids for skill in skills)))
    except Refused as refusal:
        return replace(member, problem=refusal.message)
    return replace(member, skills=tuple(skills), servers=tuple(servers))


def _servers(conn: Connection, user_id: int, request: CompletionRequest,
             settings: RunSettings, wanted: list[str]) -> list[dict[str, Any]]:
    try:
        temporary = read_servers(request.mcp_servers, lambda index: f"tmp-{index + 1}")
    except InvalidServers:
        raise invalid(INVALID_SERVERS) from None
    if (wanted or temporary) and request.background and not settings.mcp_tools_enabled:
        raise invalid("MCP tools are disabled")
    # the user's own servers are read only when some server is asked for by id (most
    # completions ask for none: one statement less in every run's 202)
    known = {s["id"]: s for s in merged(settings.builtin_mcp_servers,
                                        custom_servers(conn, user_id))} if wanted else {}
    chosen: list[dict[str, Any]] = []
    for server_id in wanted:
        server = known.get(server_id)
        if server is None or not server.get("enabled", True):
            raise invalid(f"unknown or disabled MCP server: {server_id}")
        chosen.append(server)
    taken = {s["id"] for s in chosen}
    for server in temporary:
        if server["id"] in taken:
            raise invalid(INVALID_SERVERS)
        if server.get("enabled", True):
            chosen.append(server)
    if len(chosen) > MAX_SERVERS:
        raise invalid(INVALID_SERVERS)
    return chosen


__all__ = ["Prepared", "Refused", "prepare"]
