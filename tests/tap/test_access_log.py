"""The access log never contains a credential passed in the query string."""

from __future__ import annotations

import os
import shutil
import tempfile

from twisted.internet.task import Clock
from twisted.trial.unittest import TestCase
from twisted.web.test.requesthelper import DummyRequest

from tap.access_log import BufferedAccessLog, redact_uri, redacting_log_formatter


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
