"""Credential extraction order (§3, ours) and redaction of credentials in logged URLs."""

from __future__ import annotations

import pytest
from twisted.web.test.requesthelper import DummyRequest

from gateway.v1 import credentials
from gateway.v1.credentials import BEARER, QUERY, X_API_KEY, X_GOOG_API_KEY


def request(headers: dict[str, str] | None = None, query: bytes = b""):
    req = DummyRequest([b"v1", b"chat", b"completions"])
    req.uri = b"/v1/chat/completions" + (b"?" + query if query else b"")
    for name, value in (headers or {}).items():
        req.requestHeaders.setRawHeaders(name.encode(), [value.encode()])
    return req


def test_bearer_first():
    req = request({"Authorization": "Bearer sk-a", "x-api-key": "sk-b",
                   "x-goog-api-key": "sk-c"}, b"key=sk-d")
    assert credentials.extract(req) == ("sk-a", BEARER)


@pytest.mark.parametrize("value", ["bearer sk-a", "BEARER sk-a", "Bearer   sk-a", "Bearer\tsk-a",
                                   "  Bearer sk-a  "])
def test_bearer_scheme_case_and_whitespace(value):
    assert credentials.extract(request({"Authorization": value})) == ("sk-a", BEARER)


@pytest.mark.parametrize("value", ["Basic dXNlcjpwYXNz", "Bearer", "Bearer ", "Bearer a b",
                                   "sk-a", "Token sk-a", ""])
def test_malformed_authorization_falls_through(value):
    req = request({"Authorization": value, "x-api-key": "sk-b"})
    assert credentials.extract(req) == ("sk-b", X_API_KEY)


def test_malformed_authorization_alone_is_no_credential():
    assert credentials.extract(request({"Authorization": "Basic abc"})) is None


def test_x_api_key_before_goog_before_query():
    assert credentials.extract(request({"x-api-key": "sk-b", "x-goog-api-key": "sk-c"},
                                       b"key=sk-d")) == ("sk-b", X_API_KEY)
    assert credentials.extract(request({"x-goog-api-key": "sk-c"}, b"key=sk-d")) == (
        "sk-c", X_GOOG_API_KEY)
    assert credentials.extract(request(query=b"key=sk-d")) == ("sk-d", QUERY)


def test_blank_values_are_skipped():
    req = request({"x-api-key": "  ", "x-goog-api-key": ""}, b"key=&key=sk-e")
    assert credentials.extract(req) == ("sk-e", QUERY)


def test_nothing_is_none():
    assert credentials.extract(request()) is None
    assert credentials.extract(request(query=b"other=x&monkey=sk-x")) is None


def test_jwt_token_is_returned_as_is():
    token = "eyJhbGciOiJIUzI1NiJ9.eyJpZCI6MX0.sig"
    assert credentials.extract(request({"Authorization": f"Bearer {token}"})) == (token, BEARER)


def test_query_key_decoding_and_form_fields_ignored():
    assert credentials.extract(request(query=b"alt=sse&%6Bey=sk-%2Bab+c")) == ("sk-+ab c", QUERY)
    req = request(query=b"alt=sse")
    req.args = {b"alt": [b"sse"], b"key": [b"sk-from-a-form-field"]}  # body fields land here
    assert credentials.extract(req) is None


def test_choose_pure():
    assert credentials.choose("Basic x", "", "sk-g", "") == ("sk-g", X_GOOG_API_KEY)
    assert credentials.choose() is None


@pytest.mark.parametrize(("token", "expected"), [
    ("sk-abc", True), ("sk-", True), ("SK-abc", False), ("eyJ.x.y", False), ("", False)])
def test_is_api_key(token, expected):
    assert credentials.is_api_key(token) is expected


@pytest.mark.parametrize(("uri", "expected"), [
    ("/v1/models", "/v1/models"),
    ("/v1beta/models/g:generateContent?key=sk-secret",
     "/v1beta/models/g:generateContent?key=REDACTED"),
    ("/v1/x?alt=sse&key=sk-secret&b=2", "/v1/x?alt=sse&key=REDACTED&b=2"),
    ("/v1/x?KEY=sk-secret", "/v1/x?KEY=REDACTED"),
    ("/v1/x?%6Bey=sk-secret", "/v1/x?%6Bey=REDACTED"),
    ("/v1/x?api_key=a&access_token=b&keys=c", "/v1/x?api_key=REDACTED&access_token=REDACTED&keys=c"),
    ("/v1/x?key", "/v1/x?key=REDACTED"),
    ("/v1/x?key=a&key=b", "/v1/x?key=REDACTED&key=REDACTED"),
    ("/v1/x?monkey=1&a=%20", "/v1/x?monkey=1&a=%20"),
    ("/v1/x?key=sk-secret#frag", "/v1/x?key=REDACTED#frag"),
])
def test_redact_uri(uri, expected):
    assert credentials.redact_uri(uri) == expected
    assert credentials.redact_uri(uri.encode()) == expected
    assert "sk-secret" not in credentials.redact_uri(uri)
