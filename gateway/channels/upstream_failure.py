"""Upstream failures made visible to the operator: the server log, the usage log, channel health.

The client of a failed upstream call only ever sees our generic answer (gateway contract §7.3):
the upstream body may carry the upstream account's identifiers, our channel key echoed back or
internal URLs.  The operator, however, must be able to tell a bad channel key (401 "invalid api
key") from an upstream outage (500) without a packet capture.  So every failed attempt leaves:

- one server-log line with the channel, the upstream status and a redacted excerpt of the
  upstream body (its first 1000 characters; text fields of the request the upstream may echo
  back reduced to their lengths; API keys and bearer tokens masked);
- the upstream status and a short failure reason on the request's usage-log row, which only
  the admin's view of the usage log shows;
- the same reason on the channel's health (``gateway.health``), which counts the failure and
  persists it so ``GET /api/channels`` shows it.
"""

from __future__ import annotations

import re
from typing import Any

import orjson
from twisted.logger import Logger

from gateway.metering import RequestLog

log = Logger()

#: characters of the upstream body kept in the server log (as the origin does)
EXCERPT_CHARS = 1000
#: characters of the excerpt kept in a failure reason (usage log, channel health)
REASON_EXCERPT_CHARS = 200
#: JSON members whose string values are prompt or answer text, reduced to their length
TEXT_FIELDS = frozenset({
    "content", "text", "prompt", "input", "instructions", "system", "messages", "contents",
    "parts", "negative_prompt", "query", "document", "documents", "arguments", "output",
})
_SECRET = re.compile(
    r"(?i)(bearer\s+)[A-Za-z0-9._~+/=-]{6,}"
    r"|\bsk-[A-Za-z0-9_-]{6,}"
    r"|\bAIza[A-Za-z0-9_-]{10,}"
)


def _mask_secret(match: re.Match[str]) -> str:
    if match.group(1):
        return match.group(1) + "[redacted]"
    return "[redacted key]"


def mask_secrets(text: str, known: tuple[str, ...] = ()) -> str:
    """``text`` with ``known`` secrets (e.g. the channel key) and key-shaped words masked."""
    for secret in known:
        if len(secret) >= 4:
            text = text.replace(secret, "[channel key]")
    return _SECRET.sub(_mask_secret, text)


def _reduce_text(value: Any, in_text: bool = False) -> Any:
    if isinstance(value, str):
        return f"[{len(value)} chars]" if in_text else value
    if isinstance(value, dict):
        return {k: _reduce_text(v, in_text or k in TEXT_FIELDS) for k, v in value.items()}
    if isinstance(value, list):
        return [_reduce_text(v, in_text) for v in value]
    return value


def redacted_excerpt(body: bytes, secrets: tuple[str, ...] = (),
                     limit: int = EXCERPT_CHARS) -> str:
    """The first ``limit`` characters of an upstream body, safe for a log.

    A JSON body has its text fields reduced to their lengths first; any body then has secrets
    masked.  Never raises: an unreadable body is described by its size.
    """
    if not body:
        return ""
    try:
        parsed = orjson.loads(body)
    except orjson.JSONDecodeError:
        text = body[:limit * 4].decode("utf-8", "replace")
    else:
        text = orjson.dumps(_reduce_text(parsed)).decode()
    text = " ".join(mask_secrets(text, secrets).split())
    return text if len(text) <= limit else text[:limit] + "…"


def status_reason(status: int, excerpt: str) -> str:
    """The failure reason of an upstream error status, as channel health and the usage log
    keep it: the status, what it usually means, and the start of the redacted body."""
    meaning = ("channel credential rejected" if status in (401, 403)
               else "rate limited by upstream" if status == 429
               else "upstream server error" if status >= 500 else "upstream refused request")
    reason = f"HTTP {status} ({meaning})"
    if excerpt:
        short = excerpt[:REASON_EXCERPT_CHARS]
        reason += ": " + short + ("…" if len(excerpt) > len(short) else "")
    return reason


def report_status(health: Any, record: RequestLog, channel: Any, status: int,
                  body: bytes) -> str:
    """Report an upstream error status; returns the failure reason (already recorded)."""
    excerpt = redacted_excerpt(body, (channel.api_key,) if channel.api_key else ())
    reason = status_reason(status, excerpt)
    log.warn(
        "upstream answered {upstream_status} on channel {channel_id} ({channel_name}) for "
        "request {request_id} ({endpoint}): {excerpt}",
        upstream_status=status, channel_id=channel.id, channel_name=channel.name,
        request_id=record.request_id, endpoint=record.endpoint, excerpt=excerpt or "(no body)")
    record.upstream_status = status
    record.failure_reason = f"channel {channel.id} ({channel.name}): {reason}"
    health.record_failure(channel.id, reason, status)
    return reason


def report_transport(health: Any, record: RequestLog, channel: Any, error: Exception) -> str:
    """Report an attempt that got no upstream answer (connect error, timeout, reset)."""
    detail = mask_secrets(str(error) or type(error).__name__,
                          (channel.api_key,) if channel.api_key else ())
    reason = f"no upstream answer: {detail}"[:500]
    log.warn(
        "upstream call on channel {channel_id} ({channel_name}) for request {request_id} "
        "({endpoint}) failed: {detail}",
        channel_id=channel.id, channel_name=channel.name, request_id=record.request_id,
        endpoint=record.endpoint, detail=detail)
    record.upstream_status = None
    record.failure_reason = f"channel {channel.id} ({channel.name}): {reason}"
    health.record_failure(channel.id, reason, None)
    return reason
