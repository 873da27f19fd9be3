"""The chat-completions format (``/v1/chat/completions``, channel type ``compat``).

- ``read_request``: checks the fields the gateway reads (§8.1) and estimates input tokens.
- ``to_conversation`` / ``from_conversation``: the request in and out of the neutral model.
  Encoding for an upstream uses ``max_tokens`` (the spelling every OpenAI-compatible server
  knows) and drops nothing the neutral model carries.
- ``decode_reply`` / ``encode_reply``: a non-stream answer in and out of ``Reply`` (first choice;
  §9.3 — tool calls, finish reason, usage, ``model`` = the client's model name).  Reasoning
  text travels in the non-standard ``reasoning_content`` field (``reasoning`` is read too); see
  ``gateway.protocols.reasoning`` for that choice and for the effort <-> budget table.

Content a chat message can hold but the neutral model cannot (``input_audio`` parts, custom
tools, the deprecated ``function_call``) is refused with a 400 when a conversion is needed.
"""

from __future__ import annotations

from typing import Any

from gateway.protocols import fields, reasoning
from gateway.protocols.conversation import Conversation, File, Image, Part, Text, Tool, Turn
from gateway.protocols.errors import UpstreamFormatError, invalid
from gateway.protocols.estimate import estimate_texts, estimate_tokens
from gateway.protocols.events import FinishReason, Reply, ToolCall, new_id, now_seconds
from gateway.protocols.usage import chat_usage, extract_usage

FINISH_REASONS: dict[str, FinishReason] = {
    "stop": "stop", "length": "length", "tool_calls": "tool_calls",
    "function_call": "tool_calls", "content_filter": "content_filter",
}
_ROLES = ("system", "developer", "user", "assistant", "tool")


def read_request(body: dict[str, Any]) -> tuple[bool, bool, int | None, int]:
    """(stream, include_usage, max output tokens, estimated input tokens) of a chat request."""
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise invalid("messages are required", "messages")
    texts: list[str] = []
    for position, message in enumerate(messages):
        if not isinstance(message, dict) or not isinstance(message.get("role"), str):
            raise invalid("each message must be an object with a role", f"messages[{position}]")
        _collect_texts(message, texts)
    stream = fields.flag(body, "stream")
    options = fields.optional_object(body, "stream_options")
    include_usage = fields.flag(options, "include_usage")
    max_completion = fields.count(body, "max_completion_tokens")
    max_tokens = fields.count(body, "max_tokens")
    fields.count(body, "n", minimum=1)
    fields.number(body, "temperature")
    tools = fields.optional_list(body, "tools")
    estimate = estimate_texts(texts) + (estimate_tokens(fields.json_text(tools)) if tools else 0)
    return stream, include_usage, max_completion if max_completion is not None else max_tokens, \
        estimate


def _collect_texts(message: dict[str, Any], texts: list[str]) -> None:
    content = message.get("content")
    if isinstance(content, str):
        texts.append(content)
    elif isinstance(content, list):
        for part in content:
            if isinstance(part, dict):
                for key in ("text", "refusal"):
                    if isinstance(part.get(key), str):
                        texts.append(part[key])
    calls = message.get("tool_calls")
    for call in calls if isinstance(calls, list) else ():
        function = call.get("function") if isinstance(call, dict) else None
        if isinstance(function, dict):
            texts.extend(v for v in (function.get("name"), function.get("arguments"))
                         if isinstance(v, str))


# -- request <-> neutral -------------------------------------------------------------------

def _parts(content: Any, where: str) -> list[Part]:
    if content is None:
        return []
    if isinstance(content, str):
        return [Text(content)]
    if not isinstance(content, list):
        raise invalid("content must be a string or an array of parts", where)
    parts: list[Part] = []
    for part in content:
        kind = part.get("type") if isinstance(part, dict) else None
        if kind == "text" and isinstance(part.get("text"), str):
            parts.append(Text(part["text"]))
        elif kind == "refusal" and isinstance(part.get("refusal"), str):
            parts.append(Text(part["refusal"]))
        elif kind == "image_url":
            image = part.get("image_url")
            if isinstance(image, str):
                parts.append(Image(image))
            elif isinstance(image, dict) and isinstance(image.get("url"), str):
                parts.append(Image(image["url"], image.get("detail")))
            else:
                raise invalid("image_url part needs a url", where)
        elif kind == "file" and isinstance(part.get("file"), dict):
            file = part["file"]
            parts.append(File(file.get("file_id"), file.get("file_data"), file.get("filename")))
        else:
            raise invalid(f"content part type {kind!r} is not supported by this channel", where)
    return parts


