"""The WebSocket transport, agents contract §2.4 ([P-21]), on autobahn's Twisted client.

The token goes in the handshake (``X-Connector-Token``); ``hello`` is the first frame;
``welcome`` brings the heartbeat interval; frames are dispatched by ``type`` through a table.
A dead server is found without native pings of our own: the server answers every heartbeat
(``heartbeat_ack``), so a link that heard nothing for two heartbeat intervals is dropped (and
one that gets no ``welcome`` within two ping intervals of opening); each ping would cost the
server a frame in and a frame out per device. How the connection ended — an HTTP status
instead of the upgrade, or a close code — becomes the ``LinkOutcome``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

from autobahn.twisted.websocket import WebSocketClientFactory, WebSocketClientProtocol
from twisted.internet.defer import Deferred
from twisted.internet.endpoints import HostnameEndpoint, wrapClientTLS
from twisted.internet.interfaces import IReactorTime
from twisted.internet.ssl import optionsForClientTLS
from twisted.internet.task import LoopingCall
from twisted.logger import Logger

from connector.config import ConnectorConfig
from connector.link import (
    CLOSED,
    REVOKED,
    SUPERSEDED,
    UNAVAILABLE,
    UNSUPPORTED,
    LinkOutcome,
    LinkOwner,
)

log = Logger()

CLOSE_REVOKED = 4401
CLOSE_SUPERSEDED = 4409
MAX_FRAME_BYTES = 4 * 1024 * 1024
UPGRADE_FAILED = re.compile(r"upgrade failed \[(\d{3})\]")


def handshake_outcome(status: int) -> LinkOutcome:
    """An HTTP answer instead of ``101 Switching Protocols``."""
    detail = f"the server answered HTTP {status} instead of a WebSocket upgrade"
    if status == 401:
        return LinkOutcome(REVOKED, "the server refused the token (HTTP 401)")
    if status == 429 or status >= 500:
        return LinkOutcome(UNAVAILABLE, detail)
    return LinkOutcome(UNSUPPORTED, detail)


class DeviceLinkProtocol(WebSocketClientProtocol):
    """One connection: hello → welcome → tasks, results and heartbeats until it closes."""

    factory: DeviceLinkFactory

    def __init__(self) -> None:
        super().__init__()
        self.opened = False
        self.welcomed = False
        self._heartbeat: LoopingCall | None = None
        self._welcome_due: Any = None
        #: clock time of the last bytes from the server (any frame proves it alive)
        self._heard_at = 0.0
        self._handlers: dict[str, Callable[[dict[str, Any]], None]] = {
            "welcome": self._on_welcome,
            "task": self._on_task,
            "task_cancel": self._on_cancel,
            "task_result_ack": self._on_ack,
            "heartbeat_ack": lambda frame: None,
            "error": self._on_error,
        }

    # autobahn callbacks

    def dataReceived(self, data: bytes) -> None:
        self._heard_at = self.factory.clock.seconds()
        super().dataReceived(data)

    def onOpen(self) -> None:
        self.opened = True
        self.factory.current = self
        self._heard_at = self.factory.clock.seconds()
        self._welcome_due = self.factory.clock.callLater(
            2 * self.factory.ping_interval, self._silent, "no welcome")
        self._send_frame({"type": "hello", "protocol": 1, **self.factory.owner.hello_fields()})

    def onMessage(self, payload: bytes, isBinary: bool) -> None:
        try:
            frame = json.loads(payload.decode("utf-8"))
        except (UnicodeDecodeError, ValueError):
            log.warn("ignoring a frame that is not JSON")
            return
        if not isinstance(frame, dict):
            log.warn("ignoring a frame that is not a JSON object")
            return
        handler = self._handlers.get(str(frame.get("type")))
        if handler is None:
            log.warn("ignoring a frame of unknown type {type!r}", type=frame.get("type"))
            return
        handler(frame)

    def onClose(self, wasClean: bool, code: int | None, reason: str | None) -> None:
        if self._heartbeat is not None and self._heartbeat.running:
            self._heartbeat.stop()
        if self._welcome_due is not None and self._welcome_due.active():
            self._welcome_due.cancel()
        self.factory.connection_ended(self._outcome(code, reason or ""))

    # the Link the client sends through

    def send_output(self, task_id: str, seq: int, stream: str, data: str) -> None:
        self._send_frame(
            {"type": "task_output", "task_id": task_id, "seq": seq, "stream": stream, "data": data}
        )

    def send_result(self, task_id: str, fields: dict[str, Any]) -> None:
        self._send_frame({"type": "task_result", "task_id": task_id, **fields})

    def close(self) -> None:
        self.sendClose(1000)

    # frames from the server

    def _on_welcome(self, frame: dict[str, Any]) -> None:
        interval = frame.get("heartbeat_interval")
        seconds = float(interval) if isinstance(interval, int | float) and interval > 0 else 20.0
        self.welcomed = True
        if self._welcome_due is not None and self._welcome_due.active():
            self._welcome_due.cancel()
        self._heartbeat = LoopingCall(self._beat, seconds)
        self._heartbeat.clock = self.factory.clock
        self._heartbeat.start(seconds, now=False)
        self.factory.owner.link_up(self)

    def _beat(self, seconds: float) -> None:
        """Send a heartbeat, unless the last one (or more) went unanswered: the server answers
        each one, so two intervals without a byte from it mean it is gone."""
        if self.factory.clock.seconds() - self._heard_at >= 2 * seconds:
            self._silent(f"nothing from the server for {2 * seconds:g} s")
            return
        self._send_frame({"type": "heartbeat"})

    def _silent(self, why: str) -> None:
        log.warn("dropping the link: {why}", why=why)
        self.wasClean = False
        self.wasNotCleanReason = why
        self.dropConnection(abort=True)

    def _on_task(self, frame: dict[str, Any]) -> None:
        self.factory.owner.task_received(frame.get("task"))

    def _on_cancel(self, frame: dict[str, Any]) -> None:
        task_id = frame.get("task_id")
        if isinstance(task_id, str):
            self.factory.owner.task_cancelled(task_id, str(frame.get("reason") or "cancelled"))

    def _on_ack(self, frame: dict[str, Any]) -> None:
        task_id = frame.get("task_id")
        if isinstance(task_id, str):
            self.factory.owner.result_acked(task_id)

    def _on_error(self, frame: dict[str, Any]) -> None:
        log.warn("server reported a protocol error: {error}", error=frame.get("error"))

    def _send_frame(self, frame: dict[str, Any]) -> None:
        if self.state == WebSocketClientProtocol.STATE_OPEN:
            self.sendMessage(json.dumps(frame).encode("utf-8"))

    def _outcome(self, code: int | None, reason: str) -> LinkOutcome:
        if code == CLOSE_REVOKED:
            return LinkOutcome(REVOKED, f"closed by the server: {reason or 'token revoked'}", True)
        if code == CLOSE_SUPERSEDED:
            return LinkOutcome(SUPERSEDED, "another connection of this device took over", True)
        if not self.opened:
            status = UPGRADE_FAILED.search(reason)
            if status is not None:
                return handshake_outcome(int(status.group(1)))
            return LinkOutcome(UNAVAILABLE, reason or "the WebSocket handshake failed")
        return LinkOutcome(CLOSED, f"closed (code {code}): {reason}", self.welcomed)


class DeviceLinkFactory(WebSocketClientFactory):
    """Builds the one protocol of one connection attempt; ``ended`` fires with its outcome."""

    protocol = DeviceLinkProtocol  # type: ignore[assignment]

    def __init__(
        self, reactor: Any, clock: IReactorTime, config: ConnectorConfig, owner: LinkOwner
    ) -> None:
        super().__init__(
            url=config.ws_url, reactor=reactor, headers={"X-Connector-Token": config.token}
        )
        self.setProtocolOptions(
            # liveness comes from heartbeats and their acks (DeviceLinkProtocol._beat)
            autoPingInterval=0,
            maxMessagePayloadSize=MAX_FRAME_BYTES,
            maxFramePayloadSize=MAX_FRAME_BYTES,
            openHandshakeTimeout=30,
        )
        self.clock = clock
        self.ping_interval = config.ping_interval
        self.owner = owner
        self.current: DeviceLinkProtocol | None = None
        self.connecting: Deferred[Any] | None = None
        self.ended: Deferred[LinkOutcome] = Deferred()

    def abort(self) -> None:
        """Stop this attempt whatever its state: connecting, handshaking or open."""
        if self.connecting is not None and not self.connecting.called:
            self.connecting.cancel()
        elif self.current is not None:
            self.current.dropConnection(abort=True)

    def connection_ended(self, outcome: LinkOutcome) -> None:
        self.current = None
        if not self.ended.called:
            self.ended.callback(outcome)


def connect_websocket(
    reactor: Any, clock: IReactorTime, config: ConnectorConfig, owner: LinkOwner
) -> tuple[DeviceLinkFactory, Deferred[LinkOutcome]]:
    """Start one connection attempt; the Deferred fires with how it ended (never errbacks)."""
    factory = DeviceLinkFactory(reactor, clock, config, owner)
    parts = urlsplit(config.ws_url)
    host = parts.hostname or "localhost"
    secure = parts.scheme == "wss"
    port = parts.port or (443 if secure else 80)
    endpoint: Any = HostnameEndpoint(reactor, host, port, timeout=30)
    if secure:
        endpoint = wrapClientTLS(optionsForClientTLS(host), endpoint)

    def refused(failure: Any) -> None:
        factory.connection_ended(LinkOutcome(UNAVAILABLE, failure.getErrorMessage()))

    factory.connecting = endpoint.connect(factory)
    factory.connecting.addErrback(refused)
    return factory, factory.ended
