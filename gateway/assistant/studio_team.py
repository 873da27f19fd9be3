"""Step 1 of an ``agent_group`` completion: the studio and its team (agents contract §1.8
step 1, §1.12, §4.13, §4.16).

Why it is resolved up front, in the preparing transaction: the chief speaks first, but every
member may be delegated to later in the run, and a member whose chat agent was deleted must be
a clean tool error then, not a database read in the middle of a run.  So each member's agent
prompt and model are read once here (member model → its chat agent's model → the caller's
model); the checker member becomes the run's connector approver; and an external chat creates
the studio's operations record on first use (§4.16) and learns whether the chief is an intake
desk (operations ``operating``) or a delegating lead (anything else).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

from gateway.assistant.approval_checker import CheckerAgent
from gateway.store.assistant.agents import find_agent
from gateway.store.assistant.refused import invalid
from gateway.store.connection import Connection
from gateway.store.studio.companies import ensure_default
from gateway.store.studio.studios import find_studio

STUDIO_REQUIRED = "Studio is required"
STUDIO_NOT_FOUND = "Studio not found"
ONE_CHIEF = "Studio must contain exactly one chief"
MEMBER_AGENT = "Studio member must select an agent"
AGENT_MISSING = "Referenced chat agent was not found"
CHIEF_MODEL = "Model is required for Studio member"
#: members the chief may delegate to; the chief coordinates and the checker only approves
DELEGABLE = ("worker", "critic", "reviewer")


@dataclass(frozen=True)
class Member:
    """One studio member as a run uses it; ``model`` is empty when none could be chosen and
    ``available`` False when its chat agent is gone (delegating to it is then a tool error)."""

    id: str
    name: str
    type: str
    chat_agent_id: str
    prompt: str
    model: str
    available: bool = True
    #: skill and MCP server ids: the member's and its chat agent's
    skill_ids: tuple[str, ...] = ()
    server_ids: tuple[str, ...] = ()
    #: what it works with when delegated to (filled in by the preparation); ``problem`` is
    #: why it cannot be (a server that is unknown or disabled)
    skills: tuple[Any, ...] = ()
    servers: tuple[dict[str, Any], ...] = ()
    problem: str = ""


@dataclass
class StudioTeam:
    studio_id: str
    studio_name: str
    chief: Member
    members: list[Member] = field(default_factory=list)
    #: a work or review run of studio operations (session ``pcw-…``, read-only for the owner)
    internal: bool = False
    #: an external chat while operations are ``operating``: the chief only takes work in
    intake: bool = False
    #: the operations record's id (external chats create it; internal runs have one)
    company_id: int | None = None

    def member(self, member_id: str) -> Member | None:
        return next((m for m in self.members if m.id == member_id), None)

    @property
    def checker(self) -> Member | None:
        return next((m for m in self.members if m.type == "checker"), None)

    def roster(self) -> str:
        """The roster section of the chief's system prompt (§1.8 step 5)."""
        lines = [f"Studio {self.studio_name} ({self.studio_id}). Members you can delegate to "
                 "with agent_delegate:"]
        lines += [f"- {m.id}: {m.name} ({m.type})" for m in self.members
                  if m.type not in ("chief", "checker")]
        return "\n".join(lines)

    def identity(self) -> str:
        """The chief's identity and role rules (§1.8 step 5, §1.12, §4.16)."""
        if self.intake:
            return (f"You are {self.chief.name}, the chief of the studio {self.studio_name}. "
                    "Studio operations are on: you are the intake desk. Turn the owner's "
                    "requests into Studio work items with studio_create_work and report on "
                    "them with studio_list_work; the team does the work later.")
        return (f"You are {self.chief.name}, the chief of the studio {self.studio_name}. You "
                "coordinate: delegate each piece of work to the right member with "
                "agent_delegate, check what they report, and answer with the result. You may "
                "only read the workspace yourself.")


def _member(conn: Connection, user_id: int, raw: dict[str, Any], caller_model: str,
            now: datetime) -> Member:
    chat_agent_id = str(raw.get("chat_agent_id") or "")
    agent = find_agent(conn, user_id, chat_agent_id, now) if chat_agent_id else None
    prompt = "\n\n".join(p.strip() for p in (agent.prompt if agent else "",
                                             str(raw.get("prompt") or "")) if p.strip())
    model = (str(raw.get("default_model") or "").strip()
             or (agent.default_model.strip() if agent else "") or caller_model)
    member_id = str(raw.get("id") or "")

    def ids(key: str, of_agent: list[str]) -> tuple[str, ...]:
        own = raw.get(key)
        return tuple(dict.fromkeys([*of_agent, *(str(i) for i in own or [] if i)]))

    return Member(id=member_id, name=str(raw.get("name") or member_id),
                  type=str(raw.get("type") or "worker"), chat_agent_id=chat_agent_id,
                  prompt=prompt, model=model, available=agent is not None,
                  skill_ids=ids("skill_ids", agent.skill_ids if agent else []),
                  server_ids=ids("mcp_server_ids", agent.mcp_server_ids if agent else []))


def resolve_team(conn: Connection, user_id: int, studio_id: str, caller_model: str,
                 now: datetime, *, internal: bool = False) -> StudioTeam:
    """The studio of an ``agent_group`` completion with the contract's refusals, in order."""
    if not studio_id:
        raise invalid(STUDIO_REQUIRED)
    studio = find_studio(conn, user_id, studio_id)
    if studio is None:
        raise invalid(STUDIO_NOT_FOUND)
    chiefs = [m for m in studio.agents if m.get("type") == "chief"]
    if len(chiefs) != 1:
        raise invalid(ONE_CHIEF)
    if not str(chiefs[0].get("chat_agent_id") or ""):
        raise invalid(MEMBER_AGENT)
    members = [_member(conn, user_id, raw, caller_model, now) for raw in studio.agents]
    chief = next(m for m in members if m.type == "chief")
    if not chief.available:
        raise invalid(AGENT_MISSING)
    if not chief.model:
        raise invalid(CHIEF_MODEL)
    # a member without a model of its own works with its caller's: the chief's
    members = [m if m.model else replace(m, model=chief.model) for m in members]
    team = StudioTeam(studio_id=studio.id, studio_name=studio.name, chief=chief,
                      members=members, internal=internal)
    if not internal:
        record = ensure_default(conn, user_id, studio, now)
        team.company_id, team.intake = record.id, record.state == "operating"
    return team


def checker_agent(team: StudioTeam) -> CheckerAgent | None:
    """The studio's checker member as the run's connector approver (§1.12, §4.13)."""
    checker = team.checker
    if checker is None or not checker.available or not checker.model:
        return None
    return CheckerAgent(agent_id=checker.id, name=checker.name, prompt=checker.prompt,
                        model=checker.model)
