"""The access log never contains a credential passed in the query string."""

from __future__ import annotations

import os
import shutil
import tempfile

from hypothesis import given, settings
from hypothesis import strategies as st
from twisted.internet.address import IPv4Address, IPv6Address
from twisted.internet.task import Clock
from twisted.trial.unittest import TestCase
from twisted.web.http import combinedLogFormatter
from twisted.web.test.requesthelper import DummyRequest

from tap.access_log import BufferedAccessLog, _Redacted, redact_uri, redacting_log_formatter


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


class BufferedAccessLogTests(TestCase):
    """Lines reach the file in blocks: after the interval, at the size limit, or on close."""

    def setUp(self) -> None:
        self.clock = Clock()
        directory = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, directory)
        self.path = os.path.join(directory, "access.log")
        self.log = BufferedAccessLog.open(self.path, self.clock)
        self.addCleanup(self.log.close)

    def written(self) -> bytes:
        with open(self.path, "rb") as handle:
            return handle.read()

    def test_lines_wait_for_the_interval(self) -> None:
        self.log.write("one\n")
        self.log.write("two\n")
        assert self.written() == b""
        self.clock.advance(BufferedAccessLog.INTERVAL)
        assert self.written() == b"one\ntwo\n"
        assert self.clock.getDelayedCalls() == []

    def test_a_full_buffer_is_written_at_once(self) -> None:
        line = "x" * 1023 + "\n"
        for _ in range(BufferedAccessLog.LIMIT // len(line)):
            self.log.write(line)
        assert len(self.written()) == BufferedAccessLog.LIMIT
        assert self.clock.getDelayedCalls() == []

    def test_close_writes_what_is_left_and_appends(self) -> None:
        self.log.write("first\n")
        self.log.close()
        again = BufferedAccessLog.open(self.path, self.clock)
        again.write("second\n")
        again.close()
        assert self.written() == b"first\nsecond\n"


@settings(max_examples=300, deadline=None)
@given(uri=st.one_of(st.binary(max_size=40), st.from_regex(rb"\A/[ -~]{0,30}\Z")),
       method=st.sampled_from([b"GET", b"POST", b"P\"ST", b"G\\T", b"\xffX"]),
       protocol=st.sampled_from([b"HTTP/1.1", b"HTTP/1.0", b"HTTP/1.1\n"]),
       referrer=st.one_of(st.none(), st.binary(max_size=20), st.text(max_size=20).map(
           lambda t: t.encode("utf-8"))),
       agent=st.one_of(st.none(), st.from_regex(rb"\A[ -~]{0,30}\Z"), st.binary(max_size=20)),
       code=st.integers(100, 599), length=st.integers(0, 10**9),
       host=st.sampled_from(["127.0.0.1", "::1", "10.1.2.3"]))
def test_formatter_writes_what_twisted_writes(uri: bytes, method: bytes, protocol: bytes,
                                              referrer: bytes | None, agent: bytes | None,
                                              code: int, length: int, host: str) -> None:
    """The fast path builds the line itself; it must be Twisted's line, byte for byte."""
    request = DummyRequest([b""])
    request.uri, request.method, request.clientproto = uri, method, protocol
    request.code, request.sentLength = code, length
    request.client = (IPv6Address if ":" in host else IPv4Address)("TCP", host, 12345)
    if referrer is not None:
        request.requestHeaders.setRawHeaders(b"referer", [referrer])
    if agent is not None:
        request.requestHeaders.setRawHeaders(b"user-agent", [agent])
    stamp = "[22/Nov/2026:00:00:00 +0000]"
    expected = combinedLogFormatter(stamp, request if b"?" not in uri else _Redacted(request))
    assert redacting_log_formatter(stamp, request) == expected
    # the same fields again (their text kept by now), another answer and another second
    request.code, request.sentLength = 599 - code + 100, length // 2
    stamp = "[23/Nov/2026:01:02:03 +0000]"
    expected = combinedLogFormatter(stamp, request if b"?" not in uri else _Redacted(request))
    assert redacting_log_formatter(stamp, request) == expected


def test_kept_text_is_per_distinct_request_fields() -> None:
    """Each field is part of what the kept text is looked up by: a line never shows another
    request's peer, method, path, protocol, referrer or agent."""
    base = {"host": "10.0.0.1", "method": b"POST", "uri": b"/v1/chat/completions",
            "protocol": b"HTTP/1.1", "referrer": b"https://a.example/", "agent": b"sdk/1"}
    variants = [base] + [{**base, name: value} for name, value in (
        ("host", "10.0.0.2"), ("method", b"GET"), ("uri", b"/v1/responses"),
        ("protocol", b"HTTP/1.0"), ("referrer", b"https://b.example/"), ("agent", b"sdk/2"),
        ("agent", b"sdk/\xff"))]
    stamp = "[22/Nov/2026:00:00:00 +0000]"
    for _ in range(2):
        for fields in variants:
            request = DummyRequest([b""])
            request.uri, request.method = fields["uri"], fields["method"]
            request.clientproto, request.code, request.sentLength = fields["protocol"], 200, 7
            request.client = IPv4Address("TCP", fields["host"], 1)
            request.requestHeaders.setRawHeaders(b"referer", [fields["referrer"]])
            request.requestHeaders.setRawHeaders(b"user-agent", [fields["agent"]])
            assert redacting_log_formatter(stamp, request) == combinedLogFormatter(
                stamp, request)
