"""The neutral vocabulary between a client protocol and an upstream protocol (contract §9.4).

Every upstream format gets a *decoder* (its SSE events / its answer body -> these neutral
values) and every client format an *encoder* (neutral values -> its frames / its body).  A new
family (Messages, Google) then needs one decoder and one encoder, not a converter per pair.

Stream events are small frozen values; a decoder emits them as upstream events arrive and an
encoder turns each into zero or more client frames immediately -- nothing buffers the stream.
Tool calls are identified by ``index`` (their order in the answer, 0-based), which is how the
chat format addresses them; formats keyed by item ids map to and from it.

Reasoning ("thinking") text travels as ``ReasoningDelta`` / ``Reply.reasoning``.  A signature
or encrypted payload (Messages ``signature``, Google ``thoughtSignature``, Responses
``encrypted_content``) is read into ``signature`` but only the provider that issued it can
verify it, and a conversion always crosses providers, so no encoder forwards one (same-format
traffic goes through ``passthrough`` untouched, signatures included).

Finish reasons use the chat vocabulary as the neutral one (§9.3 table): ``stop``, ``length``,
``tool_calls``, ``content_filter``.
"""

from __future__ import annotations

import secrets
import time
from dataclasses import dataclass, field
from typing import Literal, Protocol

from gateway.billing.usage import Usage

FinishReason = Literal["stop", "length", "tool_calls", "content_filter"]


class UpstreamEvent(Protocol):
    """What a translator reads from the upstream stream (``protocols.sse.SSEEvent`` fits)."""

    @property
    def event(self) -> str | None: ...

    @property
    def data(self) -> bytes: ...


@dataclass(frozen=True, slots=True)
class Start:
    """The answer began: upstream id (may be empty) and creation time (Unix seconds)."""

    id: str
    created: int


@dataclass(frozen=True, slots=True)
class TextDelta:
    """More answer text (refusal text included)."""

    text: str


@dataclass(frozen=True, slots=True)
class ReasoningDelta:
    """More reasoning text; ``signature`` set when the upstream sent one (see module doc)."""

    text: str
    signature: str | None = None


@dataclass(frozen=True, slots=True)
class ToolCallStart:
    """A tool call begins: its position, call id and function name (arguments follow)."""

    index: int
    id: str
    name: str


@dataclass(frozen=True, slots=True)
class ToolArgsDelta:
    """More JSON text of the arguments of tool call ``index``."""

    index: int
    arguments: str


@dataclass(frozen=True, slots=True)
class Finish:
    """Why the model stopped (neutral = chat vocabulary)."""

    reason: FinishReason


@dataclass(frozen=True, slots=True)
class UsageReport:
    """Usage the upstream reported (already normalised)."""

    usage: Usage


@dataclass(frozen=True, slots=True)
class End:
    """The upstream said the answer is complete."""


@dataclass(frozen=True, slots=True)
class Failure:
    """The upstream reported an error inside the stream."""

    message: str
    type: str = "upstream_error"
    code: str | None = None


StreamEvent = (Start | TextDelta | ReasoningDelta | ToolCallStart | ToolArgsDelta | Finish
               | UsageReport | End | Failure)


@dataclass(frozen=True, slots=True)
class ToolCall:
    """A complete tool call: ``arguments`` is the JSON text the model produced."""

    id: str
    name: str
    arguments: str


@dataclass(slots=True)
class Reply:
    """A whole non-stream answer, reduced to what every format can express (first choice)."""

    id: str
    created: int
    text: str | None
    tool_calls: list[ToolCall] = field(default_factory=list)
    finish: FinishReason = "stop"
    usage: Usage | None = None
    refusal: str | None = None
    #: the model's reasoning text (thinking / thought summary), when the upstream showed it
    reasoning: str | None = None
    reasoning_signature: str | None = None

    def finish_reason(self) -> FinishReason:
        """A natural end that carried tool calls is a ``tool_calls`` end."""
        if self.finish == "stop" and self.tool_calls:
            return "tool_calls"
        return self.finish


def new_id(prefix: str) -> str:
    """A fresh identifier for objects we build ourselves (``resp_…``, ``msg_…``, ``fc_…``)."""
    return prefix + secrets.token_hex(12)


def now_seconds() -> int:
    """Fallback creation time when the upstream gave none (wall clock, whole seconds)."""
    return int(time.time())