def _tool_calls(calls: Any, where: str) -> list[ToolCall]:
    if calls is None:
        return []
    if not isinstance(calls, list):
        raise invalid("tool_calls must be an array", where)
    result = []
    for call in calls:
        function = call.get("function") if isinstance(call, dict) else None
        if not isinstance(function, dict) or not isinstance(function.get("name"), str):
            raise invalid("only function tool calls can be converted", where)
        arguments = function.get("arguments")
        result.append(ToolCall(str(call.get("id") or new_id("call_")), function["name"],
                               arguments if isinstance(arguments, str) else "{}"))
    return result


def to_conversation(body: dict[str, Any]) -> Conversation:
    turns: list[Turn] = []
    for position, message in enumerate(body.get("messages") or ()):
        where = f"messages[{position}]"
        role = message.get("role")
        if role not in _ROLES:
            raise invalid(f"message role {role!r} is not supported by this channel", where)
        if message.get("function_call") is not None:
            raise invalid("function_call is not supported by this channel; use tool_calls",
                          where)
        turn = Turn(role, _parts(message.get("content"), where))
        if role == "assistant":
            turn.tool_calls = _tool_calls(message.get("tool_calls"), where)
        elif role == "tool":
            if not isinstance(message.get("tool_call_id"), str):
                raise invalid("tool messages need a tool_call_id", where)
            turn.tool_call_id = message["tool_call_id"]
        turns.append(turn)
    if (fields.count(body, "n", minimum=1) or 1) > 1:
        raise invalid("n > 1 is not supported by this channel", "n")
    return Conversation(
        turns=turns,
        tools=_tools(body.get("tools")),
        **_tool_choice(body.get("tool_choice")),
        max_output_tokens=fields.count(body, "max_completion_tokens")
        if body.get("max_completion_tokens") is not None else fields.count(body, "max_tokens"),
        temperature=fields.number(body, "temperature"),
        top_p=fields.number(body, "top_p"),
        stop=[body["stop"]] if isinstance(body.get("stop"), str) else body.get("stop"),
        stream=fields.flag(body, "stream"),
        parallel_tool_calls=body.get("parallel_tool_calls"),
        user=body.get("user"),
        output_format=_output_format(body.get("response_format")),
        reasoning_effort=body.get("reasoning_effort"),
    )


def _tools(tools: Any) -> list[Tool]:
    result = []
    for tool in tools or ():
        function = tool.get("function") if isinstance(tool, dict) else None
        if not isinstance(function, dict) or tool.get("type") != "function" \
                or not isinstance(function.get("name"), str):
            raise invalid("only function tools can be converted for this channel", "tools")
        result.append(Tool(function["name"], function.get("description"),
                           function.get("parameters"), function.get("strict")))
    return result


def _tool_choice(choice: Any) -> dict[str, Any]:
    if choice is None:
        return {}
    if choice in ("auto", "none", "required"):
        return {"tool_choice": choice}
    if isinstance(choice, dict) and choice.get("type") == "function":
        function = choice.get("function")
        if isinstance(function, dict) and isinstance(function.get("name"), str):
            return {"tool_choice": "required", "forced_tool": function["name"]}
    raise invalid("tool_choice cannot be converted for this channel", "tool_choice")


def _output_format(value: Any) -> dict[str, Any] | None:
    if not isinstance(value, dict):
        return None
    if value.get("type") == "json_schema" and isinstance(value.get("json_schema"), dict):
        return {"type": "json_schema", **value["json_schema"]}
    return dict(value)


def _content(parts: list[Part], *, empty: Any) -> Any:
    if not parts:
        return empty
    if len(parts) == 1 and isinstance(parts[0], Text):
        return parts[0].text
    encoded: list[dict[str, Any]] = []
    for part in parts:
        if isinstance(part, Text):
            encoded.append({"type": "text", "text": part.text})
        elif isinstance(part, Image):
            image: dict[str, Any] = {"url": part.url}
            if part.detail is not None:
                image["detail"] = part.detail
            encoded.append({"type": "image_url", "image_url": image})
        else:
            file = {k: v for k, v in (("file_id", part.file_id), ("file_data", part.file_data),
                                       ("filename", part.filename)) if v is not None}
            encoded.append({"type": "file", "file": file})
    return encoded


