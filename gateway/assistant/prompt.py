"""The conversation a model round sees: system prompt, preset messages, compressed history.

Agents contract §1.8 steps 5 and 6.  Pure functions of the run's inputs, so the order of the
system prompt's sections and the compression rule are tested without a model.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

ASSISTANT_INSTRUCTIONS = (
    "You are working in assistant mode. Work through the task autonomously in rounds, using "
    "the tools available to you. Never claim an effect (a file written, a command run) you did "
    "not verify with a tool result. When you are done, summarise what you did and what the "
    "user should know.")
TASKS_INSTRUCTIONS = (
    "For work with several steps, plan it with tasks_plan, keep it current with tasks_update "
    "and check it with tasks_list.")
ASK_USER_INSTRUCTIONS = (
    "When you cannot continue without the user's decision, call ask_user with one clear "
    "question; this ends your turn.")

COMPRESS_ABOVE_CHARS = 48000
COMPRESS_ABOVE_MESSAGES = 8
KEEP_LAST = 12
COMPRESSED_HEADER = "[Earlier conversation compressed for context]"
LINE_CHARS = 240
_SPACES = re.compile(r"\s+")


@dataclass(frozen=True)
class SkillPrompt:
    id: str
    name: str
    description: str
    prompt: str
    has_content: bool


def system_prompt(*, admin_prompt: str, agent_prompt: str, skills: Sequence[SkillPrompt],
                  assistant_mode: bool, tool_names: Iterable[str],
                  connector_description: str = "", studio_sections: Sequence[str] = ()) -> str:
    """Sections joined by a blank line, in the contract's order (empty sections left out);
    ``studio_sections``: an ``agent_group`` chief's identity, role rules and roster."""
    names = set(tool_names)
    sections = [admin_prompt.strip(), agent_prompt.strip()]
    sections += [f"[Skill: {skill.name}]\n{skill.prompt.strip()}" for skill in skills
                 if skill.prompt.strip()]
    with_bodies = [skill for skill in skills if skill.has_content]
    if with_bodies:
        sections.append("Skills you can load with activate_skill:\n" + "\n".join(
            f"{skill.id}: {skill.name} — {skill.description}" for skill in with_bodies))
    if assistant_mode:
        sections.append(ASSISTANT_INSTRUCTIONS)
    sections += [section.strip() for section in studio_sections]
    sections.append(connector_description.strip())
    if "tasks_plan" in names:
        sections.append(TASKS_INSTRUCTIONS)
    if "ask_user" in names:
        sections.append(ASK_USER_INSTRUCTIONS)
    return "\n\n".join(section for section in sections if section)


def _chars(message: dict[str, Any]) -> int:
    content = message.get("content")
    return len(content) if isinstance(content, str) else 0


def compress(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """§1.8 step 6: over 48000 characters and more than 8 messages, keep the last 12 and
    fold the rest into one assistant message."""
    if len(messages) <= COMPRESS_ABOVE_MESSAGES or len(messages) <= KEEP_LAST:
        return messages
    if sum(_chars(m) for m in messages) <= COMPRESS_ABOVE_CHARS:
        return messages
    dropped, kept = messages[:-KEEP_LAST], messages[-KEEP_LAST:]
    lines = [COMPRESSED_HEADER]
    for message in dropped:
        content = message.get("content")
        text = _SPACES.sub(" ", content if isinstance(content, str) else "").strip()
        lines.append(f"{message.get('role', 'user')}: {text[:LINE_CHARS]}...")
    return [{"role": "assistant", "content": "\n".join(lines)}, *kept]


def conversation(system: str, presets: Iterable[dict[str, str]],
                 history: list[dict[str, Any]], *, auto_compress: bool) -> list[dict[str, Any]]:
    """What round 1 sends: the system prompt, the agent's preset messages, the history."""
    messages: list[dict[str, Any]] = []
    if system:
        messages.append({"role": "system", "content": system})
    messages += [{"role": p["role"], "content": p["content"]} for p in presets
                 if p.get("content")]
    messages += compress(history) if auto_compress else history
    return messages
