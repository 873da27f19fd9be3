"""The Responses format (``/v1/responses``, channel type ``responses``).

- ``read_request``: checks the fields the gateway reads (§8.1), estimates input tokens.
- ``to_conversation`` / ``from_conversation``: input items <-> neutral turns.  ``instructions``
  becomes a leading system turn; consecutive ``function_call`` items join the assistant turn
  before them; ``reasoning`` items are dropped (they only make sense to the model that wrote
  them); other hosted-tool items, non-function tools and ``item_reference`` are refused (400).
  Encoding for an upstream drops ``stop`` (Responses has none) and sets ``store: false``
  (what a chat client expects: nothing kept upstream).
- ``decode_reply`` / ``encode_reply`` / ``response_object``: the response object in and out of
  ``Reply``; tool calls are ``function_call`` items in ``output[]`` (§9.3), the finish reason is
  ``status`` + ``incomplete_details``.  ``reasoning`` output items (their ``summary`` text, or
  ``reasoning_text`` content from open-weight servers) <-> ``Reply.reasoning``; an item we
  build carries no ``encrypted_content`` (none from another provider would be valid).
  ``reasoning`` settings map as ``gateway.protocols.reasoning`` says.
"""

from __future__ import annotations

from typing import Any

from gateway.protocols import fields, reasoning
from gateway.protocols.conversation import Conversation, File, Image, Part, Text, Tool, Turn
from gateway.protocols.errors import UpstreamFormatError, invalid
from gateway.protocols.estimate import estimate_texts, estimate_tokens
from gateway.protocols.events import FinishReason, Reply, ToolCall, new_id, now_seconds
from gateway.protocols.usage import extract_usage, responses_usage

_MESSAGE_ROLES = ("system", "developer", "user", "assistant")
_TEXT_PARTS = ("input_text", "output_text")


def read_request(body: dict[str, Any]) -> tuple[bool, int | None, int]:
    """(stream, max output tokens, estimated input tokens) of a Responses request."""
    source = body.get("input")
    if source is not None and not isinstance(source, str | list | dict):
        raise invalid("input must be a string or an array of items", "input")
    instructions = body.get("instructions")
    if instructions is not None and not isinstance(instructions, str | list):
        raise invalid("instructions must be a string", "instructions")
    stream = fields.flag(body, "stream")
    max_output = fields.count(body, "max_output_tokens")
    fields.number(body, "temperature")
    tools = fields.optional_list(body, "tools")
    texts: list[str] = [instructions] if isinstance(instructions, str) else []
    if isinstance(source, str):
        texts.append(source)
    else:
        for item in source if isinstance(source, list) else [source] if source else []:
            if not isinstance(item, dict):
                raise invalid("input items must be objects", "input")
            _collect_texts(item, texts)
    estimate = estimate_texts(texts) + (estimate_tokens(fields.json_text(tools)) if tools else 0)
    return stream, max_output, estimate


def _collect_texts(item: dict[str, Any], texts: list[str]) -> None:
    for key in ("arguments", "name"):
        if isinstance(item.get(key), str):
            texts.append(item[key])
    for key in ("content", "output"):
        value = item.get(key)
        if isinstance(value, str):
            texts.append(value)
        elif isinstance(value, list):
            texts.extend(p["text"] for p in value
                         if isinstance(p, dict) and isinstance(p.get("text"), str))


# -- request <-> neutral -------------------------------------------------------------------

def _parts(content: Any, where: str) -> list[Part]:
    if isinstance(content, str):
        return [Text(content)]
    if not isinstance(content, list):
        raise invalid("content must be a string or an array of parts", where)
    parts: list[Part] = []
    for part in content:
        kind = part.get("type") if isinstance(part, dict) else None
        if kind in _TEXT_PARTS and isinstance(part.get("text"), str):
            parts.append(Text(part["text"]))
        elif kind == "refusal" and isinstance(part.get("refusal"), str):
            parts.append(Text(part["refusal"]))
        elif kind == "input_image" and isinstance(part.get("image_url"), str):
            parts.append(Image(part["image_url"], part.get("detail")))
        elif kind == "input_file" and (part.get("file_id") or part.get("file_data")):
            parts.append(File(part.get("file_id"), part.get("file_data"), part.get("filename")))
        else:
            raise invalid(f"content part type {kind!r} is not supported by this channel", where)
    return parts


