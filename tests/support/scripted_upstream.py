"""A loopback HTTP server with scripted answers per path, for sync, monitor and probe tests.

``ScriptedUpstream.start()`` listens on 127.0.0.1:<free port>; ``answer(path, status, body)``
scripts a path (``body`` JSON-able, bytes or str); ``hang(path)`` makes a path never answer
(released on ``stop``); unknown paths are 404.  Every request is recorded (method, path with
query, lower-cased headers) so tests can assert what was sent -- and that nothing was.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Any

import orjson
from twisted.internet import reactor
from twisted.internet.defer import Deferred
from twisted.web.resource import Resource
from twisted.web.server import NOT_DONE_YET, Site


@dataclass
class Seen:
    method: str
    path: str
    headers: dict[str, str]


class ScriptedUpstream(Resource):
    isLeaf = True

    def __init__(self) -> None:
        super().__init__()
        self.answers: dict[str, tuple[int, bytes]] = {}
        self.hanging: set[str] = set()
        self.requests: list[Seen] = []
        self._pending: list[Any] = []
        self._waiters: list[tuple[int, Deferred[None]]] = []
        self._port: Any = None

    @classmethod
    def start(cls) -> ScriptedUpstream:
        server = cls()
        server._port = reactor.listenTCP(0, Site(server), interface="127.0.0.1")
        return server

    @property
    def port(self) -> int:
        return int(self._port.getHost().port)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def answer(self, path: str, status: int = 200, body: Any = None) -> None:
        if isinstance(body, bytes):
            raw = body
        elif isinstance(body, str):
            raw = body.encode()
        else:
            raw = orjson.dumps(body)
        self.answers[path] = (status, raw)

    def hang(self, path: str) -> None:
        self.hanging.add(path)

    def render(self, request: Any) -> Any:
        path = request.uri.decode()
        headers = {k.decode().lower(): v[0].decode()
                   for k, v in request.requestHeaders.getAllRawHeaders()}
        self.requests.append(Seen(request.method.decode(), path, headers))
        for waiter in [w for w in self._waiters if w[0] <= len(self.requests)]:
            self._waiters.remove(waiter)
            waiter[1].callback(None)
        bare = path.split("?", 1)[0]
        if path in self.hanging or bare in self.hanging:
            self._pending.append(request)
            request.notifyFinish().addErrback(lambda _: None)
            return NOT_DONE_YET
        status, body = self.answers.get(path) or self.answers.get(bare) or (404, b"{}")
        request.setResponseCode(status)
        request.setHeader(b"content-type", b"application/json")
        return body

    def wait_for(self, count: int) -> Deferred[None]:
        """Fires once ``count`` requests have arrived (no sleeping in tests)."""
        waiter: Deferred[None] = Deferred()
        if len(self.requests) >= count:
            waiter.callback(None)
        else:
            self._waiters.append((count, waiter))
        return waiter

    def paths(self) -> list[str]:
        return [seen.path for seen in self.requests]

    def stop(self) -> Deferred[None]:
        for request in self._pending:
            if not request.finished and not getattr(request, "_disconnected", False):
                with contextlib.suppress(Exception):
                    request.finish()
        self._pending.clear()
        return self._port.stopListening()
