"""Hypothesis strategies for bad input: odd numbers, odd Unicode, wrong types, deep nesting.

Each strategy mixes a fixed list of values known to have broken servers (integers just past
64 bits, digit-like Unicode, signs doubled, NaN, nesting deeper than any parser's recursion
limit) with generated ones, so the seeded run always tries the known ones early.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote, urlencode

import orjson
from hypothesis import strategies as st

from tests.fuzz.route_table import Endpoint, Param

ODD_NUMBER_TEXTS = [
    "0", "-1", "1", "9223372036854775807", "9223372036854775808", "-9223372036854775809",
    "1" * 23, "9" * 40, "²", "--1", "+1", "1e12", "1e309", "-0", "0x10", "1_000", " 1 ", "\uff11",
    "٣", "NaN", "Infinity", "1.5", "", "null",
]
ODD_TEXTS = [
    "gpt-fake", "", " ", "\u0000", "\u202e", "\ufeff", "%00", "..", "../..", "a" * 300, "é", "😀",
    "\ud7ff", "<script>", "' OR 1=1 --", "${x}", "\\", "null", "true", "[]", "{}",
]
ODD_NUMBERS: list[Any] = [
    0, -1, 1, (1 << 63) - 1, 1 << 63, -(1 << 63) - 1, 1 << 64, 10 ** 22, 1e12, 1e300, -1e300,
    0.1, 1.5, -0.0, 2 ** 53 + 1,
]
#: body keys the routes read (a pool, not per route: any route ignores what it does not know)
FIELD_NAMES = [
    "name", "username", "password", "new_password", "current_password", "email", "email_code",
    "model", "model_name", "messages", "prompt", "input", "max_tokens", "stream", "n", "id",
    "ids", "user_id", "group_id", "group_ids", "channel_id", "user_channel_id", "model_id",
    "enabled", "is_admin", "balance", "amount", "quota", "price", "input_price",
    "output_price", "multiplier", "priority", "weight", "base_url", "key", "keys", "type",
    "count", "max_uses", "page", "page_size", "sort_order", "title", "content", "code",
    "plan_id", "subscription_plan_id", "interval_seconds", "url", "settings", "models",
    "quota_type", "tiers", "input_price_tiers", "video_billing_config", "contents",
    "system", "tools", "temperature", "size", "response_format", "task_id", "action",
]
QUERY_NAMES = [
    "page", "page_size", "p", "size", "user_id", "api_key_id", "channel_id",
    "user_channel_id", "model", "model_name", "search", "keyword", "from", "to", "start_time",
    "end_time", "start_date", "end_date", "type", "status", "limit", "offset", "id", "alt",
    "key", "code", "state", "order_no", "token",
]
HEADER_NAMES = [
    "Content-Type", "Accept", "X-Api-Key", "x-goog-api-key", "Idempotency-Key", "Cookie",
    "Accept-Encoding", "Origin", "Referer", "Stripe-Signature", "anthropic-version",
    "X-Request-Id", "Range", "If-None-Match", "User-Agent", "X-Forwarded-For",
]
CONTENT_TYPES = [
    "application/json", "application/x-www-form-urlencoded", "multipart/form-data",
    "multipart/form-data; boundary=x", "text/plain", "application/json; charset=utf-16",
    "", "*/*", "application/octet-stream",
]


def odd_text(max_size: int = 40) -> st.SearchStrategy[str]:
    return st.one_of(st.sampled_from(ODD_TEXTS + ODD_NUMBER_TEXTS),
                     st.text(max_size=max_size))


def odd_number() -> st.SearchStrategy[Any]:
    return st.one_of(st.sampled_from(ODD_NUMBERS),
                     st.integers(min_value=-(1 << 70), max_value=1 << 70),
                     st.floats(allow_nan=False, allow_infinity=False))


def json_values() -> st.SearchStrategy[Any]:
    leaves = st.one_of(st.none(), st.booleans(), odd_number(), odd_text())
    return st.recursive(
        leaves,
        lambda inner: st.one_of(st.lists(inner, max_size=4),
                                st.dictionaries(st.sampled_from(FIELD_NAMES) | st.text(
                                    max_size=8), inner, max_size=4)),
        max_leaves=12)


def json_bodies() -> st.SearchStrategy[bytes]:
    """Mostly objects with known field names holding odd values; sometimes not an object."""
    objects = st.dictionaries(st.sampled_from(FIELD_NAMES), json_values(), max_size=6)
    deep = st.integers(min_value=100, max_value=5000).map(
        lambda depth: b"[" * depth + b"]" * depth)
    deep_object = st.integers(min_value=100, max_value=2000).map(
        lambda depth: b'{"a":' * depth + b"1" + b"}" * depth)
    return st.one_of(
        objects.map(_dumps),
        json_values().map(_dumps),
        deep, deep_object,
        st.sampled_from([b"", b"{", b"nul", b"\xff\xfe{}", b'{"a":1}garbage', b"1" * 400,
                         b'{"max_tokens": 1' + b"0" * 30 + b"}", b"NaN", b"[1e999]"]),
        st.binary(max_size=64),
    )


def _dumps(value: Any) -> bytes:
    try:
        return orjson.dumps(value)
    except orjson.JSONEncodeError:  # integers past 64 bits: JSON text allows them
        return json.dumps(value).encode()


def path_value(param: Param) -> st.SearchStrategy[str]:
    if param.kind == "int":
        return st.one_of(st.sampled_from(ODD_NUMBER_TEXTS),
                         st.integers(min_value=0, max_value=1 << 70).map(str))
    if param.kind == "action":
        return st.one_of(st.sampled_from(["generateContent", "streamGenerateContent",
                                          "countTokens", "embedContent", ""]), odd_text())
    return st.one_of(st.sampled_from(ODD_NUMBER_TEXTS), odd_text())


def header_value() -> st.SearchStrategy[str]:
    """Header values a client can send: Latin-1, no CR/LF/NUL."""
    return st.text(alphabet=st.characters(min_codepoint=0x20, max_codepoint=0xFF,
                                          exclude_characters="\x7f"), max_size=60)


@dataclass
class BadRequest:
    method: str
    path: str
    role: str
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes | None = None

    def __repr__(self) -> str:
        return (f"BadRequest({self.method} {self.path!r} as {self.role}, "
                f"headers={self.headers!r}, body={(self.body or b'')[:200]!r})")


@st.composite
def bad_requests(draw: Any, endpoint: Endpoint, roles: list[str]) -> BadRequest:
    path = "".join(piece if isinstance(piece, str)
                   else quote(draw(path_value(piece)).encode("utf-8", "surrogatepass"), safe="")
                   for piece in endpoint.pieces) or "/"
    query = draw(st.dictionaries(st.sampled_from(QUERY_NAMES),
                                 st.one_of(st.sampled_from(ODD_NUMBER_TEXTS), odd_text()),
                                 max_size=3))
    if query:
        path += "?" + urlencode({k: v.encode("utf-8", "surrogatepass") for k, v in query.items()})
    headers = draw(st.dictionaries(st.sampled_from(HEADER_NAMES), header_value(), max_size=3))
    body = None
    if endpoint.method in ("POST", "PUT", "PATCH", "DELETE"):
        kind = draw(st.sampled_from(["json", "json", "json", "form", "none"]))
        if kind == "json":
            body = draw(json_bodies())
            headers.setdefault("Content-Type", draw(st.sampled_from(CONTENT_TYPES)))
        elif kind == "form":
            fields = draw(st.dictionaries(st.sampled_from(FIELD_NAMES), odd_text(), max_size=4))
            body = urlencode({k: v.encode("utf-8", "surrogatepass")
                              for k, v in fields.items()}).encode()
            headers["Content-Type"] = "application/x-www-form-urlencoded"
    return BadRequest(endpoint.method, path, draw(st.sampled_from(roles)), headers, body)


#: the values every path parameter, id-like query parameter and body field is swept with
SWEEP_TEXTS = ["9223372036854775808", "9" * 23, "²", "--1", "-1", "0", "1e12", "\u0663"]
SWEEP_BODY_VALUES: list[Any] = [1 << 63, -(1 << 63) - 1, "9" * 23, "²", "--1", "1e12", 1e12,
                                1e300, -1, [], {}, "x"]
SWEEP_QUERY_NAMES = ["page", "page_size", "user_id", "channel_id", "user_channel_id",
                     "api_key_id", "id", "start_time", "end_time", "from", "to"]


def sweep(endpoint: Endpoint, role: str) -> list[BadRequest]:
    """Known-bad requests for ``endpoint``, deterministic: every path parameter with each
    ``SWEEP_TEXTS`` value; for GETs, the query parameters with 64-bit-plus and Unicode-digit
    values; for bodies, every known field at once with each ``SWEEP_BODY_VALUES`` value."""
    requests: list[BadRequest] = []
    params = endpoint.params
    for text in SWEEP_TEXTS if params else []:
        path = "".join(piece if isinstance(piece, str) else quote(text, safe="")
                       for piece in endpoint.pieces)
        requests.append(BadRequest(endpoint.method, path, role,
                                   {"Content-Type": "application/json"},
                                   b"{}" if endpoint.method != "GET" else None))
    base = "".join(piece if isinstance(piece, str) else "1" for piece in endpoint.pieces)
    if endpoint.method == "GET":
        for text in ("9" * 23, "9223372036854775808", "²", "--1"):
            query = urlencode({name: text for name in SWEEP_QUERY_NAMES})
            requests.append(BadRequest("GET", f"{base}?{query}", role))
    else:
        for value in SWEEP_BODY_VALUES:
            body = _dumps({name: value for name in FIELD_NAMES})
            requests.append(BadRequest(endpoint.method, base, role,
                                       {"Content-Type": "application/json"}, body))
    return requests
