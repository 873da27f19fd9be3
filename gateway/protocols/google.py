"""The Google ``generateContent`` format (``/v1[beta]/models/<model>:<action>``, channel type
``modelaction``; contract §8.1, §9.2-§9.3).

- ``parse_model_action``: the ``<model>:<action>`` path segment (404 when malformed).
- ``read_request``: checks the fields the gateway reads and estimates input tokens; the model
  and the stream flag come from the path, not the body.
- ``to_conversation`` / ``from_conversation``: ``contents`` <-> neutral turns.  Google function
  calls carry no id (newer APIs may): one is synthesised and the matching ``functionResponse``
  (same name, in order) gets it, so the other formats can pair them; in the other direction a
  tool turn's function name is found from the call it answers.  ``thought`` parts in the history
  are dropped (``gateway.protocols.reasoning``: only their author can use them), ``thinkingConfig``
  maps through that module's effort <-> budget table; non-function tools (search, code
  execution) and non-image media are refused with a 400.
- ``decode_reply`` / ``encode_reply`` / ``google_usage``: GenerateContentResponse in and out of
  ``Reply``; ``modelVersion`` = the client's model name.  ``thought: true`` parts <->
  ``Reply.reasoning`` (``thoughtSignature`` is read, never written on a converted answer).
"""

from __future__ import annotations

from typing import Any
from urllib.parse import unquote

import orjson

from gateway.billing.usage import Usage
from gateway.protocols import fields, reasoning
from gateway.protocols.conversation import Conversation, Image, Part, Text, Tool, Turn
from gateway.protocols.errors import UpstreamFormatError, invalid
from gateway.protocols.estimate import estimate_texts, estimate_tokens
from gateway.protocols.events import FinishReason, Reply, ToolCall, new_id, now_seconds
from gateway.protocols.usage import extract_usage

ACTIONS = ("generateContent", "streamGenerateContent")

FINISH_REASONS: dict[str, FinishReason] = {
    "STOP": "stop", "MAX_TOKENS": "length", "SAFETY": "content_filter",
    "RECITATION": "content_filter", "BLOCKLIST": "content_filter",
    "PROHIBITED_CONTENT": "content_filter", "SPII": "content_filter",
    "IMAGE_SAFETY": "content_filter",
}
_TO_FINISH = {"stop": "STOP", "length": "MAX_TOKENS", "tool_calls": "STOP",
              "content_filter": "SAFETY"}


def finish_reason(reason: FinishReason) -> str:
    return _TO_FINISH[reason]


def parse_model_action(segment: str) -> tuple[str, str] | None:
    """(model, action) of ``[models/]<model>:<action>``, or None when malformed."""
    segment = unquote(segment)
    model, sep, action = segment.rpartition(":")
    model = model.removeprefix("models/")
    if not sep or not model.strip() or not action or "/" in model:
        return None
    return model.strip(), action


def upstream_path(model: str, stream: bool) -> bytes:
    """The channel endpoint for ``model`` (§6.1): SSE streaming uses ``alt=sse``."""
    action = "streamGenerateContent?alt=sse" if stream else "generateContent"
    return f"/v1beta/models/{model}:{action}".encode()


def read_request(body: dict[str, Any]) -> tuple[int | None, int]:
    """(max output tokens, estimated input tokens) of a generateContent request."""
    contents = body.get("contents")
    if not isinstance(contents, list) or not contents:
        raise invalid("contents are required", "contents")
    texts: list[str] = []
    system = body.get("systemInstruction")
    if system is not None:
        if not isinstance(system, dict):
            raise invalid("systemInstruction must be an object", "systemInstruction")
        _collect(system, texts)
    for position, content in enumerate(contents):
        if not isinstance(content, dict):
            raise invalid("each content must be an object", f"contents[{position}]")
        _collect(content, texts)
    config = fields.optional_object(body, "generationConfig")
    max_output = fields.count(config, "maxOutputTokens")
    fields.number(config, "temperature")
    tools = fields.optional_list(body, "tools")
    estimate = estimate_texts(texts) + (estimate_tokens(fields.json_text(tools)) if tools else 0)
    return max_output, estimate


