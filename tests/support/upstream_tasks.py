"""A fake async-task upstream (video / image-to-video / compatible tasks) on a loopback port.

Submissions (``POST``) create an upstream task ``up-<n>`` that follows a script of
``(seconds after submit, status)`` steps read against the test's ``Clock``, e.g. the default
``pending`` -> ``running`` after 10 s -> ``succeeded`` after 30 s.  ``next_scripts`` scripts the
next submissions one by one; ``submit_failures`` makes the next submissions answer 500;
``poll_failures`` makes the next status requests answer 502.  A terminal status is answered on
every later poll (duplicate terminal notices).  Status answers are held for one real reactor
turn, so ``max_in_flight`` shows how many polls a client keeps open at once.

Answer shapes: ``/v1/video/generations`` and ``/v1/videos/generations`` create answer
``{"id", "status"}``; ``/v1/videos/image2video`` answers the provider shape
``{"code": 0, "request_id": "req-..", "data": {"task_id", "task_status"}}`` (the top-level
``request_id`` is *not* the task id).  Status paths: ``/v1/video/generations/<id>``,
``/v1/videos/image2video/<id>``, ``/v1/tasks/<id>``, ``/v1/artjob/<id>`` plus any added to
``status_prefixes`` (artjob and ``/v1/images/generations`` tasks end with image URLs and
``buttons``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import orjson
from twisted.internet import reactor
from twisted.internet.defer import Deferred
from twisted.web.resource import Resource
from twisted.web.server import NOT_DONE_YET, Site

DEFAULT_SCRIPT: tuple[tuple[float, str], ...] = ((0, "pending"), (10, "running"),
                                                 (30, "succeeded"))
STATUS_PREFIXES = ("/v1/video/generations/", "/v1/videos/image2video/", "/v1/tasks/",
                   "/v1/artjob/")
TERMINAL = ("succeeded", "failed", "cancelled")


@dataclass
class UpstreamTask:
    """One upstream job and the script its status follows (offsets from submission)."""

    id: str
    path: str
    body: dict[str, Any]
    submitted_at: float
    script: tuple[tuple[float, str], ...]
    polls: int = 0

    def status(self, now: float) -> str:
        current = self.script[0][1]
        for offset, status in self.script:
            if now - self.submitted_at >= offset:
                current = status
        return current


@dataclass
class Seen:
    """One request as the fake received it."""

    method: str
    path: str
    headers: dict[str, str]
    body: Any = field(default=None)


class FakeTaskUpstream(Resource):
    """The loopback task upstream (see the module docstring)."""

    isLeaf = True

    def __init__(self, clock: Any) -> None:
        super().__init__()
        self.clock = clock
        self.tasks: dict[str, UpstreamTask] = {}
        self.requests: list[Seen] = []
        self.next_scripts: list[tuple[tuple[float, str], ...]] = []
        self.default_script = DEFAULT_SCRIPT
        #: status path prefixes answered (a test with a custom upstream prefix adds its own)
        self.status_prefixes: list[str] = list(STATUS_PREFIXES)
        self.submit_failures = 0
        self.poll_failures = 0
        self.in_flight = 0
        self.max_in_flight = 0
        self._port: Any = None
        self._counter = 0
        self._held: list[Any] = []

    @classmethod
    def start(cls, clock: Any) -> FakeTaskUpstream:
        server = cls(clock)
        server._port = reactor.listenTCP(0, Site(server), interface="127.0.0.1")
        return server

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._port.getHost().port}"

    def stop(self) -> Deferred[None]:
        return self._port.stopListening()  # type: ignore[no-any-return]

    @property
    def submits(self) -> list[Seen]:
        return [r for r in self.requests if r.method == "POST"]

    @property
    def polls(self) -> list[Seen]:
        return [r for r in self.requests if r.method == "GET"]

    # --- serving ----------------------------------------------------------------------------

    def render(self, request: Any) -> Any:
        path = request.path.decode()
        headers = {k.decode().lower(): v[0].decode()
                   for k, v in request.requestHeaders.getAllRawHeaders()}
        raw = request.content.read()
        body = orjson.loads(raw) if raw else None
        self.requests.append(Seen(request.method.decode(), path, headers, body))
        request.setHeader(b"content-type", b"application/json")
        if request.method == b"POST":
            return self._submit(request, path, body or {})
        if request.method == b"GET":
            return self._status(request, path)
        request.setResponseCode(405)
        return b"{}"

    def _submit(self, request: Any, path: str, body: dict[str, Any]) -> bytes:
        if self.submit_failures:
            self.submit_failures -= 1
            request.setResponseCode(500)
            return b'{"error": {"message": "upstream exploded"}}'
        self._counter += 1
        uid = f"up-{self._counter}"
        script = self.next_scripts.pop(0) if self.next_scripts else self.default_script
        task = UpstreamTask(uid, path, body, self.clock.seconds(), script)
        self.tasks[uid] = task
        status = task.status(self.clock.seconds())
        if path == "/v1/videos/image2video":
            return orjson.dumps({"code": 0, "request_id": f"req-{self._counter}",
                                 "data": {"task_id": uid, "task_status": status}})
        return orjson.dumps({"id": uid, "status": status})

    def _status(self, request: Any, path: str) -> Any:
        prefix = next((p for p in self.status_prefixes if path.startswith(p)), None)
        task = self.tasks.get(path[len(prefix):]) if prefix else None
        if task is None:
            request.setResponseCode(404)
            return b'{"error": {"message": "no such task"}}'
        if self.poll_failures:
            self.poll_failures -= 1
            request.setResponseCode(502)
            return b"{}"
        task.polls += 1
        status = task.status(self.clock.seconds())
        answer: dict[str, Any] = {"id": task.id, "status": status}
        if status == "succeeded" and task.path.startswith(("/v1/artjob/", "/v1/images/")):
            answer["data"] = [{"url": f"https://cdn.example/{task.id}.png"}]
            answer["buttons"] = [{"label": "U1"}]
        elif status == "succeeded":
            answer["data"] = [{"url": f"https://cdn.example/{task.id}.mp4"}]
        elif status in ("failed", "fail", "error"):
            answer["error"] = {"message": "generation failed"}
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        self._held.append(request)
        reactor.callLater(0.001, self._release, request, orjson.dumps(answer))
        return NOT_DONE_YET

    def _release(self, request: Any, body: bytes) -> None:
        self.in_flight -= 1
        self._held.remove(request)
        if not request.finished and not getattr(request, "_disconnected", False):
            request.write(body)
            request.finish()