def to_conversation(body: dict[str, Any]) -> Conversation:
    source = body.get("input")
    if source is None or source == "" or source == []:
        raise invalid("input is required", "input")
    items = [{"role": "user", "content": source}] if isinstance(source, str) else \
        source if isinstance(source, list) else [source]
    turns: list[Turn] = []
    if isinstance(body.get("instructions"), str) and body["instructions"]:
        turns.append(Turn("system", [Text(body["instructions"])]))
    for position, item in enumerate(items):
        where = f"input[{position}]"
        kind = item.get("type")
        if kind in (None, "message"):
            role = item.get("role")
            if role not in _MESSAGE_ROLES:
                raise invalid(f"input role {role!r} is not supported", where)
            turns.append(Turn(role, _parts(item.get("content"), where)))
        elif kind == "function_call":
            call_id, name = item.get("call_id"), item.get("name")
            if not isinstance(call_id, str) or not isinstance(name, str):
                raise invalid("function_call items need call_id and name", where)
            arguments = item.get("arguments")
            call = ToolCall(call_id, name, arguments if isinstance(arguments, str) else "{}")
            if turns and turns[-1].role == "assistant":
                turns[-1].tool_calls.append(call)
            else:
                turns.append(Turn("assistant", [], [call]))
        elif kind == "function_call_output":
            if not isinstance(item.get("call_id"), str):
                raise invalid("function_call_output items need a call_id", where)
            output = item.get("output")
            parts = _parts(output, where) if output is not None else []
            turns.append(Turn("tool", parts, tool_call_id=item["call_id"]))
        elif kind == "reasoning":
            continue
        else:
            raise invalid(f"input item type {kind!r} is not supported by this channel", where)
    text = fields.optional_object(body, "text")
    settings = fields.optional_object(body, "reasoning")
    return Conversation(
        turns=turns,
        tools=_tools(body.get("tools")),
        **_tool_choice(body.get("tool_choice")),
        max_output_tokens=fields.count(body, "max_output_tokens"),
        temperature=fields.number(body, "temperature"),
        top_p=fields.number(body, "top_p"),
        stream=fields.flag(body, "stream"),
        parallel_tool_calls=body.get("parallel_tool_calls"),
        user=body.get("user"),
        output_format=text.get("format") if isinstance(text.get("format"), dict) else None,
        **reasoning.from_responses_reasoning(settings),
    )


def _tools(tools: Any) -> list[Tool]:
    result = []
    for tool in tools or ():
        if not isinstance(tool, dict) or tool.get("type") != "function" \
                or not isinstance(tool.get("name"), str):
            raise invalid("only function tools can be converted for this channel", "tools")
        result.append(Tool(tool["name"], tool.get("description"), tool.get("parameters"),
                           tool.get("strict")))
    return result


def _tool_choice(choice: Any) -> dict[str, Any]:
    if choice is None:
        return {}
    if choice in ("auto", "none", "required"):
        return {"tool_choice": choice}
    if isinstance(choice, dict) and choice.get("type") == "function" \
            and isinstance(choice.get("name"), str):
        return {"tool_choice": "required", "forced_tool": choice["name"]}
    raise invalid("tool_choice cannot be converted for this channel", "tool_choice")


def _input_part(part: Part, role: str) -> dict[str, Any]:
    if isinstance(part, Text):
        return {"type": "output_text" if role == "assistant" else "input_text",
                "text": part.text}
    if isinstance(part, Image):
        image: dict[str, Any] = {"type": "input_image", "image_url": part.url}
        if part.detail is not None:
            image["detail"] = part.detail
        return image
    encoded: dict[str, Any] = {"type": "input_file"}
    encoded.update((k, v) for k, v in (("file_id", part.file_id), ("file_data", part.file_data),
                                       ("filename", part.filename)) if v is not None)
    return encoded