def _collect(content: dict[str, Any], texts: list[str]) -> None:
    for part in content.get("parts") or ():
        if not isinstance(part, dict):
            continue
        if isinstance(part.get("text"), str):
            texts.append(part["text"])
        for key in ("functionCall", "functionResponse"):
            if isinstance(part.get(key), dict):
                texts.append(fields.json_text(part[key]))


# -- request -> neutral --------------------------------------------------------------------

def _media(data: Any, where: str) -> Image:
    if not isinstance(data, dict):
        raise invalid("media parts need an object", where)
    mime = str(data.get("mimeType") or "")
    if not mime.startswith("image/"):
        raise invalid(f"media type {mime!r} cannot be converted for this channel", where)
    if isinstance(data.get("data"), str):
        return Image(f"data:{mime};base64,{data['data']}")
    if isinstance(data.get("fileUri"), str):
        return Image(data["fileUri"])
    raise invalid("media parts need data or a fileUri", where)


def to_conversation(body: dict[str, Any], stream: bool = False) -> Conversation:
    turns: list[Turn] = []
    system = body.get("systemInstruction")
    if isinstance(system, dict):
        parts: list[Part] = [Text(p["text"]) for p in system.get("parts") or ()
                 if isinstance(p, dict) and isinstance(p.get("text"), str)]
        if parts:
            turns.append(Turn("system", parts))
    pending: dict[str, list[str]] = {}  # function name -> ids of calls not yet answered
    for position, content in enumerate(body.get("contents") or ()):
        where = f"contents[{position}]"
        if not isinstance(content, dict):
            raise invalid("each content must be an object", where)
        role = content.get("role") or "user"
        if role not in ("user", "model"):
            raise invalid(f"content role {role!r} is not supported", where)
        turn = Turn("assistant" if role == "model" else "user")
        answers: list[Turn] = []
        for part in content.get("parts") or ():
            if not isinstance(part, dict):
                raise invalid("parts must be objects", where)
            if part.get("thought") is True:
                continue
            if isinstance(part.get("text"), str):
                turn.parts.append(Text(part["text"]))
            elif "inlineData" in part or "fileData" in part:
                turn.parts.append(_media(part.get("inlineData") or part.get("fileData"), where))
            elif isinstance(part.get("functionCall"), dict) and role == "model":
                call = part["functionCall"]
                name = str(call.get("name") or "")
                ident = str(call.get("id") or f"call_{name}_{position}_{len(turn.tool_calls)}")
                pending.setdefault(name, []).append(ident)
                turn.tool_calls.append(ToolCall(ident, name,
                                                fields.json_text(call.get("args") or {})))
            elif isinstance(part.get("functionResponse"), dict):
                answer = part["functionResponse"]
                name = str(answer.get("name") or "")
                waiting = pending.get(name) or []
                ident = str(answer.get("id") or (waiting[0] if waiting else new_id("call_")))
                if ident in waiting:
                    waiting.remove(ident)
                answers.append(Turn("tool", [Text(_response_text(answer.get("response")))],
                                    tool_call_id=ident))
            else:
                raise invalid("part cannot be converted for this channel", where)
        turns.extend(answers)
        if turn.parts or turn.tool_calls or not answers:
            turns.append(turn)
    config = fields.optional_object(body, "generationConfig")
    if (fields.count(config, "candidateCount", minimum=1) or 1) > 1:
        raise invalid("candidateCount > 1 is not supported by this channel",
                      "generationConfig.candidateCount")
    stop = config.get("stopSequences")
    return Conversation(
        turns=turns,
        tools=_tools(body.get("tools")),
        **_tool_choice(body.get("toolConfig")),
        max_output_tokens=fields.count(config, "maxOutputTokens"),
        temperature=fields.number(config, "temperature"),
        top_p=fields.number(config, "topP"),
        stop=stop if isinstance(stop, list) and stop else None,
        stream=stream,
        output_format=_output_format(config),
        **reasoning.from_google_thinking(config),
    )


