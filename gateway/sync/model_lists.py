"""Which upstream path lists a channel's models, and how to read the list (contract §5.10).

An admin can ask Lockgate to read an upstream's model list in a named ``format`` (each maps to
a path under the channel's base URL) or paste the raw answer the browser fetched.  Upstreams
answer in many shapes -- ``{"data": [{"id": ...}]}``, bare arrays of names, ``{"models":
[{"name": "models/x"}]}``, maps keyed by name -- so reading is tolerant: every string or object
with an ``id``/``model``/``model_name``/``name`` found in the usual containers is a model.
The result is de-duplicated and sorted so previews are stable.

Pure: no I/O.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

import orjson

COMPAT_PATH = "/v1/models"
GENERIC_PATH = "/models"
API_PATH = "/api/models"
#: ``auto`` tries these in order; the first non-empty list wins
AUTO_PATHS = (COMPAT_PATH, GENERIC_PATH, API_PATH)

_FORMAT_PATHS = {
    "compat": COMPAT_PATH,
    "compat_models": COMPAT_PATH,
    "openai": COMPAT_PATH,
    "openai_models": COMPAT_PATH,
    "generic_models": GENERIC_PATH,
    "models": GENERIC_PATH,
    "api_models": API_PATH,
    "oneapi_models": API_PATH,
}
CONTAINER_KEYS = ("data", "models", "items", "list", "result", "model_list")
NAME_KEYS = ("id", "model", "model_name", "name")
MAX_NAME = 100


class SyncFormatError(ValueError):
    """A format, path or payload the sync cannot use; the message is safe to show."""


def format_key(value: str | None) -> str:
    return (value or "auto").strip().lower().replace("-", "_") or "auto"


def custom_path(path: str | None) -> str:
    """A custom list path; a full URL is reduced to its path and query, so the request (and
    the channel key) always goes to the channel's own host."""
    text = (path or "").strip()
    if not text:
        raise SyncFormatError("custom sync path is required")
    if "://" in text or text.startswith("//"):
        parts = urlsplit(text)
        text = parts.path or "/"
        if parts.query:
            text += "?" + parts.query
    if not text.startswith("/"):
        text = "/" + text
    return text


def model_list_paths(fmt: str | None, path: str | None = None) -> tuple[str, ...]:
    """The paths to try, in order, for a model-list ``format``."""
    key = format_key(fmt)
    if key == "auto":
        return AUTO_PATHS
    if key == "custom":
        return (custom_path(path),)
    found = _FORMAT_PATHS.get(key)
    if found is None:
        raise SyncFormatError("unsupported model list sync format")
    return (found,)


def join_url(base_url: str, path: str) -> str:
    """``base_url`` + ``path`` without a doubled slash or a doubled ``/v1``."""
    base = base_url.strip().rstrip("/")
    if base.endswith("/v1") and (path == "/v1" or path.startswith("/v1/")
                                 or path.startswith("/v1?")):
        base = base[:-3]
    return base + path


def decode_payload(payload: Any) -> Any:
    """A pasted payload: objects and arrays as they are, strings decoded as JSON."""
    if isinstance(payload, bytes | bytearray):
        payload = bytes(payload).decode("utf-8", "replace")
    if isinstance(payload, str):
        text = payload.strip()
        if not text:
            raise SyncFormatError("Payload is empty")
        try:
            return orjson.loads(text)
        except orjson.JSONDecodeError:
            raise SyncFormatError("Payload is not valid JSON") from None
    return payload


def _clean_name(value: Any) -> str | None:
    if not isinstance(value, str):
        return None
    name = value.strip()
    if name.startswith("models/"):
        name = name[len("models/"):]
    if not name or len(name) > MAX_NAME or any(ch.isspace() for ch in name):
        return None
    return name


def _item_name(item: Any) -> str | None:
    if isinstance(item, str):
        return _clean_name(item)
    if isinstance(item, dict):
        for key in NAME_KEYS:
            name = _clean_name(item.get(key))
            if name:
                return name
    return None


def _collect(node: Any, names: list[str], depth: int) -> None:
    if depth > 4:
        return
    if isinstance(node, list):
        for item in node:
            name = _item_name(item)
            if name:
                names.append(name)
        return
    if not isinstance(node, dict):
        return
    for key in CONTAINER_KEYS:
        if key in node and isinstance(node[key], list | dict):
            _collect(node[key], names, depth + 1)
            return
    # a map keyed by model name: {"gpt-x": {...}, "other": {...}}
    if node and all(isinstance(value, dict) for value in node.values()):
        for key, value in node.items():
            name = _item_name(value) or _clean_name(key)
            if name:
                names.append(name)


def parse_model_names(payload: Any) -> list[str]:
    """Every model name in an upstream (or pasted) model-list answer, sorted, unique."""
    names: list[str] = []
    _collect(decode_payload(payload), names, 0)
    return sorted(set(names))
