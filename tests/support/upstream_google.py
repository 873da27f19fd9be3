"""A fake native Google ``generateContent`` upstream, and ``NativeUpstream``: the OpenAI fake
plus native Messages (``POST /v1/messages``) and Google (``POST /v1beta/models/<m>:<action>``).

Usage::

    fake = NativeUpstream.start(reactor)    # FakeUpstream's API, routes and knobs
    fake.requests[0].path                   # "/v1beta/models/gemini-fake:generateContent"

Google knobs come from the model name in the path.  Deterministic usage: ``promptTokenCount``
= ``native_prompt_tokens`` of the request (1 of them reported as ``cachedContentTokenCount``),
``candidatesTokenCount`` = content chunks sent (3 for a function call) and a constant
``thoughtsTokenCount`` of ``THOUGHTS`` -- billed as output, as the contract says.  Streams
(``:streamGenerateContent?alt=sse``) send one chunk per content piece and put
``finishReason`` and ``usageMetadata`` on the last chunk; a function call comes whole.
When the request asks ``thinkingConfig.includeThoughts``, the answer starts with the thought
part ``THOUGHT_PART`` (its own chunk when streamed).
"""

from __future__ import annotations

from typing import Any
from urllib.parse import unquote

import orjson

from tests.support.upstream import FakeUpstream, RecordedRequest
from tests.support.upstream_answers import (
    TOOL_ARGUMENT_PIECES,
    Knobs,
    Plan,
    content_piece,
    knobs_for,
)
from tests.support.upstream_messages import error_body as messages_error_body
from tests.support.upstream_messages import messages_answer, native_prompt_tokens

THOUGHTS = 2
THOUGHT_PART = {"text": "fake thought", "thought": True, "thoughtSignature": "fake-signature"}
CACHED = 1
_STATUS = {400: "INVALID_ARGUMENT", 401: "UNAUTHENTICATED", 403: "PERMISSION_DENIED",
           404: "NOT_FOUND", 429: "RESOURCE_EXHAUSTED", 503: "UNAVAILABLE"}


def error_body(status: int, message: str) -> bytes:
    return orjson.dumps({"error": {"code": status, "message": message,
                                   "status": _STATUS.get(status, "INTERNAL")}})


def google_usage(prompt: int, candidates: int) -> dict[str, Any]:
    return {"promptTokenCount": prompt, "candidatesTokenCount": candidates,
            "thoughtsTokenCount": THOUGHTS, "cachedContentTokenCount": min(CACHED, prompt),
            "totalTokenCount": prompt + candidates + THOUGHTS,
            "promptTokensDetails": [{"modality": "TEXT", "tokenCount": prompt}]}


def _function_name(body: dict[str, Any]) -> str:
    for tool in body.get("tools") or []:
        for declaration in (tool or {}).get("functionDeclarations") or []:
            if declaration.get("name"):
                return str(declaration["name"])
    return "get_weather"