def from_conversation(conv: Conversation, model: str) -> dict[str, Any]:
    items: list[dict[str, Any]] = []
    for turn in conv.turns:
        if turn.role == "tool":
            texts_only = all(isinstance(p, Text) for p in turn.parts)
            items.append({"type": "function_call_output", "call_id": turn.tool_call_id,
                          "output": turn.text() if texts_only else
                          [_input_part(p, "user") for p in turn.parts]})
            continue
        if turn.role != "assistant" or turn.parts or not turn.tool_calls:
            items.append({"type": "message", "role": turn.role,
                          "content": [_input_part(p, turn.role) for p in turn.parts]})
        items.extend({"type": "function_call", "call_id": c.id, "name": c.name,
                      "arguments": c.arguments} for c in turn.tool_calls)
    body: dict[str, Any] = {"model": model, "input": items, "store": False}
    if conv.tools:
        body["tools"] = [_tool(t) for t in conv.tools]
    if conv.forced_tool is not None:
        body["tool_choice"] = {"type": "function", "name": conv.forced_tool}
    elif conv.tool_choice is not None:
        body["tool_choice"] = conv.tool_choice
    optional = (("max_output_tokens", conv.max_output_tokens), ("temperature", conv.temperature),
                ("top_p", conv.top_p), ("parallel_tool_calls", conv.parallel_tool_calls),
                ("user", conv.user))
    body.update((k, v) for k, v in optional if v is not None)
    if conv.output_format is not None:
        body["text"] = {"format": conv.output_format}
    settings = reasoning.responses_reasoning(conv)
    if settings is not None:
        body["reasoning"] = settings
    if conv.stream:
        body["stream"] = True
    return body


def _tool(tool: Tool) -> dict[str, Any]:
    encoded: dict[str, Any] = {"type": "function", "name": tool.name}
    if tool.description is not None:
        encoded["description"] = tool.description
    if tool.parameters is not None:
        encoded["parameters"] = tool.parameters
    if tool.strict is not None:
        encoded["strict"] = tool.strict
    return encoded


# -- answer <-> neutral --------------------------------------------------------------------

def finish_from_status(status: Any, incomplete: Any) -> FinishReason:
    if status == "incomplete":
        reason = incomplete.get("reason") if isinstance(incomplete, dict) else None
        return "content_filter" if reason == "content_filter" else "length"
    return "stop"


def decode_reply(body: Any) -> Reply:
    """A response object -> ``Reply``."""
    if not isinstance(body, dict) or not isinstance(body.get("output"), list):
        raise UpstreamFormatError("not a response object")
    if body.get("status") == "failed":
        raise UpstreamFormatError("the upstream response failed")
    created = body.get("created_at")
    reply = Reply(id=str(body.get("id") or ""),
                  created=int(created) if isinstance(created, int | float) else now_seconds(),
                  text=None, usage=extract_usage("responses", body),
                  finish=finish_from_status(body.get("status"), body.get("incomplete_details")))
    texts: list[str] = []
    thoughts: list[str] = []
    for item in body["output"]:
        if not isinstance(item, dict):
            raise UpstreamFormatError("output items must be objects")
        if item.get("type") == "message":
            pieces = []
            for part in item.get("content") or ():
                if part.get("type") == "output_text":
                    pieces.append(str(part.get("text") or ""))
                elif part.get("type") == "refusal":
                    reply.refusal = (reply.refusal or "") + str(part.get("refusal") or "")
            if pieces:
                texts.append("".join(pieces))
        elif item.get("type") == "reasoning":
            thoughts.extend(reasoning_item_texts(item))
            if isinstance(item.get("encrypted_content"), str):
                reply.reasoning_signature = item["encrypted_content"]
        elif item.get("type") == "function_call":
            if not isinstance(item.get("name"), str):
                raise UpstreamFormatError("function_call without a name")
            arguments = item.get("arguments")
            reply.tool_calls.append(ToolCall(str(item.get("call_id") or new_id("call_")),
                                             item["name"],
                                             arguments if isinstance(arguments, str) else "{}"))
    reply.text = "\n".join(texts) if texts else None
    reply.reasoning = "\n\n".join(thoughts) if thoughts else None
    return reply