def _response_text(response: Any) -> str:
    """A function response as the text other formats carry: its ``result`` when that is all
    (and would not read back as a JSON object), else the response as JSON text."""
    if isinstance(response, dict) and set(response) == {"result"} \
            and isinstance(response["result"], str) \
            and not isinstance(_json_or_none(response["result"]), dict):
        return response["result"]
    return fields.json_text(response if response is not None else {})


def _json_or_none(text: str) -> Any:
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        return None


def _tools(tools: Any) -> list[Tool]:
    result = []
    for tool in tools or ():
        declarations = tool.get("functionDeclarations") if isinstance(tool, dict) else None
        if not isinstance(declarations, list) or len(tool) != 1:
            raise invalid("only function declarations can be converted for this channel",
                          "tools")
        for declaration in declarations:
            if not isinstance(declaration, dict) or not isinstance(declaration.get("name"), str):
                raise invalid("function declarations need a name", "tools")
            schema = declaration.get("parametersJsonSchema", declaration.get("parameters"))
            result.append(Tool(declaration["name"], declaration.get("description"), schema))
    return result


def _tool_choice(config: Any) -> dict[str, Any]:
    calling = config.get("functionCallingConfig") if isinstance(config, dict) else None
    if not isinstance(calling, dict) or calling.get("mode") in (None, "MODE_UNSPECIFIED"):
        return {}
    mode = calling.get("mode")
    allowed = calling.get("allowedFunctionNames")
    if mode == "ANY" and isinstance(allowed, list) and len(allowed) == 1:
        return {"tool_choice": "required", "forced_tool": str(allowed[0])}
    choice = {"AUTO": "auto", "ANY": "required", "NONE": "none", "VALIDATED": "auto"}.get(
        str(mode))
    if choice is None:
        raise invalid("toolConfig cannot be converted for this channel", "toolConfig")
    return {"tool_choice": choice}


def _output_format(config: dict[str, Any]) -> dict[str, Any] | None:
    if config.get("responseMimeType") != "application/json":
        return None
    schema = config.get("responseJsonSchema", config.get("responseSchema"))
    if isinstance(schema, dict):
        return {"type": "json_schema", "name": "response", "schema": schema}
    return {"type": "json_object"}


# -- neutral -> request --------------------------------------------------------------------

def _media_part(image: Image) -> dict[str, Any]:
    if image.url.startswith("data:"):
        head, _, data = image.url.partition(",")
        if ";base64" not in head:
            raise invalid("only base64 data URLs can be sent to this channel")
        return {"inlineData": {"mimeType": head[5:].split(";")[0] or "image/png",
                               "data": data}}
    extension = image.url.rsplit(".", 1)[-1].lower().split("?")[0]
    mime = {"png": "image/png", "gif": "image/gif", "webp": "image/webp"}.get(
        extension, "image/jpeg")
    return {"fileData": {"mimeType": mime, "fileUri": image.url}}


def _parts(parts: list[Part]) -> list[dict[str, Any]]:
    encoded: list[dict[str, Any]] = []
    for part in parts:
        if isinstance(part, Text):
            encoded.append({"text": part.text})
        elif isinstance(part, Image):
            encoded.append(_media_part(part))
        else:
            raise invalid("file inputs cannot be sent to this channel")
    return encoded


def _args(text: str) -> dict[str, Any]:
    try:
        value = orjson.loads(text or "{}")
    except orjson.JSONDecodeError:
        raise invalid("tool call arguments must be JSON to be sent to this channel") from None
    return value if isinstance(value, dict) else {"value": value}


def _response(text: str) -> dict[str, Any]:
    value = _json_or_none(text)
    return value if isinstance(value, dict) else {"result": text}


