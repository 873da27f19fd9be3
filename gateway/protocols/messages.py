"""The Messages format (``/v1/messages``, channel type ``messages``; contract §8.1, §9.2-§9.3).

- ``read_request``: checks the fields the gateway reads and estimates input tokens.
- ``to_conversation`` / ``from_conversation``: the request in and out of the neutral model.
  ``system`` becomes a leading system turn; ``tool_result`` blocks become tool turns (placed
  before the rest of their user message); ``thinking`` blocks in the history are dropped (only
  the model that wrote them can read them back); ``thinking`` settings map as
  ``gateway.protocols.reasoning`` says (with thinking on, ``temperature``/``top_p`` are not sent
  -- Messages refuses them then -- and a forced tool choice, or a tool loop whose earlier
  thinking cannot be replayed, leaves thinking off); documents,
  server tools and other block types cannot be expressed by the other formats and are refused
  with a 400 that names them.  Encoding for an upstream always sets ``max_tokens`` (the
  Messages API requires it) and hoists every system turn into ``system``.
- ``decode_reply`` / ``encode_reply``: a message object in and out of ``Reply``; ``thinking``
  blocks <-> ``Reply.reasoning`` (a converted answer's thinking block carries an empty
  ``signature``: no foreign signature is valid here; ``redacted_thinking`` only passes through).
- ``messages_usage``: ``Usage`` as a Messages ``usage`` object, whose ``input_tokens`` excludes
  cache reads and writes (§9.3).
"""

from __future__ import annotations

from typing import Any

import orjson

from gateway.billing.usage import Usage
from gateway.protocols import fields, reasoning
from gateway.protocols.conversation import Conversation, Image, Part, Text, Tool, Turn
from gateway.protocols.errors import UpstreamFormatError, invalid
from gateway.protocols.estimate import estimate_texts, estimate_tokens
from gateway.protocols.events import FinishReason, Reply, ToolCall, new_id, now_seconds
from gateway.protocols.usage import extract_usage

#: ``max_tokens`` sent to a messages channel when the client gave no output cap
DEFAULT_MAX_TOKENS = 4096

STOP_REASONS: dict[str, FinishReason] = {
    "end_turn": "stop", "stop_sequence": "stop", "pause_turn": "stop",
    "max_tokens": "length", "model_context_window_exceeded": "length",
    "tool_use": "tool_calls", "refusal": "content_filter",
}
_TO_STOP_REASON = {"stop": "end_turn", "length": "max_tokens", "tool_calls": "tool_use",
                   "content_filter": "refusal"}


def stop_reason(reason: FinishReason) -> str:
    """The Messages ``stop_reason`` for a neutral finish reason."""
    return _TO_STOP_REASON[reason]


def read_request(body: dict[str, Any]) -> tuple[bool, int | None, int]:
    """(stream, max output tokens, estimated input tokens) of a Messages request."""
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise invalid("messages are required", "messages")
    texts: list[str] = []
    system = body.get("system")
    if system is not None and not isinstance(system, str | list):
        raise invalid("system must be a string or an array of text blocks", "system")
    _collect(system, texts)
    for position, message in enumerate(messages):
        if not isinstance(message, dict) or not isinstance(message.get("role"), str):
            raise invalid("each message must be an object with a role", f"messages[{position}]")
        _collect(message.get("content"), texts)
    stream = fields.flag(body, "stream")
    max_tokens = fields.count(body, "max_tokens", minimum=1)
    fields.number(body, "temperature")
    tools = fields.optional_list(body, "tools")
    estimate = estimate_texts(texts) + (estimate_tokens(fields.json_text(tools)) if tools else 0)
    return stream, max_tokens, estimate


def _collect(content: Any, texts: list[str]) -> None:
    if isinstance(content, str):
        texts.append(content)
    elif isinstance(content, list):
        for block in content:
            if not isinstance(block, dict):
                continue
            for key in ("text", "thinking", "name"):
                if isinstance(block.get(key), str):
                    texts.append(block[key])
            if isinstance(block.get("input"), dict):
                texts.append(fields.json_text(block["input"]))
            _collect(block.get("content"), texts)


# -- request -> neutral --------------------------------------------------------------------

