"""Provision a fresh Lockgate for the benchmark through its console API (service-spec §4.7).

Steps: first-run setup (admin token) -> settings: allow private upstream addresses (the bench
upstream is on loopback) and no global rate limit -> user channel (no rate limit) -> upstream
channel (type ``compat``, the bench upstream as ``base_url``) -> global models ->
channel-model configs mapping each public model to an upstream model name (which carries the
stream length/pace knobs) -> a large admin balance -> an API key.  Each step that fails raises
``ProvisionError`` naming the step, the status and the answer, so a half-built console shows
up clearly in the report.
"""

from __future__ import annotations

import http.client
import json
from typing import Any


class ProvisionError(Exception):
    def __init__(self, step: str, status: int | None, body: str) -> None:
        super().__init__(f"{step}: HTTP {status}: {body[:300]}")
        self.step = step


class Console:
    def __init__(self, host: str, port: int) -> None:
        self.host = host
        self.port = port
        self.token: str | None = None

    def call(self, step: str, method: str, path: str, body: Any = None,
             ok: tuple[int, ...] = (200, 201)) -> Any:
        conn = http.client.HTTPConnection(self.host, self.port, timeout=30)
        headers = {"Content-Type": "application/json"}
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        try:
            conn.request(method, path, json.dumps(body) if body is not None else None, headers)
            response = conn.getresponse()
            raw = response.read().decode("utf-8", "replace")
        except OSError as exc:
            raise ProvisionError(step, None, repr(exc)) from exc
        finally:
            conn.close()
        if response.status not in ok:
            raise ProvisionError(step, response.status, raw)
        try:
            return json.loads(raw) if raw else None
        except ValueError as exc:
            raise ProvisionError(step, response.status, "not JSON: " + raw) from exc


def _id(step: str, payload: Any) -> int:
    """The created object's id, wherever the route put it."""
    if isinstance(payload, dict):
        for candidate in (payload, payload.get("data"), payload.get("item")):
            if isinstance(candidate, dict) and isinstance(candidate.get("id"), int):
                return candidate["id"]
    raise ProvisionError(step, 200, "no id in answer: " + json.dumps(payload)[:300])


#: with ``limits``: both rate limiters on (so every request is counted, as in production), at
#: a capacity no benchmark phase reaches
LIMIT_RPM = 1_000_000  # the settings maximum; the bench stays far below it


def provision(host: str, port: int, upstream_base: str,
              models: dict[str, str], limits: bool = False) -> tuple[str, list[str]]:
    """Returns (API key, log lines).  ``models`` maps public model -> upstream model name;
    ``limits``: the global and the user channel's rate limit count every call (``LIMIT_RPM``)
    instead of being off."""
    log: list[str] = []
    console = Console(host, port)
    setup = console.call("POST /api/setup", "POST", "/api/setup", {
        "username": "benchadmin", "email": "bench@example.com", "password": "bench-password-1"})
    console.token = setup["token"]
    admin_id = setup["user"]["id"]
    log.append(f"admin user {admin_id}")
    # the bench upstream is on loopback, which the SSRF policy refuses by default; the global
    # rate limiter (60/min by default) would turn the benchmark into a 429 benchmark
    settings: dict[str, Any] = {"ssrf_allow_private_networks": True,
                                "rate_limit_enabled": limits}
    if limits:
        settings.update(rate_limit_requests_per_minute=LIMIT_RPM, rate_limit_burst=0)
    try:
        console.call("PUT /api/settings", "PUT", "/api/settings", settings)
    except ProvisionError:
        console.call("PUT /api/settings", "PUT", "/api/settings",
                     {k: str(v).lower() for k, v in settings.items()})
    user_channel_body: dict[str, Any] = {"name": "bench", "routing_algorithm": "priority",
                                         "enabled": True, "rate_limit_enabled": limits}
    if limits:
        user_channel_body.update(rate_limit_requests_per_minute=LIMIT_RPM, rate_limit_burst=0)
    try:
        created_uc = console.call("POST /api/user-channels", "POST", "/api/user-channels",
                                  user_channel_body)
    except ProvisionError:
        if limits:
            raise
        user_channel_body.pop("rate_limit_enabled")
        created_uc = console.call("POST /api/user-channels", "POST", "/api/user-channels",
                                  user_channel_body)
    user_channel = _id("POST /api/user-channels", created_uc)
    channel = _id("POST /api/channels", console.call(
        "POST /api/channels", "POST", "/api/channels", {
            "name": "bench-upstream", "type": "compat", "base_url": upstream_base,
            "api_key": "sk-bench-upstream", "user_channel_id": user_channel,
            "priority": 1, "weight": 1, "enabled": True}))
    log.append(f"user channel {user_channel}, upstream channel {channel}, rate limits "
               + (f"on at {LIMIT_RPM}/min" if limits else "off"))
    for public, upstream in models.items():
        model_id = _id("POST /api/models", console.call(
            "POST /api/models", "POST", "/api/models", {
                "model_name": public, "input_price": "0.000001", "output_price": "0.000001",
                "enabled": True}))
        _id(f"POST /api/channels/{channel}/models", console.call(
            f"POST /api/channels/{channel}/models", "POST", f"/api/channels/{channel}/models",
            {"model_id": model_id, "upstream_model_name": upstream, "enabled": True}))
        log.append(f"model {public} -> {upstream}")
    console.call(f"PUT /api/users/{admin_id}", "PUT", f"/api/users/{admin_id}",
                 {"balance": "1000000000"})
    created = console.call("POST /api/user/api-keys", "POST", "/api/user/api-keys",
                           {"name": "bench"})
    key = created.get("api_key") if isinstance(created, dict) else None
    if not isinstance(key, str):
        raise ProvisionError("POST /api/user/api-keys", 200,
                             "no api_key in answer: " + json.dumps(created)[:300])
    log.append("api key created")
    return key, log
