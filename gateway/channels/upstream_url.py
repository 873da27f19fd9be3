"""Upstream URLs and headers per channel type (gateway contract §6.1-§6.2)."""

from __future__ import annotations

from typing import Any

_VERSION_SEGMENTS = ("/v1", "/v1beta")


def join(base_url: str, path: str) -> str:
    """Join a channel ``base_url`` and an API path without doubling a version segment."""
    base = base_url.strip().rstrip("/")
    lowered = base.lower()
    for segment in _VERSION_SEGMENTS:
        if lowered.endswith(segment):
            root = base[: -len(segment)]
            if path.lower().startswith(segment + "/"):
                return root + path
            for other in _VERSION_SEGMENTS:
                if path.lower().startswith(other + "/"):
                    return root + path
            return base + path
    return base + path


def auth_headers(channel_type: str, api_key: str) -> dict[bytes, list[bytes]]:
    """The credential headers of our channel (never the client's)."""
    key = api_key.encode("latin-1", "replace")
    if channel_type == "messages":
        return {b"x-api-key": [key], b"authorization": [b"Bearer " + key],
                b"anthropic-version": [b"2023-06-01"]}
    if channel_type == "modelaction":
        return {b"x-goog-api-key": [key]}
    return {b"authorization": [b"Bearer " + key]} if api_key else {}


def json_headers(channel_type: str, api_key: str, extra: dict[bytes, list[bytes]] | None = None
                 ) -> dict[bytes, list[bytes]]:
    headers: dict[bytes, list[bytes]] = {
        b"content-type": [b"application/json"],
        b"accept": [b"application/json"],
        b"user-agent": [b"Lockgate"],
    }
    headers.update(auth_headers(channel_type, api_key))
    if extra:
        headers.update(extra)
    return headers


#: response headers never copied from an upstream to a client (hop-by-hop and private)
_DROP = frozenset({
    b"connection", b"keep-alive", b"proxy-authenticate", b"proxy-authorization", b"te",
    b"trailer", b"transfer-encoding", b"upgrade", b"content-length", b"set-cookie",
    b"openai-organization", b"openai-project", b"server", b"date",
    # ours names the client's call (console contract §6.3.1), never the upstream's
    b"x-request-id",
})


def relayable_headers(headers: Any) -> list[tuple[bytes, bytes]]:
    """Upstream response headers safe to show the client (ours ⚑ in §6.3)."""
    out: list[tuple[bytes, bytes]] = []
    for name, values in headers.getAllRawHeaders():
        lower = name.lower()
        if lower in _DROP or lower.startswith(b"x-ratelimit-") or lower.startswith(b"cf-"):
            continue
        for value in values:
            out.append((name, value))
    return out
