"""API keys in and out: the JSON object (console contract §4.9) and the validated input.

The object never carries the secret or its hash; ``usage`` and ``quota_remaining`` come from the
key's own counters, which settlement updates atomically (contract weakness 5), never from logs.
Input accepts both the origin names and the spec aliases (D4): ``allowed_ips``/``ip_whitelist``
(array, or a string split on commas, whitespace or newlines) and ``quota_limit``/``quota``.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from typing import Any

from console.http import bad_request
from console.user_view import timestamp
from console.validation import MISSING, Body
from gateway.billing.money import format_nanos, to_nanos
from gateway.store.api_keys import MAX_USER_CHANNELS

DEFAULT_NAME = "API key"
MAX_NAME = 100
MAX_MODELS = 1000
MAX_IPS = 1000


def key_view(row: dict[str, Any]) -> dict[str, Any]:
    limit = row["quota_limit_nanos"]
    spent = row["spent_nanos"]
    ips = list(row["allowed_ips"] or [])
    view: dict[str, Any] = {
        "id": row["id"],
        "name": row["name"],
        "key_prefix": row["key_prefix"],
        "allowed_models": list(row["allowed_models"] or []),
        "allowed_user_channels": list(row["allowed_user_channels"] or []),
        "allowed_ips": ips,
        "ip_whitelist": list(ips),
        "quota_limit": format_nanos(limit),
        "quota": format_nanos(limit),
        "enabled": bool(row["enabled"]),
        "usage": {
            "request_count": row["request_count"],
            "input_tokens": row["input_tokens"],
            "output_tokens": row["output_tokens"],
            "cached_input_tokens": row["cached_input_tokens"],
            "total_tokens": row["input_tokens"] + row["output_tokens"],
            "total_cost": format_nanos(spent),
        },
        "last_used_at": timestamp(row["last_used_at"]),
        "usage_reset_at": timestamp(row["usage_reset_at"]),
        "created_at": timestamp(row["created_at"]),
        "updated_at": timestamp(row["updated_at"]),
    }
    if limit > 0:
        view["quota_remaining"] = format_nanos(max(0, limit - spent))
    return view


def with_secret(row: dict[str, Any], plaintext: str) -> dict[str, Any]:
    """Create/rotate answer (D5): object fields, the plaintext once, and the object again."""
    view = key_view(row)
    return {**view, "api_key": plaintext, "key": key_view(row)}


@dataclass
class KeyInput:
    """Fields present in the body (absent ones are left out of ``changes``)."""

    changes: dict[str, Any]


def _ips(body: Body) -> Any:
    name = body.first_present("allowed_ips", "ip_whitelist")
    if name is None:
        return MISSING
    raw = body.data[name]
    if raw is None:
        return MISSING
    if isinstance(raw, str):
        raw = raw.replace(",", " ").split()
    if not isinstance(raw, list) or not all(isinstance(item, str) for item in raw):
        raise bad_request(f"{name} must be an array of IP addresses or CIDR ranges", field=name)
    if len(raw) > MAX_IPS:
        raise bad_request(f"{name} must have at most {MAX_IPS} items", field=name)
    found: set[str] = set()
    for item in raw:
        text = item.strip()
        if not text:
            continue
        try:
            if "/" in text:
                found.add(str(ipaddress.ip_network(text, strict=False)))
            else:
                found.add(str(ipaddress.ip_address(text)))
        except ValueError:
            raise bad_request(f"{text!r} is not an IP address or CIDR range",
                              field=name) from None
    return sorted(found)


def _models(body: Body) -> Any:
    models = body.string_list("allowed_models", split=True, max_items=MAX_MODELS)
    if models is MISSING:
        return MISSING
    if any(len(model) > 200 for model in models):
        raise bad_request("allowed_models entries must be at most 200 characters",
                          field="allowed_models")
    return sorted(set(models))


def _channels(body: Body) -> Any:
    ids = body.int_list("allowed_user_channels")
    if ids is MISSING:
        return MISSING
    unique = list(dict.fromkeys(ids))
    if len(unique) > MAX_USER_CHANNELS:
        raise bad_request("API key cannot be bound to more than 10 user channels",
                          field="allowed_user_channels")
    return unique


def _quota(body: Body) -> Any:
    name = body.first_present("quota_limit", "quota")
    if name is None:
        return MISSING
    value = body.decimal(name, allow_negative=True)
    if value is MISSING:
        return MISSING
    if value < 0:
        raise bad_request("API key quota limit cannot be negative", field=name)
    return to_nanos(value)


def parse_key_input(data: dict[str, Any], *, creating: bool) -> KeyInput:
    """Validate every field first (400 naming the field); nothing is written on failure."""
    body = Body(data)
    changes: dict[str, Any] = {}
    name = body.string("name", max_length=MAX_NAME)
    if creating:
        changes["name"] = name or DEFAULT_NAME
    elif name is not MISSING:
        if not name:
            raise bad_request("name is required", field="name")
        changes["name"] = name
    for column, value in (("allowed_models", _models(body)),
                          ("allowed_user_channels", _channels(body)),
                          ("allowed_ips", _ips(body)),
                          ("quota_limit_nanos", _quota(body)),
                          ("enabled", body.boolean("enabled"))):
        if value is not MISSING:
            changes[column] = value
        elif creating:
            changes[column] = {"enabled": True, "quota_limit_nanos": 0}.get(column, [])
    return KeyInput(changes)
