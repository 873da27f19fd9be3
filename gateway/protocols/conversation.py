"""The neutral request: what a text request means, independent of its wire format (§9.2).

A client request is decoded into a ``Conversation`` and the upstream request encoded from it,
so each format needs one decoder and one encoder.  Only what can be expressed in more than one
format lives here; fields with no counterpart are dropped by the encoder that cannot carry them
(each format module documents which) and content that cannot be carried at all is refused with
a clear 400 rather than silently lost.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from gateway.protocols.events import ToolCall


@dataclass(frozen=True, slots=True)
class Text:
    """A text part (chat ``text``, Responses ``input_text``/``output_text``)."""

    text: str


@dataclass(frozen=True, slots=True)
class Image:
    """An image by URL (``https:`` or ``data:``); ``detail`` as the OpenAI formats spell it."""

    url: str
    detail: str | None = None


@dataclass(frozen=True, slots=True)
class File:
    """A file input: an uploaded ``file_id`` or inline ``file_data`` with its ``filename``."""

    file_id: str | None = None
    file_data: str | None = None
    filename: str | None = None


Part = Text | Image | File


@dataclass(slots=True)
class Turn:
    """One message.  ``role`` is system, developer, user, assistant or tool.

    An assistant turn may carry ``tool_calls``; a tool turn answers ``tool_call_id``.
    """

    role: str
    parts: list[Part] = field(default_factory=list)
    tool_calls: list[ToolCall] = field(default_factory=list)
    tool_call_id: str | None = None

    def text(self) -> str:
        return "".join(p.text for p in self.parts if isinstance(p, Text))


@dataclass(frozen=True, slots=True)
class Tool:
    """A function tool the model may call."""

    name: str
    description: str | None = None
    parameters: dict[str, Any] | None = None
    strict: bool | None = None


@dataclass(slots=True)
class Conversation:
    """A whole text request: turns, function tools, and the sampling settings every OpenAI-
    family format can carry (``None`` = not given, so encoders omit it)."""

    turns: list[Turn]
    tools: list[Tool] = field(default_factory=list)
    #: "auto" / "none" / "required", or the name of the one function that must be called
    tool_choice: str | None = None
    forced_tool: str | None = None
    max_output_tokens: int | None = None
    temperature: float | None = None
    top_p: float | None = None
    stop: list[str] | None = None
    stream: bool = False
    parallel_tool_calls: bool | None = None
    user: str | None = None
    #: JSON-schema / json-object output request: {"type": ..., "name"?, "schema"?, "strict"?}
    output_format: dict[str, Any] | None = None
    #: reasoning settings (see ``gateway.protocols.reasoning`` for how they map between formats):
    #: an OpenAI effort word, a token budget (0 = thinking off), and whether the client asked
    #: to be shown the reasoning (Messages thinking, Google includeThoughts, Responses summary)
    reasoning_effort: str | None = None
    reasoning_budget: int | None = None
    include_reasoning: bool | None = None
