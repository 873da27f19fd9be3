"""The access log never contains a credential passed in the query string."""

from __future__ import annotations

from twisted.web.test.requesthelper import DummyRequest

from tap.access_log import redact_uri, redacting_log_formatter


def test_redact_uri_removes_key_values() -> None:
    assert redact_uri(b"/v1beta/models/m:generateContent?key=sk-secret&alt=sse") == (
        b"/v1beta/models/m:generateContent?key=[redacted]&alt=sse")
    assert redact_uri(b"/x?alt=sse&KEY=abc") == b"/x?alt=sse&KEY=[redacted]"
    assert redact_uri(b"/plain/path") == b"/plain/path"
    assert redact_uri(b"/x?monkey=1") == b"/x?monkey=1"


def test_formatter_line_has_no_secret() -> None:
    request = DummyRequest([b"v1beta"])
    request.uri = b"/v1beta/models/m:generateContent?key=sk-very-secret"
    request.method = b"POST"
    request.clientproto = b"HTTP/1.1"
    request.code = 200
    request.sentLength = 10
    line = redacting_log_formatter("[22/Nov/2026:00:00:00 +0000]", request)
    assert "sk-very-secret" not in line
    assert "key=[redacted]" in line
