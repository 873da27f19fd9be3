"""What the fake upstream answers: knobs, deterministic token counts, one builder per route.

Split from ``tests.support.upstream`` (the server, recording and connection counting) so each
stays small; import from ``tests.support.upstream``, which re-exports the public names.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, replace
from typing import Any

import orjson

CREATED = 1_700_000_000
TOOL_ARGUMENT_PIECES = ['{"location": ', '"Paris", ', '"unit": "c"}']


@dataclass
class Knobs:
    status: int | None = None
    chunks: int = 3
    pace: float = 0.0
    first_byte_delay: float = 0.0
    stall_after: int | None = None
    error_after: int | None = None
    drop_after: int | None = None
    no_usage: bool = False
    tools: bool = False


_TOKEN_KNOBS: list[tuple[re.Pattern[str], str, Any]] = [
    (re.compile(r"fail-(\d{3})"), "status", int),
    (re.compile(r"chunks-(\d+)"), "chunks", int),
    (re.compile(r"pace-([\d.]+)"), "pace", float),
    (re.compile(r"slow-first-byte-([\d.]+)"), "first_byte_delay", float),
    (re.compile(r"stall-after-(\d+)"), "stall_after", int),
    (re.compile(r"error-after-(\d+)"), "error_after", int),
    (re.compile(r"drop-after-(\d+)"), "drop_after", int),
]


def knobs_for(model: str, base: Knobs) -> Knobs:
    """``base`` overridden by the knob tokens found in a model name."""
    changes: dict[str, Any] = {}
    for token in model.split("+"):
        if token == "no-usage":
            changes["no_usage"] = True
        elif token == "tools":
            changes["tools"] = True
        elif token == "error-mid-stream":
            changes["error_after"] = 2
        for pattern, name, convert in _TOKEN_KNOBS:
            match = pattern.fullmatch(token)
            if match:
                changes[name] = convert(match.group(1))
    return replace(base, **changes) if changes else base


def _texts(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, list):
        for item in value:
            yield from _texts(item)
    elif isinstance(value, dict):
        for key in ("content", "text", "input", "instructions", "prompt"):
            if key in value:
                yield from _texts(value[key])


def count_prompt_tokens(body: Any) -> int:
    """Words in every text of a request body (messages, prompt, input, instructions)."""
    if not isinstance(body, dict):
        return 0
    texts = list(_texts(body.get("messages"))) + list(_texts(body.get("prompt")))
    texts += list(_texts(body.get("input"))) + list(_texts(body.get("instructions")))
    return sum(len(text.split()) for text in texts)


def content_piece(i: int) -> str:
    return f"tok{i} "


class Plan:
    """What one answer will send: pieces (some of them counted as content) and knobs."""

    def __init__(self, knobs: Knobs, content_type: bytes) -> None:
        self.knobs = knobs
        self.content_type = content_type
        self.pieces: list[tuple[bytes, bool]] = []
        self.error: bytes = b""

    def add(self, data: bytes, content: bool = False) -> None:
        self.pieces.append((data, content))


def _completion_count(body: dict[str, Any], knobs: Knobs) -> tuple[int, str]:
    limit = body.get("max_completion_tokens") or body.get("max_tokens") \
        or body.get("max_output_tokens")
    if isinstance(limit, int) and 0 < limit < knobs.chunks:
        return limit, "length"
    return knobs.chunks, "stop"


def _sse(payload: Any, event: str | None = None) -> bytes:
    head = f"event: {event}\n".encode() if event else b""
    return head + b"data: " + orjson.dumps(payload) + b"\n\n"


def _chat_usage(prompt: int, completion: int) -> dict[str, Any]:
    return {"prompt_tokens": prompt, "completion_tokens": completion,
            "total_tokens": prompt + completion,
            "prompt_tokens_details": {"cached_tokens": 0},
            "completion_tokens_details": {"reasoning_tokens": 0}}


def _tool_name(body: dict[str, Any]) -> str:
    for tool in body.get("tools") or []:
        if isinstance(tool, dict):
            name = (tool.get("function") or {}).get("name") or tool.get("name")
            if name:
                return str(name)
    return "get_weather"


def _chat(fake: Any, request: Any, body: dict[str, Any], knobs: Knobs) -> Any:
    model = str(body.get("model", ""))
    prompt = count_prompt_tokens(body)
    count, finish = _completion_count(body, knobs)
    if knobs.tools:
        count, finish = len(TOOL_ARGUMENT_PIECES), "tool_calls"
    usage = None if knobs.no_usage else _chat_usage(prompt, count)
    ident = f"chatcmpl-fake{fake.request_count}"
    if body.get("stream") is not True:
        message: dict[str, Any] = {"role": "assistant", "content": None, "refusal": None}
        if knobs.tools:
            message["tool_calls"] = [{"id": "call_fake1", "type": "function", "function": {
                "name": _tool_name(body), "arguments": "".join(TOOL_ARGUMENT_PIECES)}}]
        else:
            message["content"] = "".join(content_piece(i) for i in range(count))
        payload = {"id": ident, "object": "chat.completion", "created": CREATED,
                   "model": model, "choices": [{"index": 0, "message": message,
                                                "logprobs": None, "finish_reason": finish}]}
        if usage is not None:
            payload["usage"] = usage
        return fake._send_json(request, payload, knobs)
    include = bool((body.get("stream_options") or {}).get("include_usage"))
    plan = Plan(knobs, b"text/event-stream; charset=utf-8")

    def chunk(delta: dict[str, Any], finish_reason: str | None = None) -> bytes:
        payload: dict[str, Any] = {
            "id": ident, "object": "chat.completion.chunk", "created": CREATED, "model": model,
            "choices": [{"index": 0, "delta": delta, "logprobs": None,
                         "finish_reason": finish_reason}]}
        if include:
            payload["usage"] = None
        return _sse(payload)

    plan.add(chunk({"role": "assistant", "content": "" if not knobs.tools else None}))
    if knobs.tools:
        plan.add(chunk({"tool_calls": [{"index": 0, "id": "call_fake1", "type": "function",
                                        "function": {"name": _tool_name(body),
                                                     "arguments": ""}}]}))
        for piece in TOOL_ARGUMENT_PIECES:
            plan.add(chunk({"tool_calls": [{"index": 0, "function": {"arguments": piece}}]}),
                     content=True)
    else:
        for i in range(count):
            plan.add(chunk({"content": content_piece(i)}), content=True)
    plan.add(chunk({}, finish))
    if include and usage is not None:
        plan.add(_sse({"id": ident, "object": "chat.completion.chunk", "created": CREATED,
                       "model": model, "choices": [], "usage": usage}))
    plan.add(b"data: [DONE]\n\n")
    plan.error = _sse({"error": {"message": "fake upstream failed mid-stream",
                                 "type": "server_error", "param": None, "code": None}})
    return fake._send(request, plan)


def _completions(fake: Any, request: Any, body: dict[str, Any], knobs: Knobs) -> Any:
    model = str(body.get("model", ""))
    count, finish = _completion_count(body, knobs)
    usage = None if knobs.no_usage else _chat_usage(count_prompt_tokens(body), count)
    ident = f"cmpl-fake{fake.request_count}"

    def shape(text: str, finish_reason: str | None) -> dict[str, Any]:
        return {"id": ident, "object": "text_completion", "created": CREATED, "model": model,
                "choices": [{"text": text, "index": 0, "logprobs": None,
                             "finish_reason": finish_reason}]}

    if body.get("stream") is not True:
        payload = shape("".join(content_piece(i) for i in range(count)), finish)
        if usage is not None:
            payload["usage"] = usage
        return fake._send_json(request, payload, knobs)
    plan = Plan(knobs, b"text/event-stream; charset=utf-8")
    for i in range(count):
        plan.add(_sse(shape(content_piece(i), None)), content=True)
    plan.add(_sse(shape("", finish)))
    if (body.get("stream_options") or {}).get("include_usage") and usage is not None:
        plan.add(_sse({**shape("", None), "choices": [], "usage": usage}))
    plan.add(b"data: [DONE]\n\n")
    plan.error = _sse({"error": {"message": "fake upstream failed mid-stream",
                                 "type": "server_error", "param": None, "code": None}})
    return fake._send(request, plan)


def _responses(fake: Any, request: Any, body: dict[str, Any], knobs: Knobs) -> Any:
    model = str(body.get("model", ""))
    prompt = count_prompt_tokens(body)
    count, finish = _completion_count(body, knobs)
    if knobs.tools:
        count = len(TOOL_ARGUMENT_PIECES)
    ident = f"resp_fake{fake.request_count}"
    usage = None if knobs.no_usage else {
        "input_tokens": prompt, "output_tokens": count, "total_tokens": prompt + count,
        "input_tokens_details": {"cached_tokens": 0},
        "output_tokens_details": {"reasoning_tokens": 0}}
    text = "".join(content_piece(i) for i in range(count))
    if knobs.tools:
        item: dict[str, Any] = {"id": "fc_fake1", "type": "function_call", "status": "completed",
                                "call_id": "call_fake1", "name": _tool_name(body),
                                "arguments": "".join(TOOL_ARGUMENT_PIECES)}
    else:
        item = {"id": "msg_fake1", "type": "message", "status": "completed", "role": "assistant",
                "content": [{"type": "output_text", "text": text, "annotations": []}]}
    status = "completed" if finish == "stop" else "incomplete"

    def response(state: str, output: list[Any], with_usage: Any) -> dict[str, Any]:
        out = {"id": ident, "object": "response", "created_at": CREATED, "status": state,
               "model": model, "output": output, "usage": with_usage}
        if state == "incomplete":
            out["incomplete_details"] = {"reason": "max_output_tokens"}
        return out

    if body.get("stream") is not True:
        return fake._send_json(request, response(status, [item], usage), knobs)
    plan = Plan(knobs, b"text/event-stream; charset=utf-8")
    seq = iter(range(1_000_000))

    def event(kind: str, **payload: Any) -> bytes:
        return _sse({"type": kind, "sequence_number": next(seq), **payload}, kind)

    plan.add(event("response.created", response=response("in_progress", [], None)))
    plan.add(event("response.in_progress", response=response("in_progress", [], None)))
    if knobs.tools:
        plan.add(event("response.output_item.added", output_index=0,
                       item={**item, "status": "in_progress", "arguments": ""}))
        for piece in TOOL_ARGUMENT_PIECES:
            plan.add(event("response.function_call_arguments.delta", item_id="fc_fake1",
                           output_index=0, delta=piece), content=True)
        plan.add(event("response.function_call_arguments.done", item_id="fc_fake1",
                       output_index=0, arguments=item["arguments"]))
    else:
        plan.add(event("response.output_item.added", output_index=0,
                       item={**item, "status": "in_progress", "content": []}))
        plan.add(event("response.content_part.added", item_id="msg_fake1", output_index=0,
                       content_index=0, part={"type": "output_text", "text": "",
                                              "annotations": []}))
        for i in range(count):
            plan.add(event("response.output_text.delta", item_id="msg_fake1", output_index=0,
                           content_index=0, delta=content_piece(i)), content=True)
        plan.add(event("response.output_text.done", item_id="msg_fake1", output_index=0,
                       content_index=0, text=text))
        plan.add(event("response.content_part.done", item_id="msg_fake1", output_index=0,
                       content_index=0, part=item["content"][0]))
    plan.add(event("response.output_item.done", output_index=0, item=item))
    plan.add(event("response.completed" if status == "completed" else "response.incomplete",
                   response=response(status, [item], usage)))
    plan.error = _sse({"type": "error", "code": "server_error",
                       "message": "fake upstream failed mid-stream", "param": None}, "error")
    return fake._send(request, plan)


def _moderations(fake: Any, request: Any, body: dict[str, Any], knobs: Knobs) -> Any:
    inputs = body.get("input")
    count = len(inputs) if isinstance(inputs, list) else 1
    result = {"flagged": False, "categories": {"violence": False},
              "category_scores": {"violence": 0.0}}
    return fake._send_json(request, {"id": f"modr-fake{fake.request_count}",
                                     "model": body.get("model", ""),
                                     "results": [result] * count}, knobs)


def speech_bytes(text: str) -> bytes:
    """The audio the fake answers for ``input`` = text (64 bytes per input byte)."""
    return (b"ID3" + bytes(range(61))) * max(len(text.encode()), 1)


def _speech(fake: Any, request: Any, body: dict[str, Any], knobs: Knobs) -> Any:
    audio = speech_bytes(str(body.get("input", "")))
    plan = Plan(knobs, b"audio/mpeg")
    pieces = max(knobs.chunks, 1)
    step = -(-len(audio) // pieces)
    for start in range(0, len(audio), step):
        plan.add(audio[start:start + step], content=True)
    return fake._send(request, plan)


def _transcriptions(fake: Any, request: Any, body: dict[str, Any],
                    knobs: Knobs) -> Any:
    size = len(body.get("file", b""))
    return fake._send_json(request, {"text": f"received {size} bytes",
                                     "usage": {"type": "duration",
                                               "seconds": max(size // 16000, 1)}}, knobs)


def _int(value: Any, default: int) -> int:
    try:
        return int(value.decode() if isinstance(value, bytes) else value)
    except (TypeError, ValueError):
        return default


def _images(fake: Any, request: Any, body: dict[str, Any], knobs: Knobs) -> Any:
    n = _int(body.get("n"), 1)
    prompt = body.get("prompt", "")
    prompt = prompt.decode() if isinstance(prompt, bytes) else str(prompt)
    image_size = len(body.get("image", b"")) if isinstance(body.get("image"), bytes) else 0
    words = len(prompt.split())
    return fake._send_json(request, {
        "created": CREATED,
        "data": [{"b64_json": "iVBORw0KGgo=", "revised_prompt": prompt}] * n,
        "usage": {"input_tokens": words, "output_tokens": 1000 * n,
                  "total_tokens": words + 1000 * n,
                  "input_tokens_details": {"text_tokens": words,
                                           "image_tokens": image_size // 1000}},
    }, knobs)


def _models(fake: Any, request: Any, body: dict[str, Any], knobs: Knobs) -> Any:
    return fake._send_json(request, {"object": "list", "data": [
        {"id": name, "object": "model", "created": CREATED, "owned_by": "fake"}
        for name in fake.models]}, knobs)


ROUTES = {
    ("POST", "/v1/chat/completions"): _chat,
    ("POST", "/v1/completions"): _completions,
    ("POST", "/v1/responses"): _responses,
    ("POST", "/v1/moderations"): _moderations,
    ("POST", "/v1/audio/speech"): _speech,
    ("POST", "/v1/audio/transcriptions"): _transcriptions,
    ("POST", "/v1/images/generations"): _images,
    ("POST", "/v1/images/edits"): _images,
    ("GET", "/v1/models"): _models,
}