def reasoning_item_texts(item: dict[str, Any]) -> list[str]:
    """The summary texts of a reasoning item (else its full ``reasoning_text`` content)."""
    summary = [str(p.get("text") or "") for p in item.get("summary") or ()
               if isinstance(p, dict) and p.get("type") == "summary_text"]
    if summary:
        return summary
    return [str(p.get("text") or "") for p in item.get("content") or ()
            if isinstance(p, dict) and p.get("type") == "reasoning_text"]


def reasoning_item(item_id: str, summary: list[str], status: str = "completed"
                   ) -> dict[str, Any]:
    return {"type": "reasoning", "id": item_id, "status": status,
            "summary": [{"type": "summary_text", "text": text} for text in summary]}


def message_item(item_id: str, text: str | None, refusal: str | None = None,
                 status: str = "completed") -> dict[str, Any]:
    content: list[dict[str, Any]] = []
    if text is not None:
        content.append({"type": "output_text", "text": text, "annotations": [], "logprobs": []})
    if refusal is not None:
        content.append({"type": "refusal", "refusal": refusal})
    return {"type": "message", "id": item_id, "status": status, "role": "assistant",
            "content": content}


def call_item(item_id: str, call: ToolCall, status: str = "completed") -> dict[str, Any]:
    return {"type": "function_call", "id": item_id, "call_id": call.id, "name": call.name,
            "arguments": call.arguments, "status": status}


_ECHOED: tuple[tuple[str, Any], ...] = (
           ("instructions", None), ("max_output_tokens", None), ("metadata", {}),
           ("parallel_tool_calls", True), ("previous_response_id", None), ("reasoning", None),
           ("temperature", None), ("text", {"format": {"type": "text"}}), ("tool_choice", "auto"),
           ("tools", []), ("top_p", None), ("user", None))


def response_object(response_id: str, created: int, model: str, request: dict[str, Any],
                    status: str, output: list[dict[str, Any]],
                    finish: FinishReason | None = None, usage: dict[str, Any] | None = None,
                    error: dict[str, Any] | None = None) -> dict[str, Any]:
    """A response object for the client: our output, the client's own settings echoed."""
    incomplete = None
    if status == "incomplete":
        incomplete = {"reason": "content_filter" if finish == "content_filter"
                      else "max_output_tokens"}
    body: dict[str, Any] = {"id": response_id, "object": "response", "created_at": created,
                            "status": status, "error": error, "incomplete_details": incomplete,
                            "model": model, "output": output}
    for key, default in _ECHOED:
        value = request.get(key)
        body[key] = default if value is None else value
    body["usage"] = usage
    return body


def status_for(finish: FinishReason) -> str:
    return "incomplete" if finish in ("length", "content_filter") else "completed"


def encode_reply(reply: Reply, model: str, request: dict[str, Any]) -> dict[str, Any]:
    """``Reply`` -> a response object for the client (model = the client's name)."""
    output: list[dict[str, Any]] = []
    if reply.reasoning:
        output.append(reasoning_item(new_id("rs_"), [reply.reasoning]))
    if reply.text is not None or reply.refusal is not None:
        output.append(message_item(new_id("msg_"), reply.text, reply.refusal))
    output.extend(call_item(new_id("fc_"), call) for call in reply.tool_calls)
    finish = reply.finish_reason()
    body = response_object(response_id_for(reply.id), reply.created, model, request,
                           status_for(finish), output, finish,
                           responses_usage(reply.usage) if reply.usage else None)
    body["output_text"] = reply.text or ""
    return body


def response_id_for(upstream_id: str) -> str:
    if upstream_id.startswith("resp_"):
        return upstream_id
    return "resp_" + upstream_id if upstream_id else new_id("resp_")
