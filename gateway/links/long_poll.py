"""The origin's HTTP long-poll transport, kept for existing device programs (agents contract
§2.3): ``register``, ``heartbeat``, ``tasks/next`` (held up to 25 s on the reactor clock) and
``tasks/:id/result``.

It claims from the same queue as the WebSocket links with the same atomic claim, so a device
may mix transports and a task is still handed out once.  A poll is woken by the hub (a task
created or approved on any node) and by the 1 s re-check; a claim that lands after the poll
ended (timeout, client gone) is returned to the queue.
"""

from __future__ import annotations

from typing import Any

import orjson
from twisted.internet.defer import ensureDeferred
from twisted.logger import Logger
from twisted.web.resource import Resource
from twisted.web.server import NOT_DONE_YET

from gateway.links.device_auth import DeviceAuthError, authenticate
from gateway.links.hello import HelloError, parse_capacity, parse_hello
from gateway.links.hub import LinkHub
from gateway.links.results import ResultError
from gateway.links.tasks import ConnectorTasks
from gateway.links.views import device_view, dispatch_view
from gateway.store import connector_tasks as task_store
from gateway.store import devices as device_store
from gateway.store import sandbox_hosts as host_store
from gateway.store.connector_tasks import TaskRow
from gateway.store.devices import DeviceRow

log = Logger()

POLL_SECONDS = 25.0
BODY_LIMIT = 4 << 20
HOST_DISABLED = "Sandbox host is disabled"


class HttpError(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


def _body(request: Any) -> dict[str, Any]:
    content = request.content
    content.seek(0, 2)
    if content.tell() > BODY_LIMIT:
        raise HttpError(413, f"request body exceeds {BODY_LIMIT} bytes")
    content.seek(0)
    raw = content.read()
    if not raw.strip():
        return {}
    try:
        body = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise HttpError(400, f"malformed JSON: {exc.msg} at position {exc.pos}") from None
    if not isinstance(body, dict):
        raise HttpError(400, "request body must be a JSON object")
    return body


class LongPoll(Resource):
    isLeaf = True

    def __init__(self, hub: LinkHub, tasks: ConnectorTasks,
                 poll_seconds: float = POLL_SECONDS) -> None:
        super().__init__()
        self.hub = hub
        self.tasks = tasks
        self.poll_seconds = poll_seconds

    def render(self, request: Any) -> Any:
        d = ensureDeferred(self._route(request))
        d.addCallback(lambda payload: self._write(request, 200, payload))
        d.addErrback(self._failed, request)
        return NOT_DONE_YET

    def _write(self, request: Any, status: int, payload: Any) -> None:
        if request._disconnected or payload is _GONE:
            return
        request.setResponseCode(status)
        request.setHeader(b"content-type", b"application/json")
        request.setHeader(b"cache-control", b"no-store")
        request.write(orjson.dumps(payload))
        request.finish()

    def _failed(self, failure: Any, request: Any) -> None:
        if failure.check(HttpError):
            self._write(request, failure.value.status, {"error": failure.value.message})
        elif failure.check(DeviceAuthError):
            self._write(request, 401, {"error": str(failure.value)})
        else:
            log.failure("connector route {path} failed", failure, path=request.path)
            self._write(request, 500, {"error": "Internal server error"})

    async def _route(self, request: Any) -> Any:
        path = [segment.decode("utf-8", "replace") for segment in request.postpath
                if segment]
        method = request.method
        if method == b"POST" and path == ["register"]:
            return await self._report(request, register=True)
        if method == b"POST" and path == ["heartbeat"]:
            return await self._report(request, register=False)
        if method == b"GET" and path == ["tasks", "next"]:
            return await self._next(request)
        if method == b"POST" and len(path) == 3 and path[0] == "tasks" and path[2] == "result":
            return await self._result(request, path[1])
        raise HttpError(404, "Not found")

    async def _report(self, request: Any, *, register: bool) -> dict[str, Any]:
        device = await authenticate(self.hub.db, request)
        body = _body(request)
        try:
            fields = parse_hello(body)
            capacity = parse_capacity(body)
        except HelloError as exc:
            raise HttpError(400, str(exc)) from None
        now = self.hub.now()

        def report(conn: Any) -> DeviceRow:
            if capacity is not None and host_store.get_by_device(conn, device.id) is not None:
                host_store.record_capacity(conn, device.id, capacity, now)
            return device_store.report(conn, device, fields, now)

        updated = await self.hub.db.transaction(report)
        if register:
            return device_view(updated, now)
        return {"ok": True, "device_id": device.id}

    async def _next(self, request: Any) -> Any:
        device = await authenticate(self.hub.db, request)
        host = await self.hub.db.transaction(host_store.get_by_device, device.id)
        if host is not None and not host.enabled:
            raise HttpError(403, HOST_DISABLED)
        poll = _Poll(self, device)
        task = await poll.first()
        if task is not None:
            return {"task": dispatch_view(task)}
        return await poll.wait(request)

    async def _result(self, request: Any, task_id: str) -> dict[str, Any]:
        device = await authenticate(self.hub.db, request)
        try:
            task = await self.tasks.record_result(device, task_id, _body(request))
        except ResultError as exc:
            raise HttpError(400, str(exc)) from None
        if task is None:
            return {"ok": True, "ignored": True}
        return {"ok": True}


#: the poll's answer was already written (timeout) or the client left
_GONE = object()


class _Poll:
    """One waiting ``tasks/next``: claims when woken, answers ``{"task": null}`` at timeout."""

    def __init__(self, owner: LongPoll, device: DeviceRow) -> None:
        self.owner = owner
        self.hub = owner.hub
        self.device = device
        self.owner_id = None if device.mode == device_store.SANDBOXD else device.user_id
        self.done = False
        self.busy = False
        self.again = False
        self.request: Any = None
        self._remove: Any = None
        self._timer: Any = None

    async def first(self) -> TaskRow | None:
        return await self._claim()

    async def _claim(self) -> TaskRow | None:
        return await self.hub.db.transaction(
            task_store.claim_next, self.device.id, self.owner_id, task_store.HTTP_CLAIM,
            self.hub.now())

    async def wait(self, request: Any) -> Any:
        self.request = request
        self._remove = self.hub.add_poll(self.device.id, self.attempt)
        self._timer = self.hub.clock.callLater(self.owner.poll_seconds, self._answer, None)
        request.notifyFinish().addErrback(lambda _: self._end())
        return _GONE

    def _end(self) -> None:
        self.done = True
        if self._remove is not None:
            self._remove()
        if self._timer is not None and self._timer.active():
            self._timer.cancel()

    def _answer(self, task: TaskRow | None) -> None:
        if self.done:
            return
        self._end()
        self.owner._write(self.request, 200,
                          {"task": dispatch_view(task) if task is not None else None})

    def attempt(self) -> None:
        if self.done:
            return
        if self.busy:
            self.again = True
            return
        self.busy = True
        ensureDeferred(self._attempt()).addErrback(
            lambda f: log.failure("long poll claim failed", f))

    async def _attempt(self) -> None:
        try:
            while True:
                self.again = False
                task = await self._claim()
                if task is not None:
                    if self.done:
                        await self.hub.db.transaction(task_store.unclaim, task.id,
                                                      task_store.HTTP_CLAIM, self.hub.now())
                    else:
                        self._answer(task)
                    return
                if not self.again or self.done:
                    return
        finally:
            self.busy = False
