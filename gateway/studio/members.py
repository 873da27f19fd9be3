"""A studio's body (agents contract §4.1): id rules, member normalization and the team checks.

Members without a ``chat_agent_id`` are dropped; member ids are sanitized to ``[A-Za-z0-9_-]``
(default ``agent-<chat_agent_id>``) and made unique; names are cut to 120 characters (default:
the id), prompts to 20000; at most 40 members are kept; an unknown type is ``worker``.  Then a
studio needs a name, at least one member, exactly one chief and exactly one checker.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

STUDIO_ID = re.compile(r"^[A-Za-z0-9_-]{1,80}$")
MEMBER_TYPES = ("chief", "worker", "critic", "reviewer", "checker")
MAX_MEMBERS = 40
MAX_MEMBER_NAME = 120
MAX_PROMPT = 20000
MAX_STUDIO_NAME = 200
MAX_MEMBER_ID = 80

BAD_ID = "studio id must be 1-80 characters of letters, numbers, underscore, or dash"
NAME_REQUIRED = "studio name is required"
NO_MEMBERS = "studio requires at least one member"
ONE_CHIEF = "studio must contain exactly one chief"
ONE_CHECKER = "studio must contain exactly one checker"
ID_MISMATCH = "studio id does not match path"


class StudioInputError(ValueError):
    """A studio body the contract refuses (400 with this message)."""


@dataclass(frozen=True)
class StudioInput:
    id: str
    name: str
    description: str
    agents: list[dict[str, Any]]


def _text(value: Any) -> str:
    if isinstance(value, str):
        return value.strip()
    if isinstance(value, bool) or value is None:
        return ""
    if isinstance(value, int | float):
        return str(value)
    return ""


def _strings(value: Any) -> list[str]:
    if not isinstance(value, list):
        return []
    out: list[str] = []
    for item in value:
        text = _text(item)
        if text and text not in out:
            out.append(text)
    return out


def _sanitized(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_-]", "", text)[:MAX_MEMBER_ID]


def _unique(wanted: str, taken: set[str]) -> str:
    candidate, n = wanted, 2
    while candidate in taken:
        suffix = f"-{n}"
        candidate = wanted[:MAX_MEMBER_ID - len(suffix)] + suffix
        n += 1
    taken.add(candidate)
    return candidate


def member(raw: dict[str, Any], taken: set[str]) -> dict[str, Any] | None:
    """One normalized member, or None when it has no chat agent."""
    chat_agent_id = _text(raw.get("chat_agent_id"))
    if not chat_agent_id:
        return None
    member_id = _sanitized(_text(raw.get("id"))) or _sanitized(f"agent-{chat_agent_id}")
    member_id = _unique(member_id or "agent", taken)
    kind = _text(raw.get("type")).lower()
    prompt = raw.get("prompt")
    out: dict[str, Any] = {
        "id": member_id,
        "name": (_text(raw.get("name")) or member_id)[:MAX_MEMBER_NAME],
        "type": kind if kind in MEMBER_TYPES else "worker",
        "prompt": prompt[:MAX_PROMPT] if isinstance(prompt, str) else "",
        "chat_agent_id": chat_agent_id,
    }
    model = _text(raw.get("default_model"))
    if model:
        out["default_model"] = model
    channel = raw.get("user_channel_id")
    if isinstance(channel, int) and not isinstance(channel, bool) and channel > 0:
        out["user_channel_id"] = channel
    for key in ("skill_ids", "mcp_server_ids"):
        values = _strings(raw.get(key))
        if values:
            out[key] = values
    return out


def studio_id_ok(studio_id: str) -> bool:
    return bool(STUDIO_ID.match(studio_id))


def read_studio(body: dict[str, Any], path_id: str | None, generated_id: str) -> StudioInput:
    """The validated studio of a POST (``path_id`` None) or PUT body."""
    given = _text(body.get("id"))
    if path_id is not None:
        if not studio_id_ok(path_id):
            raise StudioInputError(BAD_ID)
        if given and given != path_id:
            raise StudioInputError(ID_MISMATCH)
        studio_id = path_id
    elif given:
        if not studio_id_ok(given):
            raise StudioInputError(BAD_ID)
        studio_id = given
    else:
        studio_id = generated_id
    name = _text(body.get("name"))
    if not name:
        raise StudioInputError(NAME_REQUIRED)
    raw_agents = body.get("agents")
    taken: set[str] = set()
    agents: list[dict[str, Any]] = []
    for raw in raw_agents if isinstance(raw_agents, list) else []:
        if len(agents) >= MAX_MEMBERS:
            break
        if isinstance(raw, dict):
            normalized = member(raw, taken)
            if normalized is not None:
                agents.append(normalized)
    if not agents:
        raise StudioInputError(NO_MEMBERS)
    if sum(1 for a in agents if a["type"] == "chief") != 1:
        raise StudioInputError(ONE_CHIEF)
    if sum(1 for a in agents if a["type"] == "checker") != 1:
        raise StudioInputError(ONE_CHECKER)
    description = body.get("description")
    return StudioInput(id=studio_id, name=name[:MAX_STUDIO_NAME],
                       description=description.strip() if isinstance(description, str) else "",
                       agents=agents)
