"""The device program's core: keep one link to Lockgate up, run what it dispatches, and make
sure every result arrives exactly once.

``ConnectorClient`` owns the task bookkeeping that outlives a connection: results wait in
``pending`` until the server acknowledges them (``task_result_ack``, or a 2xx on the HTTP
result route) and are sent again after every reconnect; a repeated dispatch of a task that is
running or already answered is not run twice. It picks the transport (WebSocket; long-poll
when the server has none), reconnects with exponential back-off and jitter on its ``clock``,
and stops for good when the token is refused (401 / close 4401) or another connection of the
same device took over (close 4409).

``run(reactor, config)`` is the whole program for in-process use (``build_client`` when the
caller wants the client to stop it); ``connector.main`` wraps it for the command line.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from treq.client import HTTPClient
from twisted.internet.defer import Deferred
from twisted.internet.interfaces import IDelayedCall, IReactorTime
from twisted.logger import Logger
from twisted.web.client import Agent, HTTPConnectionPool

from connector.actions.outcome import ActionResult
from connector.backoff import Backoff
from connector.config import ConnectorConfig
from connector.hello import device_fields
from connector.isolation.docker import probe_docker
from connector.link import REVOKED, SUPERSEDED, UNSUPPORTED, Link, LinkOutcome
from connector.link_poll import LongPollLink
from connector.link_ws import DeviceLinkFactory, connect_websocket
from connector.tasks import TaskRunner

log = Logger()

WEBSOCKET = "websocket"
LONGPOLL = "longpoll"


@dataclass(frozen=True)
class StopReason:
    """Why the client stopped: ``revoked``, ``superseded`` or ``stopped`` (asked to)."""

    kind: str
    detail: str


class ConnectorClient:
    """A device's link loop and task bookkeeping (see the module docstring)."""

    def __init__(
        self,
        reactor: Any,
        config: ConnectorConfig,
        *,
        clock: IReactorTime | None = None,
        uniform: Callable[[float, float], float] = random.uniform,
        runner: TaskRunner | None = None,
        http: HTTPClient | None = None,
    ) -> None:
        self.reactor = reactor
        self.config = config
        self.clock: IReactorTime = clock if clock is not None else reactor
        self.http = http or HTTPClient(Agent(reactor, pool=HTTPConnectionPool(reactor)))
        self.runner = runner or TaskRunner(reactor, config, self.http)
        self.backoff = Backoff(config.backoff_initial, config.backoff_max, uniform)
        self.transport = LONGPOLL if config.transport == LONGPOLL else WEBSOCKET
        self.pending: dict[str, dict[str, Any]] = {}
        self.active: set[str] = set()
        self.attempts = 0
        self.link: Link | None = None
        self.last_outcome: LinkOutcome | None = None
        self.done: Deferred[StopReason] = Deferred()
        self._cancelled: set[str] = set()
        self._seq: dict[str, int] = {}
        self._retry: IDelayedCall | None = None
        self._ws: DeviceLinkFactory | None = None
        self._poll: LongPollLink | None = None
        self._stopped = False

    # lifecycle

    def start(self) -> Deferred[StopReason]:
        self._connect()
        return self.done

    def stop(self, reason: str = "stopped") -> None:
        """Stop for good: no reconnect, running tasks killed, ``done`` fires."""
        self._finish(StopReason("stopped", reason))

    def _finish(self, reason: StopReason) -> None:
        if self._stopped:
            return
        self._stopped = True
        if self._retry is not None and self._retry.active():
            self._retry.cancel()
        self.runner.cancel_all("connector stopped")
        link, self.link = self.link, None
        if link is not None:
            link.close()
        elif self._ws is not None:
            self._ws.abort()
        if self._poll is not None:
            self._poll.close()
        log.info("connector stopped ({kind}): {detail}", kind=reason.kind, detail=reason.detail)
        self.done.callback(reason)

    def _connect(self) -> None:
        self._retry = None
        if self._stopped:
            return
        self.attempts += 1
        if self.transport == WEBSOCKET:
            self._ws, ended = connect_websocket(self.reactor, self.clock, self.config, self)
        else:
            self._poll = LongPollLink(self.http, self.clock, self.config, self, self.pending)
            ended = Deferred.fromCoroutine(self._poll.run())
        ended.addCallback(self._link_ended)
        ended.addErrback(lambda failure: log.failure("link failed", failure))

    def _link_ended(self, outcome: LinkOutcome) -> None:
        self.link = None
        self._ws = None
        self._poll = None
        self.last_outcome = outcome
        if self._stopped:
            return
        if outcome.kind in (REVOKED, SUPERSEDED):
            self._finish(StopReason(outcome.kind, outcome.detail))
            return
        if outcome.kind == UNSUPPORTED and self.config.transport == "auto":
            log.info("{detail}: falling back to long-poll", detail=outcome.detail)
            self.transport = LONGPOLL
            self._connect()
            return
        delay = self.backoff.next_delay()
        log.info(
            "link down ({detail}); reconnecting in {delay:.1f}s", detail=outcome.detail, delay=delay
        )
        self._retry = self.clock.callLater(delay, self._connect)

    # LinkOwner: what the transports report

    def hello_fields(self) -> dict[str, Any]:
        return device_fields(self.config, self.runner.capabilities)

    def link_up(self, link: Link) -> None:
        self.backoff.reset()
        self.link = link
        log.info("linked over {transport}", transport=self.transport)
        for task_id, fields in list(self.pending.items()):
            link.send_result(task_id, fields)

    def has_slot(self) -> bool:
        return len(self.active) < self.config.max_parallel

    def task_received(self, task: Any) -> None:
        if not isinstance(task, dict) or not isinstance(task.get("id"), str) or not task["id"]:
            log.warn("ignoring a task without an id")
            return
        task_id: str = task["id"]
        if task_id in self.pending:
            if self.link is not None:
                self.link.send_result(task_id, self.pending[task_id])
            return
        if task_id in self.active:
            return
        self.active.add(task_id)
        self._seq[task_id] = 0
        log.info("task {id}: {action}", id=task_id, action=task.get("action"))

        def output(stream: str, data: str) -> None:
            self._seq[task_id] += 1
            if self.link is not None:
                self.link.send_output(task_id, self._seq[task_id], stream, data)

        self.runner.start(task, output).addCallback(self._task_done, task_id)

    def task_cancelled(self, task_id: str, reason: str) -> None:
        if task_id in self.active:
            self._cancelled.add(task_id)
            self.runner.cancel(task_id, f"cancelled: {reason}")

    def result_acked(self, task_id: str) -> None:
        self.pending.pop(task_id, None)

    def _task_done(self, result: ActionResult, task_id: str) -> None:
        self.active.discard(task_id)
        self._seq.pop(task_id, None)
        if task_id in self._cancelled:
            self._cancelled.discard(task_id)
        elif not self._stopped:
            fields = result.wire_fields()
            self.pending[task_id] = fields
            if self.link is not None:
                self.link.send_result(task_id, fields)
        if self._poll is not None:
            self._poll.slot_freed()


async def build_client(
    reactor: Any, config: ConnectorConfig, http: HTTPClient | None = None
) -> ConnectorClient:
    """A client for ``config``; a sandbox host first probes for a Docker daemon."""
    http = http or HTTPClient(Agent(reactor, pool=HTTPConnectionPool(reactor)))
    docker = None
    if config.sandboxd:
        docker = await probe_docker(reactor, config.docker_path)
        log.info("docker daemon: {state}", state="available" if docker else "not available")
    runner = TaskRunner(reactor, config, http, docker)
    return ConnectorClient(reactor, config, runner=runner, http=http)


async def run(reactor: Any, config: ConnectorConfig) -> StopReason:
    """The whole program: link and serve until the token is refused, superseded or shutdown."""
    client = await build_client(reactor, config)
    trigger = reactor.addSystemEventTrigger("before", "shutdown", client.stop, "shutting down")
    try:
        return await client.start()
    finally:
        reactor.removeSystemEventTrigger(trigger)