def google_answer(fake: Any, request: Any, body: dict[str, Any], knobs: Knobs, model: str,
                  stream: bool) -> Any:
    prompt = native_prompt_tokens({k: body.get(k) for k in ("systemInstruction", "contents")})
    limit = (body.get("generationConfig") or {}).get("maxOutputTokens")
    count, reason = knobs.chunks, "STOP"
    if isinstance(limit, int) and 0 < limit < count:
        count, reason = limit, "MAX_TOKENS"
    if knobs.tools:
        count = len(TOOL_ARGUMENT_PIECES)
    usage = None if knobs.no_usage else google_usage(prompt, count)
    ident = f"resp-fake{fake.request_count}"
    call = {"functionCall": {"name": _function_name(body),
                             "args": orjson.loads("".join(TOOL_ARGUMENT_PIECES))}}

    def chunk(parts: list[dict[str, Any]], finish: str | None = None) -> dict[str, Any]:
        candidate: dict[str, Any] = {"content": {"role": "model", "parts": parts}, "index": 0}
        if finish:
            candidate["finishReason"] = finish
        payload: dict[str, Any] = {"candidates": [candidate], "modelVersion": model,
                                   "responseId": ident}
        if finish and usage is not None:
            payload["usageMetadata"] = usage
        return payload

    thinking = ((body.get("generationConfig") or {}).get("thinkingConfig") or {})
    thoughts = [dict(THOUGHT_PART)] if thinking.get("includeThoughts") is True else []
    if not stream:
        parts = [call] if knobs.tools else [
            {"text": "".join(content_piece(i) for i in range(count))}]
        return fake._send_json(request, chunk(thoughts + parts, reason), knobs)
    plan = Plan(knobs, b"text/event-stream")
    if thoughts:
        plan.add(b"data: " + orjson.dumps(chunk(thoughts)) + b"\n\n")
    if knobs.tools:
        for _piece in TOOL_ARGUMENT_PIECES[:-1]:  # a thought-only chunk per piece
            plan.add(b"data: " + orjson.dumps(chunk([{"text": "", "thought": True}]))
                     + b"\n\n", content=True)
        plan.add(b"data: " + orjson.dumps(chunk([call], reason)) + b"\n\n", content=True)
    else:
        for i in range(count):
            last = i == count - 1
            plan.add(b"data: " + orjson.dumps(chunk([{"text": content_piece(i)}],
                                                    reason if last else None)) + b"\n\n",
                     content=True)
    plan.error = b"data: " + error_body(503, "fake upstream unavailable") + b"\n\n"
    return fake._send(request, plan)


EMBEDDING_ACTIONS = ("countTokens", "embedContent", "batchEmbedContents")
#: the fake embedding every text gets
VECTOR = [0.25, -0.5, 0.125]


def _all_texts(value: Any) -> list[str]:
    if isinstance(value, dict):
        return [t for k, v in value.items() for t in ([v] if k == "text" and isinstance(v, str)
                                                       else _all_texts(v))]
    if isinstance(value, list):
        return [t for item in value for t in _all_texts(item)]
    return []


def embedding_answer(action: str, body: dict[str, Any]) -> dict[str, Any]:
    """countTokens: words in the request; embedContent: one vector; batch: one per request."""
    if action == "countTokens":
        return {"totalTokens": sum(len(text.split()) for text in _all_texts(body))}
    if action == "embedContent":
        return {"embedding": {"values": VECTOR}}
    requests = body.get("requests") if isinstance(body.get("requests"), list) else []
    return {"embeddings": [{"values": VECTOR} for _ in requests]}


class NativeUpstream(FakeUpstream):
    """``FakeUpstream`` that also speaks the native Messages and Google protocols."""

    def render(self, request: Any) -> Any:
        path = request.path.decode()
        if request.method != b"POST" or not (
                path == "/v1/messages" or path.startswith("/v1beta/models/")):
            return super().render(request)
        raw = request.content.read()
        headers = {k.decode().lower(): v[-1].decode("latin-1")
                   for k, v in request.requestHeaders.getAllRawHeaders()}
        try:
            body = orjson.loads(raw)
        except orjson.JSONDecodeError:
            body = None
        self.requests.append(RecordedRequest("POST", path, request.uri.partition(b"?")[2],
                                             headers, body, raw))
        body = body if isinstance(body, dict) else {}
        google = path != "/v1/messages"
        if google:
            model, _, action = unquote(path.removeprefix("/v1beta/models/")).rpartition(":")
        else:
            model, action = str(body.get("model", "")), ""
        knobs = knobs_for(model, self.knobs)
        if google and knobs.status is None and action in EMBEDDING_ACTIONS:
            request.setHeader(b"content-type", b"application/json")
            return orjson.dumps(embedding_answer(action, body))
        if knobs.status is not None or (google and action not in (
                "generateContent", "streamGenerateContent")):
            status = knobs.status or 404
            request.setResponseCode(status)
            request.setHeader(b"content-type", b"application/json")
            message = f"fake upstream failure {status}"
            return error_body(status, message) if google else messages_error_body(status,
                                                                                  message)
        if google:
            return google_answer(self, request, body, knobs, model,
                                 action == "streamGenerateContent")
        return messages_answer(self, request, body, knobs)