def from_conversation(conv: Conversation, model: str) -> dict[str, Any]:
    """Neutral -> request body (the model travels in the path, not the body)."""
    system: list[dict[str, Any]] = []
    contents: list[dict[str, Any]] = []
    names: dict[str, str] = {}  # call id -> function name
    for turn in conv.turns:
        if turn.role in ("system", "developer"):
            system.extend(_parts(turn.parts))
        elif turn.role == "assistant":
            parts = _parts(turn.parts)
            for call in turn.tool_calls:
                names[call.id] = call.name
                parts.append({"functionCall": {"name": call.name, "args": _args(call.arguments)}})
            contents.append({"role": "model", "parts": parts or [{"text": ""}]})
        elif turn.role == "tool":
            part = {"functionResponse": {"name": names.get(turn.tool_call_id or "", ""),
                                         "response": _response(turn.text())}}
            last = contents[-1] if contents else None
            if last is not None and last["role"] == "user" and all(
                    "functionResponse" in p for p in last["parts"]):
                last["parts"].append(part)
            else:
                contents.append({"role": "user", "parts": [part]})
        else:
            contents.append({"role": "user", "parts": _parts(turn.parts) or [{"text": ""}]})
    body: dict[str, Any] = {"contents": contents}
    if system:
        body["systemInstruction"] = {"parts": system}
    if conv.tools:
        body["tools"] = [{"functionDeclarations": [_declaration(t) for t in conv.tools]}]
    calling = _encode_tool_choice(conv)
    if calling is not None:
        body["toolConfig"] = {"functionCallingConfig": calling}
    config: dict[str, Any] = {}
    optional = (("maxOutputTokens", conv.max_output_tokens), ("temperature", conv.temperature),
                ("topP", conv.top_p), ("stopSequences", conv.stop))
    config.update((k, v) for k, v in optional if v is not None)
    if conv.output_format is not None:
        config["responseMimeType"] = "application/json"
        if isinstance(conv.output_format.get("schema"), dict):
            config["responseJsonSchema"] = conv.output_format["schema"]
    thinking = reasoning.google_thinking(conv)
    if thinking is not None:
        config["thinkingConfig"] = thinking
    if config:
        body["generationConfig"] = config
    return body


def _declaration(tool: Tool) -> dict[str, Any]:
    declaration: dict[str, Any] = {"name": tool.name}
    if tool.description is not None:
        declaration["description"] = tool.description
    if tool.parameters is not None:
        declaration["parameters"] = tool.parameters
    return declaration


def _encode_tool_choice(conv: Conversation) -> dict[str, Any] | None:
    if conv.forced_tool is not None:
        return {"mode": "ANY", "allowedFunctionNames": [conv.forced_tool]}
    if conv.tool_choice is None:
        return None
    return {"mode": {"auto": "AUTO", "required": "ANY", "none": "NONE"}.get(conv.tool_choice,
                                                                            "AUTO")}


# -- answer <-> neutral --------------------------------------------------------------------

def decode_candidate(body: dict[str, Any]) -> tuple[list[str], list[dict[str, Any]],
                                                     str | None]:
    """(texts, functionCall objects, finishReason) of a response's first candidate."""
    candidates = body.get("candidates")
    if not isinstance(candidates, list) or not candidates:
        blocked = (body.get("promptFeedback") or {}).get("blockReason")
        return [], [], "SAFETY" if blocked else None
    candidate = candidates[0]
    if not isinstance(candidate, dict):
        raise UpstreamFormatError("candidate is not an object")
    texts: list[str] = []
    calls: list[dict[str, Any]] = []
    for part in (candidate.get("content") or {}).get("parts") or ():
        if not isinstance(part, dict) or part.get("thought") is True:
            continue
        if isinstance(part.get("text"), str):
            texts.append(part["text"])
        elif isinstance(part.get("functionCall"), dict):
            calls.append(part["functionCall"])
    reason = candidate.get("finishReason")
    return texts, calls, str(reason) if reason else None