def _image(source: Any, where: str) -> Image:
    if isinstance(source, dict):
        if source.get("type") == "base64" and isinstance(source.get("data"), str) \
                and isinstance(source.get("media_type"), str):
            return Image(f"data:{source['media_type']};base64,{source['data']}")
        if source.get("type") == "url" and isinstance(source.get("url"), str):
            return Image(source["url"])
    raise invalid("image blocks need a base64 or url source", where)


def _block_parts(content: Any, where: str) -> list[Part]:
    """Text and image blocks (a tool result's content, a user message's plain blocks)."""
    if content is None:
        return []
    if isinstance(content, str):
        return [Text(content)]
    if not isinstance(content, list):
        raise invalid("content must be a string or an array of blocks", where)
    parts: list[Part] = []
    for block in content:
        kind = block.get("type") if isinstance(block, dict) else None
        if kind == "text" and isinstance(block.get("text"), str):
            parts.append(Text(block["text"]))
        elif kind == "image":
            parts.append(_image(block.get("source"), where))
        else:
            raise invalid(f"content block type {kind!r} cannot be converted for this channel",
                          where)
    return parts


def _message_turns(message: dict[str, Any], where: str) -> list[Turn]:
    role = message.get("role")
    if role not in ("user", "assistant"):
        raise invalid(f"message role {role!r} is not supported", where)
    content = message.get("content")
    if isinstance(content, str):
        return [Turn(role, [Text(content)])]
    if not isinstance(content, list):
        raise invalid("content must be a string or an array of blocks", where)
    results: list[Turn] = []
    turn = Turn(role)
    for block in content:
        kind = block.get("type") if isinstance(block, dict) else None
        if kind in ("thinking", "redacted_thinking"):
            continue
        if kind == "tool_use" and role == "assistant":
            if not isinstance(block.get("name"), str):
                raise invalid("tool_use blocks need a name", where)
            turn.tool_calls.append(ToolCall(str(block.get("id") or new_id("toolu_")),
                                            block["name"],
                                            fields.json_text(block.get("input") or {})))
        elif kind == "tool_result" and role == "user":
            if not isinstance(block.get("tool_use_id"), str):
                raise invalid("tool_result blocks need a tool_use_id", where)
            parts = _block_parts(block.get("content"), where)
            if block.get("is_error") is True:
                parts = [Text("Error: "), *parts]
            results.append(Turn("tool", parts, tool_call_id=block["tool_use_id"]))
        else:
            turn.parts.extend(_block_parts([block], where))
    if turn.parts or turn.tool_calls or not results:
        results.append(turn)
    return results


def _system_turn(system: Any) -> list[Turn]:
    parts = _block_parts(system, "system")
    return [Turn("system", parts)] if parts else []


def to_conversation(body: dict[str, Any]) -> Conversation:
    turns = _system_turn(body.get("system"))
    for position, message in enumerate(body.get("messages") or ()):
        if not isinstance(message, dict):
            raise invalid("each message must be an object", f"messages[{position}]")
        turns.extend(_message_turns(message, f"messages[{position}]"))
    metadata = body.get("metadata")
    user = metadata.get("user_id") if isinstance(metadata, dict) else None
    return Conversation(
        turns=turns,
        tools=_tools(body.get("tools")),
        **_tool_choice(body.get("tool_choice")),
        max_output_tokens=fields.count(body, "max_tokens"),
        temperature=fields.number(body, "temperature"),
        top_p=fields.number(body, "top_p"),
        stop=body.get("stop_sequences") or None,
        stream=fields.flag(body, "stream"),
        user=user if isinstance(user, str) else None,
        **reasoning.from_messages_thinking(body.get("thinking")),
    )


def _tools(tools: Any) -> list[Tool]:
    result = []
    for tool in tools or ():
        if not isinstance(tool, dict) or not isinstance(tool.get("name"), str) \
                or tool.get("type") not in (None, "custom") or "input_schema" not in tool:
            raise invalid("only client tools with an input_schema can be converted for this "
                          "channel", "tools")
        result.append(Tool(tool["name"], tool.get("description"), tool.get("input_schema")))
    return result