def from_conversation(conv: Conversation, model: str) -> dict[str, Any]:
    messages: list[dict[str, Any]] = []
    for turn in conv.turns:
        if turn.role == "assistant":
            message: dict[str, Any] = {"role": "assistant",
                                       "content": _content(turn.parts, empty=None)}
            if turn.tool_calls:
                message["tool_calls"] = [
                    {"id": c.id, "type": "function",
                     "function": {"name": c.name, "arguments": c.arguments}}
                    for c in turn.tool_calls]
        elif turn.role == "tool":
            message = {"role": "tool", "tool_call_id": turn.tool_call_id,
                       "content": _content(turn.parts, empty="")}
        else:
            message = {"role": turn.role, "content": _content(turn.parts, empty="")}
        messages.append(message)
    body: dict[str, Any] = {"model": model, "messages": messages}
    if conv.tools:
        body["tools"] = [{"type": "function", "function": _function(t)} for t in conv.tools]
    if conv.forced_tool is not None:
        body["tool_choice"] = {"type": "function", "function": {"name": conv.forced_tool}}
    elif conv.tool_choice is not None:
        body["tool_choice"] = conv.tool_choice
    optional = (("max_tokens", conv.max_output_tokens), ("temperature", conv.temperature),
                ("top_p", conv.top_p), ("stop", conv.stop),
                ("parallel_tool_calls", conv.parallel_tool_calls), ("user", conv.user),
                ("reasoning_effort", reasoning.effort(conv)))
    body.update((k, v) for k, v in optional if v is not None)
    if conv.output_format is not None:
        fmt = dict(conv.output_format)
        kind = fmt.pop("type", None)
        body["response_format"] = ({"type": "json_schema", "json_schema": fmt}
                                   if kind == "json_schema" else {"type": kind})
    if conv.stream:
        body["stream"] = True
        body["stream_options"] = {"include_usage": True}
    return body


def _function(tool: Tool) -> dict[str, Any]:
    function: dict[str, Any] = {"name": tool.name}
    if tool.description is not None:
        function["description"] = tool.description
    if tool.parameters is not None:
        function["parameters"] = tool.parameters
    if tool.strict is not None:
        function["strict"] = tool.strict
    return function


# -- answer <-> neutral --------------------------------------------------------------------

def decode_reply(body: Any) -> Reply:
    """A chat-completion answer -> ``Reply`` (first choice)."""
    if not isinstance(body, dict) or not isinstance(body.get("choices"), list):
        raise UpstreamFormatError("not a chat completion")
    reply = Reply(id=str(body.get("id") or ""), created=_created(body.get("created")),
                  text=None, usage=extract_usage("chat", body))
    if not body["choices"]:
        return reply
    choice = body["choices"][0]
    message = choice.get("message") if isinstance(choice, dict) else None
    if not isinstance(message, dict):
        raise UpstreamFormatError("chat choice without a message")
    content = message.get("content")
    if isinstance(content, list):  # some compatible servers answer with parts
        content = "".join(p.get("text", "") for p in content
                          if isinstance(p, dict) and isinstance(p.get("text"), str))
    reply.text = content if isinstance(content, str) else None
    if isinstance(message.get("refusal"), str):
        reply.refusal = message["refusal"]
    reply.reasoning = reasoning_text(message)
    try:
        reply.tool_calls = _tool_calls(message.get("tool_calls"), "tool_calls")
    except Exception as exc:
        raise UpstreamFormatError("unreadable tool calls") from exc
    reply.finish = FINISH_REASONS.get(str(choice.get("finish_reason")), "stop")
    return reply


def reasoning_text(message: dict[str, Any]) -> str | None:
    """The reasoning a compatible server put on a message or delta (module doc)."""
    for key in ("reasoning_content", "reasoning"):
        value = message.get(key)
        if isinstance(value, str) and value:
            return value
    return None


def _created(value: Any) -> int:
    return int(value) if isinstance(value, int | float) and not isinstance(value, bool) \
        else now_seconds()


def encode_reply(reply: Reply, model: str) -> dict[str, Any]:
    """``Reply`` -> a chat-completion answer for the client (model = the client's name)."""
    message: dict[str, Any] = {"role": "assistant", "content": reply.text,
                               "refusal": reply.refusal}
    if reply.reasoning:
        message["reasoning_content"] = reply.reasoning
    if reply.tool_calls:
        message["tool_calls"] = [
            {"id": c.id, "type": "function", "function": {"name": c.name,
                                                          "arguments": c.arguments}}
            for c in reply.tool_calls]
    body: dict[str, Any] = {
        "id": reply.id or new_id("chatcmpl-"),
        "object": "chat.completion",
        "created": reply.created,
        "model": model,
        "choices": [{"index": 0, "message": message, "logprobs": None,
                     "finish_reason": reply.finish_reason()}],
    }
    if reply.usage is not None:
        body["usage"] = chat_usage(reply.usage)
    return body
