"""Bodies and headers are bounded before they are buffered (issue 15, finding 3).

Real TCP clients (blocking sockets in a thread) against the app's real listener: a 256 MiB
upload is refused without the process growing, a huge declared Content-Length is refused at
once, a chunked body is stopped at its family's cap, and oversized headers get 431 (twisted.web
alone closes the connection with no answer).
"""

from __future__ import annotations

import os
import socket
import time
from typing import Any

import orjson
from twisted.internet.threads import deferToThread

from tap.body_limits import CONSOLE_LIMIT, GATEWAY_LIMIT
from tests.support.app import AppTestCase

MIB = 1 << 20
CHUNK = b"a=" + b"x" * (64 * 1024 - 2)


def rss_bytes() -> int:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


class Answer:
    def __init__(self, raw: bytes) -> None:
        head, _, self.body = raw.partition(b"\r\n\r\n")
        status_line = head.split(b"\r\n", 1)[0]
        self.status = int(status_line.split(b" ")[1]) if status_line else 0
        self.head = head

    def json(self) -> Any:
        return orjson.loads(self.body)

    def __repr__(self) -> str:
        return f"<Answer {self.status} {self.head[:200]!r} {self.body[:200]!r}>"


def exchange(port: int, head: bytes, body_bytes: int = 0, chunked: bool = False,
             timeout: float = 10.0) -> tuple[Answer, float]:
    """Send ``head`` then ``body_bytes`` of body (sent no matter what the server answers, as a
    careless client would), then read the answer; also the seconds it took."""
    started = time.monotonic()
    sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    try:
        sock.sendall(head)
        sent = 0
        try:
            while sent < body_bytes:
                piece = CHUNK[:body_bytes - sent]
                if chunked:
                    sock.sendall(b"%x\r\n%s\r\n" % (len(piece), piece))
                else:
                    sock.sendall(piece)
                sent += len(piece)
            if chunked:
                sock.sendall(b"0\r\n\r\n")
        except OSError:
            pass  # the server refused and stopped listening: the answer is what counts
        received = b""
        try:
            while True:
                data = sock.recv(65536)
                if not data:
                    break
                received += data
        except OSError:
            pass
    finally:
        sock.close()
    return Answer(received), time.monotonic() - started


def request_head(method: str, path: str, headers: dict[str, str]) -> bytes:
    lines = [f"{method} {path} HTTP/1.1", "Host: 127.0.0.1", "Connection: close"]
    lines += [f"{name}: {value}" for name, value in headers.items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


class BodyLimitTests(AppTestCase):
    @property
    def port_number(self) -> int:
        return int(self.port.getHost().port)

    async def send(self, method: str, path: str, headers: dict[str, str], body_bytes: int = 0,
                   chunked: bool = False) -> tuple[Answer, float]:
        head = request_head(method, path, headers)
        return await deferToThread(exchange, self.port_number, head, body_bytes, chunked)

    async def warm_up(self) -> None:
        """One ordinary request first, so the thread and the connection code are in memory."""
        answer, _ = await self.send("POST", "/auth/password/login", {
            "Content-Type": "application/x-www-form-urlencoded", "Content-Length": "3"}, 3)
        assert answer.status != 413, answer

    async def test_256_mib_form_post_refused_without_growing_the_process(self) -> None:
        await self.warm_up()
        before = rss_bytes()
        answer, _ = await self.send("POST", "/auth/password/login", {
            "Content-Type": "application/x-www-form-urlencoded",
            "Content-Length": str(256 * MIB)}, 256 * MIB)
        growth = rss_bytes() - before
        assert answer.status == 413, answer
        assert answer.json()["type"] == "payload_too_large"
        assert growth < 2 * MIB, growth

    async def test_256_mib_chunked_form_post_stopped_at_the_cap(self) -> None:
        await self.warm_up()
        before = rss_bytes()
        answer, _ = await self.send("POST", "/auth/password/login", {
            "Content-Type": "application/x-www-form-urlencoded",
            "Transfer-Encoding": "chunked"}, 256 * MIB, chunked=True)
        growth = rss_bytes() - before
        assert answer.status == 413, answer
        assert str(CONSOLE_LIMIT) in answer.json()["error"]
        assert growth < 2 * MIB, growth

    async def test_huge_declared_length_refused_at_once(self) -> None:
        # only the headers are sent: the answer must not wait for 200 MiB that never come
        answer, seconds = await self.send("POST", "/auth/password/login", {
            "Content-Type": "application/json", "Content-Length": str(200 * MIB)})
        assert answer.status == 413, answer
        assert seconds < 2, seconds

    async def test_gateway_family_answers_in_its_own_shape(self) -> None:
        answer, _ = await self.send("POST", "/v1/chat/completions", {
            "Content-Type": "application/json", "Content-Length": str(GATEWAY_LIMIT + 1)})
        assert answer.status == 413, answer
        assert answer.json()["error"]["code"] == "body_too_large"
        messages, _ = await self.send("POST", "/v1/messages", {
            "Content-Type": "application/json", "Content-Length": str(GATEWAY_LIMIT + 1)})
        assert messages.status == 413, messages
        assert messages.json()["type"] == "error"

    async def test_chunked_overflow_on_the_console_refused(self) -> None:
        answer, _ = await self.send("POST", "/api/user/me", {
            "Content-Type": "application/json", "Transfer-Encoding": "chunked"},
            CONSOLE_LIMIT + MIB, chunked=True)
        assert answer.status == 413, answer

    async def test_payment_notify_capped_at_one_mib(self) -> None:
        answer, _ = await self.send("POST", "/api/payment/stripe/webhook", {
            "Content-Type": "application/json", "Content-Length": str(MIB + 1)})
        assert answer.status == 413, answer

    async def test_settings_import_may_send_more_than_the_console_cap(self) -> None:
        # 5 MiB reaches the route (which answers 401 to an anonymous caller), not a 413
        answer, _ = await self.send("POST", "/api/settings/import", {
            "Content-Type": "application/json", "Content-Length": str(5 * MIB)}, 5 * MIB)
        assert answer.status == 401, answer

    async def test_16_kib_authorization_header_answered_431(self) -> None:
        token = "x" * (16 * 1024)
        answer, _ = await self.send("GET", "/api/user/me", {"Authorization": f"Bearer {token}"})
        assert answer.status == 431, answer
        assert answer.json()["error"]
        gateway, _ = await self.send("GET", "/v1/models", {"Authorization": f"Bearer {token}"})
        assert gateway.status == 431, gateway
        assert gateway.json()["error"]["code"] == "headers_too_large"

    async def test_over_long_request_line_answered_414(self) -> None:
        answer, _ = await self.send("GET", "/api/user/me?q=" + "x" * 20000, {})
        assert answer.status == 414, answer

    async def test_many_small_headers_answered_431(self) -> None:
        headers = {f"X-Filler-{n}": "y" for n in range(200)}
        answer, _ = await self.send("GET", "/api/user/me", headers)
        assert answer.status == 431, answer

    async def test_headers_just_under_the_limit_still_served(self) -> None:
        answer, _ = await self.send("GET", "/api/user/me", {"X-Filler": "y" * 8000})
        assert answer.status == 401, answer