def _tool_choice(choice: Any) -> dict[str, Any]:
    if choice is None:
        return {}
    if not isinstance(choice, dict):
        raise invalid("tool_choice must be an object", "tool_choice")
    kind = choice.get("type")
    result: dict[str, Any] = {}
    if kind == "auto":
        result["tool_choice"] = "auto"
    elif kind == "any":
        result["tool_choice"] = "required"
    elif kind == "none":
        result["tool_choice"] = "none"
    elif kind == "tool" and isinstance(choice.get("name"), str):
        result.update(tool_choice="required", forced_tool=choice["name"])
    else:
        raise invalid("tool_choice cannot be converted for this channel", "tool_choice")
    if choice.get("disable_parallel_tool_use") is True:
        result["parallel_tool_calls"] = False
    return result


# -- neutral -> request --------------------------------------------------------------------

def _image_block(image: Image) -> dict[str, Any]:
    if image.url.startswith("data:"):
        head, _, data = image.url.partition(",")
        media_type = head[5:].split(";")[0] or "image/png"
        if ";base64" not in head:
            raise invalid("only base64 data URLs can be sent to this channel")
        return {"type": "image", "source": {"type": "base64", "media_type": media_type,
                                            "data": data}}
    return {"type": "image", "source": {"type": "url", "url": image.url}}


def _blocks(parts: list[Part]) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = []
    for part in parts:
        if isinstance(part, Text):
            blocks.append({"type": "text", "text": part.text})
        elif isinstance(part, Image):
            blocks.append(_image_block(part))
        else:
            raise invalid("file inputs cannot be sent to this channel")
    return blocks


def _arguments(text: str) -> Any:
    try:
        value = orjson.loads(text or "{}")
    except orjson.JSONDecodeError:
        raise invalid("tool call arguments must be JSON to be sent to this channel") from None
    return value if isinstance(value, dict) else {"value": value}


def from_conversation(conv: Conversation, model: str) -> dict[str, Any]:
    system: list[dict[str, Any]] = []
    messages: list[dict[str, Any]] = []

    def add(role: str, blocks: list[dict[str, Any]]) -> None:
        if messages and messages[-1]["role"] == role:
            messages[-1]["content"].extend(blocks)
        else:
            messages.append({"role": role, "content": blocks})

    for turn in conv.turns:
        if turn.role in ("system", "developer"):
            system.extend(_blocks(turn.parts))
        elif turn.role == "assistant":
            blocks = _blocks(turn.parts)
            blocks.extend({"type": "tool_use", "id": c.id, "name": c.name,
                           "input": _arguments(c.arguments)} for c in turn.tool_calls)
            add("assistant", blocks or [{"type": "text", "text": ""}])
        elif turn.role == "tool":
            add("user", [{"type": "tool_result", "tool_use_id": turn.tool_call_id,
                          "content": _blocks(turn.parts)}])
        else:
            add("user", _blocks(turn.parts) or [{"type": "text", "text": ""}])
    for message in messages:  # a lone text block reads best as a string
        content = message["content"]
        if len(content) == 1 and content[0]["type"] == "text":
            message["content"] = content[0]["text"]
    body: dict[str, Any] = {"model": model, "messages": messages,
                            "max_tokens": conv.max_output_tokens or DEFAULT_MAX_TOKENS}
    if system:
        body["system"] = system[0]["text"] if len(system) == 1 else system
    if conv.tools:
        body["tools"] = [_tool(t) for t in conv.tools]
    choice = _encode_tool_choice(conv)
    if choice is not None:
        body["tool_choice"] = choice
    thinking = None if _thinking_impossible(conv) \
        else reasoning.messages_thinking(conv, conv.max_output_tokens)
    if thinking is not None:
        body["thinking"] = thinking
        if conv.max_output_tokens is None:  # thinking counts inside max_tokens
            body["max_tokens"] = DEFAULT_MAX_TOKENS + thinking["budget_tokens"]
    optional = (("temperature", None if thinking else conv.temperature),
                ("top_p", None if thinking else conv.top_p), ("stop_sequences", conv.stop))
    body.update((k, v) for k, v in optional if v is not None)
    if conv.user is not None:
        body["metadata"] = {"user_id": conv.user}
    if conv.stream:
        body["stream"] = True
    return body


def _thinking_impossible(conv: Conversation) -> bool:
    """Messages refuses thinking with a forced tool, and inside a tool loop unless the last
    assistant turn starts with its own signed thinking -- which a conversion never has."""
    if conv.forced_tool is not None or conv.tool_choice == "required":
        return True
    last = next((t for t in reversed(conv.turns) if t.role == "assistant"), None)
    return last is not None and bool(last.tool_calls)