def decode_thoughts(body: dict[str, Any]) -> tuple[list[str], str | None]:
    """(thought texts, the first ``thoughtSignature``) of a response's first candidate."""
    candidates = body.get("candidates")
    if not isinstance(candidates, list) or not candidates or not isinstance(candidates[0], dict):
        return [], None
    thoughts: list[str] = []
    signature: str | None = None
    for part in (candidates[0].get("content") or {}).get("parts") or ():
        if not isinstance(part, dict):
            continue
        if signature is None and isinstance(part.get("thoughtSignature"), str):
            signature = part["thoughtSignature"]
        if part.get("thought") is True and isinstance(part.get("text"), str) and part["text"]:
            thoughts.append(part["text"])
    return thoughts, signature


def decode_reply(body: Any) -> Reply:
    """A GenerateContentResponse -> ``Reply`` (first candidate)."""
    if not isinstance(body, dict):
        raise UpstreamFormatError("not a generateContent answer")
    texts, calls, reason = decode_candidate(body)
    thoughts, signature = decode_thoughts(body)
    tool_calls = [ToolCall(str(c.get("id") or new_id("call_")), str(c.get("name") or ""),
                           fields.json_text(c.get("args") or {})) for c in calls]
    return Reply(id=str(body.get("responseId") or ""), created=now_seconds(),
                 text="".join(texts) if texts or not tool_calls else None,
                 tool_calls=tool_calls,
                 finish=FINISH_REASONS.get(reason or "STOP", "stop"),
                 usage=extract_usage("modelaction", body),
                 reasoning="".join(thoughts) if thoughts else None,
                 reasoning_signature=signature)


def encode_reply(reply: Reply, model: str, _request: dict[str, Any]) -> dict[str, Any]:
    """``Reply`` -> a GenerateContentResponse for the client (``modelVersion`` = its name)."""
    parts: list[dict[str, Any]] = []
    if reply.reasoning:
        parts.append(thought_part(reply.reasoning))
    text = (reply.text or "") + (reply.refusal or "")
    if text or not reply.tool_calls:
        parts.append({"text": text})
    parts.extend(function_call_part(c) for c in reply.tool_calls)
    body: dict[str, Any] = {
        "candidates": [{"content": {"role": "model", "parts": parts},
                        "finishReason": finish_reason(reply.finish_reason()), "index": 0}],
        "modelVersion": model,
        "responseId": reply.id or new_id(""),
    }
    if reply.usage is not None:
        body["usageMetadata"] = google_usage(reply.usage)
    return body


def thought_part(text: str) -> dict[str, Any]:
    return {"text": text, "thought": True}


def function_call_part(call: ToolCall) -> dict[str, Any]:
    return {"functionCall": {"id": call.id, "name": call.name, "args": _args_or_empty(call)}}


def _args_or_empty(call: ToolCall) -> dict[str, Any]:
    try:
        return _args(call.arguments)
    except Exception:
        return {}


def google_usage(usage: Usage) -> dict[str, Any]:
    """``Usage`` as ``usageMetadata`` (candidates exclude thoughts, as Google counts them)."""
    body: dict[str, Any] = {
        "promptTokenCount": usage.input,
        "candidatesTokenCount": max(0, usage.output - usage.reasoning),
        "totalTokenCount": usage.total,
    }
    if usage.reasoning:
        body["thoughtsTokenCount"] = usage.reasoning
    if usage.cache_read:
        body["cachedContentTokenCount"] = usage.cache_read
    details = [{"modality": "TEXT",
                "tokenCount": max(0, usage.input - usage.image_in - usage.audio_in)}]
    if usage.image_in:
        details.append({"modality": "IMAGE", "tokenCount": usage.image_in})
    if usage.audio_in:
        details.append({"modality": "AUDIO", "tokenCount": usage.audio_in})
    body["promptTokensDetails"] = details
    return body
