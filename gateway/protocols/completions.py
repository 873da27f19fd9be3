"""Legacy completions (``/v1/completions``): checks only, because the call is a passthrough.

Contract §0/§8.2: on ``compat`` channels the request goes verbatim (model swapped) to
``/v1/completions`` and the ``text_completion`` answer is relayed.  The gateway reads
``prompt`` (for the input estimate), ``stream``, ``stream_options.include_usage``,
``max_tokens`` and ``n``.  Stream chunks carry ``choices[].text``.
"""

from __future__ import annotations

from typing import Any

from gateway.protocols import fields
from gateway.protocols.errors import invalid
from gateway.protocols.estimate import estimate_tokens


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
                raise invalid("prompt must be a string, an array of strings or token arrays",
                              "prompt")
    elif prompt is not None:
        raise invalid("prompt must be a string, an array of strings or token arrays", "prompt")
    stream = fields.flag(body, "stream")
    include_usage = fields.flag(fields.optional_object(body, "stream_options"), "include_usage")
    max_tokens = fields.count(body, "max_tokens")
    fields.count(body, "n", minimum=1)
    fields.number(body, "temperature")
    return stream, include_usage, max_tokens, estimate
