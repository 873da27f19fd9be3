"""One test request to an upstream channel, for the admin's ``Test`` button (web contract §6).

The request is the cheapest call of the channel's protocol family -- a one-message chat
completion with ``max_tokens: 1`` for the chat family, its ``responses`` / ``messages``
equivalent, the model list for the task families -- sent with the channel's own key and base
URL through the bounded, SSRF-checked ``gateway.sync.fetch``.  Nothing is billed and no usage
log is written; only the channel's ``last_health_checked_at`` / ``last_health_status`` change.
The outcome's ``message`` is our own short text: never the upstream body, never the key.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import orjson

from gateway.channels.channel_types import COMPAT, MESSAGES, RESPONSES
from gateway.channels.net_policy import UnsafeUrl, UrlPolicy, check_url
from gateway.channels.upstream_url import auth_headers, join
from gateway.sync.fetch import FetchError, fetch

PROMPT = "ping"
#: the upstream answer is read only to this size (we never show it)
BODY_LIMIT = 1 << 16


@dataclass(frozen=True)
class TestCall:
    """What to send: method, path and JSON body (``None`` for a GET)."""

    method: str
    path: str
    body: dict[str, Any] | None


@dataclass(frozen=True)
class TestOutcome:
    success: bool
    status_code: int | None
    latency_ms: int
    message: str

    def view(self) -> dict[str, Any]:
        return {"success": self.success, "status_code": self.status_code,
                "latency_ms": self.latency_ms, "message": self.message}


def test_call(channel_type: str, upstream_model: str) -> TestCall:
    """The minimal request of ``channel_type``'s protocol family for ``upstream_model``."""
    user = [{"role": "user", "content": PROMPT}]
    if channel_type == COMPAT:
        return TestCall("POST", "/v1/chat/completions",
                        {"model": upstream_model, "messages": user, "max_tokens": 1})
    if channel_type == RESPONSES:
        return TestCall("POST", "/v1/responses",
                        {"model": upstream_model, "input": PROMPT, "max_output_tokens": 16})
    if channel_type == MESSAGES:
        return TestCall("POST", "/v1/messages",
                        {"model": upstream_model, "messages": user, "max_tokens": 1})
    return TestCall("GET", "/v1/models", None)


def pick_config(channel_id: int, cat: dict[str, Any], model_name: str | None
                ) -> dict[str, Any] | None:
    """The enabled model config to test: the one of ``model_name``, else the channel's first."""
    for config in cat["configs"]:
        if config["channel_id"] != channel_id or not config["enabled"]:
            continue
        model = cat["models"].get(config["model_id"])
        if model_name is None or (model is not None and model["model_name"] == model_name):
            return config
    return None


def upstream_model_name(config: dict[str, Any], cat: dict[str, Any]) -> str:
    model = cat["models"].get(config["model_id"])
    global_name = model["model_name"] if model is not None else ""
    return str(config["upstream_model_name"] or global_name)


async def run_test(reactor: Any, clock: Any, channel: dict[str, Any], call: TestCall,
                   policy: UrlPolicy, timeout: float) -> TestOutcome:
    """Send ``call`` to ``channel``; the outcome with the time it took on ``clock``."""
    started = clock.seconds()

    def outcome(success: bool, status: int | None, message: str) -> TestOutcome:
        elapsed = max(0, round((clock.seconds() - started) * 1000))
        return TestOutcome(success, status, elapsed, message)

    url = join(channel["base_url"], call.path)
    try:
        check_url(url, policy)
    except UnsafeUrl as exc:
        return outcome(False, None, f"Unsafe or invalid base URL: {exc}")
    headers = {name.decode(): values[-1].decode("latin-1") for name, values
               in auth_headers(channel["type"], channel["api_key"] or "").items()}
    headers["accept"] = "application/json"
    body = None
    if call.body is not None:
        headers["content-type"] = "application/json"
        body = orjson.dumps(call.body)
    try:
        fetched = await fetch(reactor, clock, url, method=call.method, headers=headers,
                              timeout=timeout, limit=BODY_LIMIT, policy=policy, body=body)
    except FetchError as exc:
        return outcome(False, None, f"Request failed: {exc}")
    if 200 <= fetched.status < 300:
        return outcome(True, fetched.status, "OK")
    return outcome(False, fetched.status, f"Upstream answered HTTP {fetched.status}")