def _tool(tool: Tool) -> dict[str, Any]:
    encoded: dict[str, Any] = {"name": tool.name,
                               "input_schema": tool.parameters or {"type": "object",
                                                                   "properties": {}}}
    if tool.description is not None:
        encoded["description"] = tool.description
    return encoded


def _encode_tool_choice(conv: Conversation) -> dict[str, Any] | None:
    choice: dict[str, Any] | None
    if conv.forced_tool is not None:
        choice = {"type": "tool", "name": conv.forced_tool}
    elif conv.tool_choice is not None:
        choice = {"type": {"auto": "auto", "required": "any", "none": "none"}.get(
            conv.tool_choice, "auto")}
    else:
        choice = None
    if conv.parallel_tool_calls is False and conv.tools:
        choice = choice or {"type": "auto"}
        if choice["type"] != "none":
            choice["disable_parallel_tool_use"] = True
    return choice


# -- answer <-> neutral --------------------------------------------------------------------

def decode_reply(body: Any) -> Reply:
    """A message object -> ``Reply``."""
    if not isinstance(body, dict) or not isinstance(body.get("content"), list):
        raise UpstreamFormatError("not a message")
    texts: list[str] = []
    thoughts: list[str] = []
    signature: str | None = None
    calls: list[ToolCall] = []
    for block in body["content"]:
        kind = block.get("type") if isinstance(block, dict) else None
        if kind == "text" and isinstance(block.get("text"), str):
            texts.append(block["text"])
        elif kind == "thinking" and isinstance(block.get("thinking"), str):
            thoughts.append(block["thinking"])
            if isinstance(block.get("signature"), str) and block["signature"]:
                signature = block["signature"]
        elif kind == "tool_use":
            calls.append(ToolCall(str(block.get("id") or new_id("toolu_")),
                                  str(block.get("name") or ""),
                                  fields.json_text(block.get("input") or {})))
    return Reply(id=str(body.get("id") or ""), created=now_seconds(),
                 text="".join(texts) if texts or not calls else None, tool_calls=calls,
                 finish=STOP_REASONS.get(str(body.get("stop_reason")), "stop"),
                 usage=extract_usage("messages", body),
                 reasoning="".join(thoughts) if thoughts else None,
                 reasoning_signature=signature)


def encode_reply(reply: Reply, model: str, _request: dict[str, Any]) -> dict[str, Any]:
    """``Reply`` -> a message object for the client (model = the client's name)."""
    content: list[dict[str, Any]] = []
    if reply.reasoning:
        content.append(thinking_block(reply.reasoning))
    text = (reply.text or "") + (reply.refusal or "")
    if text or not reply.tool_calls:
        content.append({"type": "text", "text": text})
    for call in reply.tool_calls:
        try:
            arguments = orjson.loads(call.arguments or "{}")
        except orjson.JSONDecodeError:
            arguments = {}
        content.append({"type": "tool_use", "id": call.id, "name": call.name,
                        "input": arguments if isinstance(arguments, dict) else {}})
    ident = reply.id if reply.id.startswith("msg") else new_id("msg_")
    return {"id": ident, "type": "message", "role": "assistant", "model": model,
            "content": content, "stop_reason": stop_reason(reply.finish_reason()),
            "stop_sequence": None,
            "usage": messages_usage(reply.usage or Usage())}


def thinking_block(text: str) -> dict[str, Any]:
    """A ``thinking`` block of a converted answer (no signature can be valid: module doc)."""
    return {"type": "thinking", "thinking": text, "signature": ""}


def messages_usage(usage: Usage) -> dict[str, Any]:
    """``Usage`` as a Messages ``usage`` object (input excludes cache reads and writes)."""
    writes = usage.cache_write_5m + usage.cache_write_1h
    return {
        "input_tokens": max(0, usage.input - usage.cache_read - writes),
        "cache_creation_input_tokens": writes,
        "cache_read_input_tokens": usage.cache_read,
        "cache_creation": {"ephemeral_5m_input_tokens": usage.cache_write_5m,
                           "ephemeral_1h_input_tokens": usage.cache_write_1h},
        "output_tokens": usage.output,
    }

