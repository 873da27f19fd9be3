"""Tools Lockgate answers itself: ``activate_skill``, the task checklist, ``ask_user``.

Why in-process: none of them leaves the server -- a skill body is in the database already
(loaded with the run), the checklist belongs to the conversation being served, and
``ask_user`` ends the turn with a question for the user (agents contract §1.5, §1.8 step 4).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import orjson

from gateway.assistant.tool_set import (
    BadArguments,
    Tool,
    ToolFailed,
    ToolResult,
    object_schema,
    string_argument,
)

TASK_STATES = ("pending", "in_progress", "completed")


@dataclass(frozen=True)
class SkillBody:
    id: str
    name: str
    description: str
    content: str


def skill_tool(skills: Iterable[SkillBody]) -> Tool | None:
    """``activate_skill`` over the selected skills that have a body (None: no such skill)."""
    bodies = {skill.id: skill for skill in skills if skill.content}
    if not bodies:
        return None

    async def run(arguments: dict[str, Any], _call_id: str) -> ToolResult:
        skill_id = string_argument(arguments, "skill_id")
        skill = bodies.get(skill_id.strip())
        if skill is None:
            raise ToolFailed(f"Tool call failed: unknown skill: {skill_id}")
        return ToolResult(skill.content)

    return Tool(
        name="activate_skill", group="skills", run=run, tool="activate_skill",
        description="Load the full instructions of one of the skills listed in the system "
                    "prompt by its id.",
        parameters=object_schema({"skill_id": {"type": "string"}}, ["skill_id"]))


@dataclass
class TaskChecklist:
    """The model-managed task list of one conversation turn (``tasks_*``)."""

    items: list[dict[str, str]] = field(default_factory=list)

    def text(self) -> str:
        if not self.items:
            return "No tasks planned."
        return "\n".join(f"{n}. [{item['status']}] {item['title']}"
                         for n, item in enumerate(self.items, 1))

    def plan(self, arguments: dict[str, Any]) -> str:
        tasks = arguments.get("tasks")
        if not isinstance(tasks, list) or not tasks or len(tasks) > 50:
            raise BadArguments("tasks must be a list of 1 to 50 task titles")
        titles = []
        for task in tasks:
            title = task.get("title") if isinstance(task, dict) else task
            if not isinstance(title, str) or not title.strip():
                raise BadArguments("every task needs a non-empty title")
            titles.append(title.strip()[:500])
        self.items = [{"title": title, "status": "pending"} for title in titles]
        return self.text()

    def update(self, arguments: dict[str, Any]) -> str:
        index = arguments.get("index")
        status = arguments.get("status")
        if not isinstance(index, int) or isinstance(index, bool) or not (
                1 <= index <= len(self.items)):
            raise BadArguments(f"index must be between 1 and {len(self.items)}")
        if status not in TASK_STATES:
            raise BadArguments("status must be pending, in_progress or completed")
        self.items[index - 1]["status"] = str(status)
        return self.text()


def task_tools(checklist: TaskChecklist) -> list[Tool]:
    async def plan(arguments: dict[str, Any], _call_id: str) -> ToolResult:
        return ToolResult(checklist.plan(arguments))

    async def update(arguments: dict[str, Any], _call_id: str) -> ToolResult:
        return ToolResult(checklist.update(arguments))

    async def listing(_arguments: dict[str, Any], _call_id: str) -> ToolResult:
        return ToolResult(checklist.text())

    return [
        Tool(name="tasks_plan", group="tasks", run=plan, tool="tasks_plan",
             description="Replace the task checklist of this conversation with a new plan.",
             parameters=object_schema({"tasks": {"type": "array", "items": {"type": "string"}}},
                                      ["tasks"])),
        Tool(name="tasks_update", group="tasks", run=update, tool="tasks_update",
             description="Set the status of one task (1-based index).",
             parameters=object_schema({"index": {"type": "integer", "minimum": 1},
                                       "status": {"type": "string", "enum": list(TASK_STATES)}},
                                      ["index", "status"])),
        Tool(name="tasks_list", group="tasks", run=listing, tool="tasks_list",
             description="Show the task checklist.", parameters=object_schema({})),
    ]


def ask_user_tool() -> Tool:
    async def run(arguments: dict[str, Any], _call_id: str) -> ToolResult:
        question = string_argument(arguments, "question").strip()
        options = arguments.get("options")
        final = question
        if isinstance(options, list) and options:
            final += "\n" + "\n".join(f"- {option}" for option in options
                                      if isinstance(option, str))
        return ToolResult(orjson.dumps({"asked": question}).decode(), ends_turn=True,
                          final_text=final)

    return Tool(
        name="ask_user", group="ask_user", run=run, tool="ask_user",
        description="Ask the user a question and end this turn; their reply comes as the next "
                    "message.",
        parameters=object_schema({"question": {"type": "string"},
                                  "options": {"type": "array", "items": {"type": "string"}}},
                                 ["question"]))
