"""The answer text of a whole (non-stream) answer, and a request with one more user message, in
any client family -- what a meta model's ``parallel ... synthesize`` and ``judge`` need
(console contract §6.3.1): they read the candidates' answers and ask one more model.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import orjson

from gateway.protocols import chat, google, messages, responses
from gateway.protocols.errors import UpstreamFormatError
from gateway.protocols.events import Reply

_DECODERS: dict[str, Callable[[Any], Reply]] = {
    "chat": chat.decode_reply, "messages": messages.decode_reply,
    "google": google.decode_reply, "responses": responses.decode_reply,
}


def answer_text(family: str, body: bytes) -> str:
    """The text of the first answer in ``body`` (a ``family`` answer); "" when it has none."""
    try:
        parsed = orjson.loads(body)
        if family == "completions":
            text = parsed["choices"][0].get("text")
            return text if isinstance(text, str) else ""
        return _DECODERS[family](parsed).text or ""
    except (orjson.JSONDecodeError, UpstreamFormatError, LookupError, TypeError,
            AttributeError):
        return ""


def with_user_message(family: str, body: dict[str, Any], text: str) -> dict[str, Any]:
    """``body`` (a ``family`` request) with ``text`` appended as a final user message."""
    out = dict(body)
    if family in ("chat", "messages"):
        out["messages"] = [*(body.get("messages") or []), {"role": "user", "content": text}]
    elif family == "google":
        out["contents"] = [*(body.get("contents") or []),
                           {"role": "user", "parts": [{"text": text}]}]
    elif family == "responses":
        given = body.get("input")
        turns = given if isinstance(given, list) else (
            [{"role": "user", "content": given}] if isinstance(given, str) and given else [])
        out["input"] = [*turns, {"role": "user", "content": text}]
    else:  # completions: one prompt
        prompt = body.get("prompt")
        out["prompt"] = f"{prompt}\n\n{text}" if isinstance(prompt, str) and prompt else text
    return out
