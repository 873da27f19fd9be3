"""The long-poll transport, agents contract §2.3: what the origin's device binaries speak, and
the fallback when a server has no WebSocket endpoint.

register → (heartbeat every 20 s) → ``GET tasks/next`` (the server holds it ≤ 25 s) → run →
``POST tasks/:id/result``. A result counts as acknowledged when the POST answers 2xx (the
server ignores repeats), so unacknowledged results are posted again before the next poll.
There is no live output over HTTP; the final result carries it.
"""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import quote

import treq
from treq.client import HTTPClient
from twisted.internet.defer import CancelledError, Deferred
from twisted.internet.interfaces import IReactorTime
from twisted.internet.task import LoopingCall
from twisted.logger import Logger

from connector.config import ConnectorConfig
from connector.link import CLOSED, REVOKED, UNAVAILABLE, LinkOutcome, LinkOwner

log = Logger()

HEARTBEAT_SECONDS = 20.0
REQUEST_TIMEOUT = 30.0


class _Refused(Exception):
    def __init__(self, outcome: LinkOutcome) -> None:
        super().__init__(outcome.detail)
        self.outcome = outcome


class LongPollLink:
    """One long-poll session; ``run()`` returns how it ended."""

    def __init__(
        self,
        http: HTTPClient,
        clock: IReactorTime,
        config: ConnectorConfig,
        owner: LinkOwner,
        pending: dict[str, dict[str, Any]],
    ) -> None:
        self._http = http
        self._clock = clock
        self._config = config
        self._owner = owner
        self._pending = pending
        self._stopping = False
        self._in_flight: set[Deferred[Any]] = set()
        self._slot_waiter: Deferred[None] | None = None
        self._posting: set[str] = set()

    async def run(self) -> LinkOutcome:
        heartbeat = LoopingCall(self._heartbeat)
        heartbeat.clock = self._clock
        try:
            await self._call("POST", "register", self._owner.hello_fields())
            self._owner.link_up(self)
            heartbeat.start(HEARTBEAT_SECONDS, now=False).addErrback(lambda _f: None)
            while not self._stopping:
                await self._flush_results()
                if not self._owner.has_slot():
                    self._slot_waiter = Deferred()
                    await self._slot_waiter
                    continue
                answer = await self._call("GET", "tasks/next", None, self._config.poll_timeout)
                task = answer.get("task") if isinstance(answer, dict) else None
                if task is not None:
                    self._owner.task_received(task)
            return LinkOutcome(CLOSED, "stopped", True)
        except _Refused as refused:
            return refused.outcome
        except CancelledError:
            return LinkOutcome(CLOSED, "stopped", True)
        finally:
            if heartbeat.running:
                heartbeat.stop()

    def slot_freed(self) -> None:
        waiter, self._slot_waiter = self._slot_waiter, None
        if waiter is not None and not waiter.called:
            waiter.callback(None)

    # Link

    def send_output(self, task_id: str, seq: int, stream: str, data: str) -> None:
        """HTTP has no live output channel; the final result carries the output."""

    def send_result(self, task_id: str, fields: dict[str, Any]) -> None:
        d = Deferred.fromCoroutine(self._post_result(task_id, fields))
        d.addErrback(lambda _f: None)  # stays pending; the poll loop posts it again

    def close(self) -> None:
        self._stopping = True
        self.slot_freed()
        for request in list(self._in_flight):
            request.cancel()

    # HTTP

    async def _flush_results(self) -> None:
        for task_id, fields in list(self._pending.items()):
            await self._post_result(task_id, fields)

    async def _post_result(self, task_id: str, fields: dict[str, Any]) -> None:
        if task_id in self._posting:
            return
        self._posting.add(task_id)
        try:
            await self._call("POST", f"tasks/{quote(task_id, safe='')}/result", fields)
        finally:
            self._posting.discard(task_id)
        self._owner.result_acked(task_id)

    async def _heartbeat(self) -> None:
        try:
            await self._call("POST", "heartbeat", self._owner.hello_fields())
        except _Refused as refused:
            if refused.outcome.kind == REVOKED:
                self.close()
            log.warn("heartbeat failed: {detail}", detail=refused.outcome.detail)

    async def _call(
        self, method: str, path: str, body: dict[str, Any] | None, timeout: float = REQUEST_TIMEOUT
    ) -> Any:
        """One request; 2xx → the JSON answer, 401 → revoked, anything else → unavailable."""
        headers: dict[bytes | str, list[bytes | str]] = {
            "X-Connector-Token": [self._config.token]
        }
        data = None
        if body is not None:
            headers["Content-Type"] = ["application/json"]
            data = json.dumps(body).encode("utf-8")
        request = self._http.request(
            method, self._config.api_url(path), headers=headers, data=data
        )
        timer = self._clock.callLater(timeout + 5, request.cancel)
        self._in_flight.add(request)
        try:
            response = await request
            content = await treq.content(response)
        except CancelledError:
            if self._stopping:
                raise
            raise _Refused(LinkOutcome(UNAVAILABLE, f"{method} {path} timed out")) from None
        except Exception as exc:
            raise _Refused(LinkOutcome(UNAVAILABLE, f"{method} {path}: {exc}")) from exc
        finally:
            self._in_flight.discard(request)
            if timer.active():
                timer.cancel()
        if response.code == 401:
            detail = f"the server refused the token (HTTP 401 on {path})"
            raise _Refused(LinkOutcome(REVOKED, detail))
        if not 200 <= response.code < 300:
            raise _Refused(LinkOutcome(UNAVAILABLE, f"{method} {path} answered {response.code}"))
        try:
            return json.loads(content.decode("utf-8")) if content else {}
        except ValueError as exc:
            raise _Refused(LinkOutcome(UNAVAILABLE, f"{path} answered non-JSON")) from exc
