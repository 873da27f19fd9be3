"""Legacy completions (``/v1/completions``): request checks, and the conversion used when the
channel is not ``compat``.

Contract §0/§8.2: on ``compat`` channels the request goes verbatim (model swapped) to
``/v1/completions`` and the ``text_completion`` answer is relayed (``passthrough.py``).  On
other text channels the prompt becomes one user message and the answer is built as a
``text_completion`` (``choices[].text``, chat-style ``usage``), streamed or not.  Only a single
text prompt can be converted; batched or token-id prompts, ``n > 1``, ``echo``, ``suffix``,
``logprobs`` and ``best_of`` are refused there (400) rather than silently ignored.
"""

from __future__ import annotations

from typing import Any

from gateway.protocols import fields
from gateway.protocols.chat_stream import ChatStreamEncoder
from gateway.protocols.conversation import Conversation, Text, Turn
from gateway.protocols.errors import invalid
from gateway.protocols.estimate import estimate_tokens
from gateway.protocols.events import FinishReason, Reply, new_id
from gateway.protocols.usage import chat_usage

_PROMPT_ERROR = "prompt must be a string, an array of strings or token arrays"
_UNCONVERTIBLE = ("echo", "suffix", "logprobs", "best_of")


def read_request(body: dict[str, Any]) -> tuple[bool, bool, int | None, int]:
    """(stream, include_usage, max output tokens, estimated input tokens)."""
    prompt = body.get("prompt")
    estimate = 0
    if isinstance(prompt, str):
        estimate = estimate_tokens(prompt)
    elif isinstance(prompt, list):
        for item in prompt:
            if isinstance(item, str):
                estimate += estimate_tokens(item)
            elif isinstance(item, int) and not isinstance(item, bool):
                estimate += 1  # a token id
            elif isinstance(item, list) and all(isinstance(t, int) for t in item):
                estimate += len(item)
            else:
                raise invalid(_PROMPT_ERROR, "prompt")
    elif prompt is not None:
        raise invalid(_PROMPT_ERROR, "prompt")
    stream = fields.flag(body, "stream")
    include_usage = fields.flag(fields.optional_object(body, "stream_options"), "include_usage")
    max_tokens = fields.count(body, "max_tokens")
    fields.count(body, "n", minimum=1)
    fields.number(body, "temperature")
    return stream, include_usage, max_tokens, estimate


def to_conversation(body: dict[str, Any]) -> Conversation:
    prompt = body.get("prompt")
    if isinstance(prompt, list) and len(prompt) == 1 and isinstance(prompt[0], str):
        prompt = prompt[0]
    if not isinstance(prompt, str) or not prompt:
        raise invalid("only a single text prompt can be converted for this channel", "prompt")
    for name in _UNCONVERTIBLE:
        if body.get(name) not in (None, False, 0, ""):
            raise invalid(f"{name} is not supported by this channel", name)
    if (fields.count(body, "n", minimum=1) or 1) > 1:
        raise invalid("n > 1 is not supported by this channel", "n")
    stop = body.get("stop")
    return Conversation(
        turns=[Turn("user", [Text(prompt)])],
        max_output_tokens=fields.count(body, "max_tokens"),
        temperature=fields.number(body, "temperature"),
        top_p=fields.number(body, "top_p"),
        stop=[stop] if isinstance(stop, str) else stop,
        stream=fields.flag(body, "stream"),
        user=body.get("user"),
    )


def _finish(reply: Reply) -> FinishReason:
    return "stop" if reply.finish == "tool_calls" else reply.finish


def encode_reply(reply: Reply, model: str, request: dict[str, Any]) -> dict[str, Any]:
    """``Reply`` -> a ``text_completion`` for the client (§8.2)."""
    body: dict[str, Any] = {
        "id": reply.id if reply.id.startswith("cmpl-") else "cmpl-" + (reply.id or new_id("")),
        "object": "text_completion",
        "created": reply.created,
        "model": model,
        "choices": [{"text": reply.text or "", "index": 0, "logprobs": None,
                     "finish_reason": _finish(reply)}],
    }
    if reply.usage is not None:
        body["usage"] = chat_usage(reply.usage)
    return body


class CompletionsStreamEncoder(ChatStreamEncoder):
    """Neutral events -> ``text_completion`` chunks; tool calls cannot occur (no tools)."""

    object_name = "text_completion"
    id_prefix = "cmpl-"

    def _choice(self, delta: dict[str, Any], finish: FinishReason | None) -> dict[str, Any]:
        if finish == "tool_calls":
            finish = "stop"
        return {"text": delta.get("content") or "", "index": 0, "logprobs": None,
                "finish_reason": finish}

    def _opening(self) -> list[bytes]:
        return []

    def _reasoning(self, text: str) -> list[bytes]:
        return []  # a text completion has nowhere to put reasoning
