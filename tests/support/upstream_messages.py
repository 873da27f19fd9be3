"""What a fake native Messages upstream answers on ``POST /v1/messages`` (JSON or SSE).

Served by ``tests.support.upstream_google.NativeUpstream`` (which also serves every OpenAI
route of ``FakeUpstream``).  The same knobs as the OpenAI fake apply, read from the model name
(``fail-<status>``, ``chunks-<n>``, ``error-after-<n>``, ``tools``, ``no-usage``, ...).

Deterministic usage, so tests can assert exact billing: the prompt is ``native_prompt_tokens``
words; of those, 2 are reported as cache reads and 1 as a 5-minute cache write (when the
prompt has at least 3 words), the rest as ``input_tokens`` -- the Messages convention where
``input_tokens`` excludes the cache.  Output = content chunks sent (3 for a tool call).  A
stream reports the input side in ``message_start`` and the cumulative output in
``message_delta``, as the Messages API does.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import orjson

from tests.support.upstream_answers import (
    TOOL_ARGUMENT_PIECES,
    Knobs,
    Plan,
    content_piece,
)

CACHE_READ = 2
CACHE_WRITE = 1
_COUNTED = frozenset({"text", "content", "system"})


def _words(value: Any, key: str | None) -> Iterator[int]:
    if isinstance(value, str):
        if key in _COUNTED:
            yield len(value.split())
    elif isinstance(value, list):
        for item in value:
            yield from _words(item, key)
    elif isinstance(value, dict):
        for name, item in value.items():
            yield from _words(item, name)


def native_prompt_tokens(body: Any) -> int:
    """Words of every ``text``/``content``/``system`` string in a request body (any format)."""
    return sum(_words(body, None))


def split_prompt(prompt: int) -> tuple[int, int, int]:
    """(input_tokens without cache, cache read, cache write) of a prompt."""
    if prompt < CACHE_READ + CACHE_WRITE:
        return prompt, 0, 0
    return prompt - CACHE_READ - CACHE_WRITE, CACHE_READ, CACHE_WRITE


def _sse(payload: dict[str, Any]) -> bytes:
    return b"event: " + payload["type"].encode() + b"\ndata: " + orjson.dumps(payload) + b"\n\n"


def error_body(status: int, message: str) -> bytes:
    kind = {400: "invalid_request_error", 401: "authentication_error",
            429: "rate_limit_error", 529: "overloaded_error"}.get(status, "api_error")
    return orjson.dumps({"type": "error", "error": {"type": kind, "message": message}})


def _tool_name(body: dict[str, Any]) -> str:
    for tool in body.get("tools") or []:
        if isinstance(tool, dict) and tool.get("name"):
            return str(tool["name"])
    return "get_weather"


def messages_answer(fake: Any, request: Any, body: dict[str, Any], knobs: Knobs) -> Any:
    model = str(body.get("model", ""))
    prompt = native_prompt_tokens({k: body.get(k) for k in ("system", "messages")})
    fresh, read, write = split_prompt(prompt)
    limit = body.get("max_tokens")
    count, reason = knobs.chunks, "end_turn"
    if isinstance(limit, int) and 0 < limit < count:
        count, reason = limit, "max_tokens"
    if knobs.tools:
        count, reason = len(TOOL_ARGUMENT_PIECES), "tool_use"
    ident = f"msg_fake{fake.request_count}"
    input_usage = {"input_tokens": fresh, "cache_read_input_tokens": read,
                   "cache_creation_input_tokens": write}
    if body.get("stream") is not True:
        if knobs.tools:
            content: list[dict[str, Any]] = [{
                "type": "tool_use", "id": "toolu_fake1", "name": _tool_name(body),
                "input": orjson.loads("".join(TOOL_ARGUMENT_PIECES))}]
        else:
            content = [{"type": "text", "text": "".join(content_piece(i) for i in range(count))}]
        payload: dict[str, Any] = {
            "id": ident, "type": "message", "role": "assistant", "model": model,
            "content": content, "stop_reason": reason, "stop_sequence": None,
            "usage": {**input_usage, "output_tokens": count}}
        if knobs.no_usage:
            del payload["usage"]
        return fake._send_json(request, payload, knobs)
    plan = Plan(knobs, b"text/event-stream")
    start_usage = {**input_usage, "output_tokens": 1}
    plan.add(_sse({"type": "message_start", "message": {
        "id": ident, "type": "message", "role": "assistant", "model": model, "content": [],
        "stop_reason": None, "stop_sequence": None,
        **({} if knobs.no_usage else {"usage": start_usage})}}))
    if knobs.tools:
        plan.add(_sse({"type": "content_block_start", "index": 0, "content_block": {
            "type": "tool_use", "id": "toolu_fake1", "name": _tool_name(body), "input": {}}}))
        for piece in TOOL_ARGUMENT_PIECES:
            plan.add(_sse({"type": "content_block_delta", "index": 0, "delta": {
                "type": "input_json_delta", "partial_json": piece}}), content=True)
    else:
        plan.add(_sse({"type": "content_block_start", "index": 0,
                       "content_block": {"type": "text", "text": ""}}))
        for i in range(count):
            plan.add(_sse({"type": "content_block_delta", "index": 0, "delta": {
                "type": "text_delta", "text": content_piece(i)}}), content=True)
    plan.add(_sse({"type": "content_block_stop", "index": 0}))
    delta: dict[str, Any] = {"type": "message_delta",
                             "delta": {"stop_reason": reason, "stop_sequence": None}}
    if not knobs.no_usage:
        delta["usage"] = {"output_tokens": count}
    plan.add(_sse(delta))
    plan.add(_sse({"type": "message_stop"}))
    plan.error = b"event: error\ndata: " + error_body(529, "fake upstream overloaded") + b"\n\n"
    return fake._send(request, plan)
