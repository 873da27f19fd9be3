"""The tools one chat completion or run offers its model (agents contract §1.8 step 4).

Why a table of ``Tool`` values: the loop only needs a name -> (schema, group, runner) map; what
a tool does (an MCP call, a connector task, a skill body, the task checklist) lives with the
tool's builder, so adding a kind of tool never touches the loop.  Groups are the contract's
``workspace, web, sites, tasks, ask_user, memory`` (plus ``mcp`` and ``skills``, which no
group switch removes); ``filtered`` drops the groups a request or agent disabled.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

#: tool groups a request's ``disabled_tool_groups`` / an agent's ``tools`` speak about
TOOL_GROUPS = ("workspace", "web", "sites", "tasks", "ask_user", "memory")
#: tool output longer than this many characters is cut (§1.8 step 8)
MAX_RESULT_CHARS = 20000
TRUNCATED = "\n...(truncated)"
EMPTY_RESULT = "(empty tool result)"

OK = "ok"
ERROR = "error"
MISSING = "missing"
INVALID_ARGUMENTS = "invalid_arguments"
RUNNING = "running"
APPROVAL_REQUIRED = "approval_required"


class ToolFailed(Exception):
    """A tool could not do its job; ``text`` is the whole result the model sees (already
    carrying its contract prefix, e.g. ``Tool call failed: ...``)."""

    def __init__(self, text: str) -> None:
        super().__init__(text)
        self.text = text


class BadArguments(Exception):
    """The model's arguments do not fit the tool (final status ``invalid_arguments``)."""


@dataclass(frozen=True)
class ToolResult:
    text: str
    #: the run ends after this tool with ``final_text`` as its answer (``ask_user``)
    ends_turn: bool = False
    final_text: str = ""
    #: arguments as executed, when they differ from the model's (an adjusted approval)
    arguments: dict[str, Any] | None = None


Runner = Callable[[dict[str, Any], str], Awaitable[ToolResult]]
#: runs before the first ``tool_call`` event; returns the arguments to show when the call now
#: waits for an approval (a connector task created ``pending_approval``), else None
Precreate = Callable[[dict[str, Any], str], Awaitable[dict[str, Any] | None]]


@dataclass(frozen=True)
class Tool:
    """One function tool: ``run(arguments, tool_call_id)``."""

    name: str
    description: str
    parameters: dict[str, Any]
    group: str
    run: Runner
    #: what tool-call details name: the MCP server's name and its own tool name
    server: str = ""
    tool: str = ""
    precreate: Precreate | None = None

    def spec(self) -> dict[str, Any]:
        return {"type": "function", "function": {
            "name": self.name, "description": self.description, "parameters": self.parameters}}


@dataclass
class ToolSet:
    tools: dict[str, Tool] = field(default_factory=dict)
    #: ``specs()`` as last built: every round of a run sends the same list
    _specs: list[dict[str, Any]] | None = field(default=None, init=False, repr=False,
                                               compare=False)

    def add(self, tool: Tool) -> None:
        self.tools[tool.name] = tool
        self._specs = None

    def extend(self, tools: Iterable[Tool]) -> None:
        for tool in tools:
            self.add(tool)

    def filtered(self, disabled_groups: Iterable[str], allowed_groups: Iterable[str] = ()
                 ) -> ToolSet:
        """Without the disabled groups; with ``allowed_groups`` (an agent's ``tools``), the
        contract groups it does not list are disabled too ([P-4])."""
        disabled = set(disabled_groups)
        allowed = set(allowed_groups)
        if allowed:
            disabled |= {group for group in TOOL_GROUPS if group not in allowed}
        return ToolSet({name: tool for name, tool in self.tools.items()
                        if tool.group not in disabled})

    def specs(self) -> list[dict[str, Any]]:
        """The tools as a request's ``tools``; built once until a tool is added (callers
        only serialise it)."""
        if self._specs is None:
            self._specs = [tool.spec() for tool in self.tools.values()]
        return self._specs

    def get(self, name: str) -> Tool | None:
        return self.tools.get(name)

    def __len__(self) -> int:
        return len(self.tools)


def clip(text: str) -> str:
    """A tool's text as the model and the details see it (§1.8 step 8)."""
    if not text:
        return EMPTY_RESULT
    if len(text) > MAX_RESULT_CHARS:
        return text[:MAX_RESULT_CHARS] + TRUNCATED
    return text


def object_schema(properties: dict[str, Any], required: Iterable[str] = ()) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "object", "properties": properties}
    names = list(required)
    if names:
        schema["required"] = names
    return schema


def string_argument(arguments: dict[str, Any], name: str, *, required: bool = True) -> str:
    value = arguments.get(name)
    if value is None and not required:
        return ""
    if not isinstance(value, str) or (required and not value.strip()):
        raise BadArguments(f"{name} must be a non-empty string")
    return value
