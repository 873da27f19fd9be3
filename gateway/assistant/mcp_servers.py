"""MCP server items (agents contract §1.3): validation, the stored form and the views.

Builtin servers (admin) and a user's custom servers share one item shape.  A list is checked as
a whole: any bad item, a duplicate id or more than ``MAX_SERVERS`` items refuses the entire list
with the one message the contract gives, so nothing is half-saved.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any
from urllib.parse import urlsplit

import orjson

INVALID = "Invalid MCP server configuration"
MAX_SERVERS = 20
MAX_ID = 80
MAX_NAME = 100
MAX_URL = 2000
MAX_HEADERS = 4000
MAX_COMMAND = 300
MAX_ARGS = 64
MAX_ARG = 1000
MAX_ENV = 50
MAX_ENV_KEY = 120
MAX_ENV_VALUE = 4000
MAX_CWD = 1000

HTTP = "http"
CONNECTOR = "connector"


class InvalidServers(ValueError):
    """The list cannot be accepted (the message is always ``INVALID``)."""

    def __init__(self, reason: str) -> None:
        super().__init__(INVALID)
        #: what exactly was wrong (for logs and tests; never shown in place of ``INVALID``)
        self.reason = reason


def parse_headers(text: str) -> list[tuple[str, str]]:
    """The configured extra headers: a JSON object of strings, or ``Name: value`` lines."""
    stripped = text.strip()
    if not stripped:
        return []
    if stripped.startswith("{"):
        try:
            parsed = orjson.loads(stripped)
        except orjson.JSONDecodeError:
            raise InvalidServers("headers: malformed JSON") from None
        if not isinstance(parsed, dict) or not all(
                isinstance(v, str) for v in parsed.values()):
            raise InvalidServers("headers: values must be strings")
        pairs = [(str(k).strip(), v.strip()) for k, v in parsed.items()]
    else:
        pairs = []
        for line in stripped.splitlines():
            if not line.strip():
                continue
            name, colon, value = line.partition(":")
            if not colon:
                raise InvalidServers("headers: a line has no colon")
            pairs.append((name.strip(), value.strip()))
    for name, value in pairs:
        if not name or any(c in name for c in " \t\r\n:") or "\r" in value or "\n" in value:
            raise InvalidServers(f"headers: bad header {name!r}")
        try:  # HTTP header text is Latin-1 on the wire
            name.encode("latin-1")
            value.encode("latin-1")
        except UnicodeEncodeError:
            raise InvalidServers(f"headers: {name!r} is not Latin-1 text") from None
    return pairs


def _text(item: dict[str, Any], key: str, limit: int, *, required: bool = False) -> str:
    value = item.get(key)
    if value is None:
        value = ""
    if not isinstance(value, str):
        raise InvalidServers(f"{key} must be a string")
    value = value.strip()
    if len(value) > limit:
        raise InvalidServers(f"{key} is too long")
    if required and not value:
        raise InvalidServers(f"{key} is required")
    return value


def _http_url(item: dict[str, Any]) -> str:
    url = _text(item, "url", MAX_URL, required=True)
    try:
        parts = urlsplit(url)
        host = parts.hostname
    except ValueError:
        raise InvalidServers("url is malformed") from None
    if parts.scheme.lower() not in ("http", "https") or not host:
        raise InvalidServers("url must be http(s) with a host")
    return url


def _args(item: dict[str, Any]) -> list[str]:
    args = item.get("args")
    if args is None:
        return []
    if not isinstance(args, list) or len(args) > MAX_ARGS:
        raise InvalidServers("args must be a list of at most 64 strings")
    for arg in args:
        if not isinstance(arg, str) or len(arg) > MAX_ARG:
            raise InvalidServers("args: an argument is not a string or too long")
    return list(args)


def _env(item: dict[str, Any]) -> dict[str, str]:
    env = item.get("env")
    if env is None:
        return {}
    if not isinstance(env, dict) or len(env) > MAX_ENV:
        raise InvalidServers("env must be an object of at most 50 keys")
    for key, value in env.items():
        if not key or len(key) > MAX_ENV_KEY or "=" in key or "\x00" in key:
            raise InvalidServers(f"env: bad key {key!r}")
        if not isinstance(value, str) or len(value) > MAX_ENV_VALUE or "\x00" in value:
            raise InvalidServers(f"env: bad value for {key!r}")
    return dict(env)


def _flag(item: dict[str, Any], key: str, default: bool) -> bool:
    value = item.get(key)
    if value is None:
        return default
    if not isinstance(value, bool):
        raise InvalidServers(f"{key} must be a boolean")
    return value


def read_server(item: Any, server_id: str) -> dict[str, Any]:
    """One item in stored form (``server_id`` already chosen)."""
    if not isinstance(item, dict):
        raise InvalidServers("an item is not an object")
    kind = CONNECTOR if item.get("type") == CONNECTOR else HTTP
    server: dict[str, Any] = {"id": server_id, "name": _text(item, "name", MAX_NAME,
                                                            required=True),
                              "type": kind, "enabled": _flag(item, "enabled", True)}
    if kind == HTTP:
        server["url"] = _http_url(item)
        headers = _text(item, "headers", MAX_HEADERS)
        parse_headers(headers)
        server["headers"] = headers
    else:
        server["command"] = _text(item, "command", MAX_COMMAND, required=True)
        server["args"] = _args(item)
        server["env"] = _env(item)
        server["cwd"] = _text(item, "cwd", MAX_CWD)
    return server


def read_servers(items: Any, make_id: Callable[[int], str]) -> list[dict[str, Any]]:
    """A whole list in stored form; ``make_id(index)`` names an item sent without an id."""
    if not isinstance(items, list) or len(items) > MAX_SERVERS:
        raise InvalidServers("servers must be a list of at most 20 items")
    servers: list[dict[str, Any]] = []
    seen: set[str] = set()
    for index, item in enumerate(items):
        given = _text(item, "id", MAX_ID) if isinstance(item, dict) else ""
        server_id = given or make_id(index)
        if server_id in seen:
            raise InvalidServers(f"duplicate id {server_id!r}")
        seen.add(server_id)
        servers.append(read_server(item, server_id))
    return servers


def view(server: dict[str, Any], *, with_headers: bool) -> dict[str, Any]:
    """The wire form: ``request_mode`` added; ``headers`` only where the viewer may see them."""
    shown = dict(server)
    shown["request_mode"] = "connector" if server.get("type") == CONNECTOR else "backend"
    if not with_headers:
        shown.pop("headers", None)
    return shown


def views(servers: Iterable[dict[str, Any]], *, with_headers: bool) -> list[dict[str, Any]]:
    return [view(server, with_headers=with_headers) for server in servers]


def merged(builtin: Iterable[dict[str, Any]], custom: Iterable[dict[str, Any]]
           ) -> list[dict[str, Any]]:
    """Builtin servers first, then the user's; the first item with an id wins."""
    seen: set[str] = set()
    out: list[dict[str, Any]] = []
    for server in [*builtin, *custom]:
        if server["id"] not in seen:
            seen.add(server["id"])
            out.append(server)
    return out
