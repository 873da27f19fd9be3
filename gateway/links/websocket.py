"""The WebSocket link of a connector device or sandbox host (agents contract §2.4, [P-21]).

One ``DeviceLink`` per connection, built for a device that already proved its token in the
HTTP handshake (``endpoint.LinkEndpoint``).  Frames are UTF-8 JSON objects with a ``type``;
they are handled one at a time, in order (a result is never overtaken by the next frame).
Bad frames get an ``error`` frame and change nothing; the connection stays.  Autobahn enforces
the 1 MiB frame and message cap (close 1009); native pings go only to links that went quiet
(``liveness.LivenessSweep``, one timer for the node instead of autobahn's two per link).  The
common case -- one complete small text frame while autobahn is between frames, and every frame
sent -- is read and built here (``frames``) and written with one ``send()`` when nothing is
buffered (``socket_write``): an idle link's heartbeat and ack never enter autobahn's Python.

Dispatch claims a task (``queued -> running``, atomic across nodes and transports) before the
``task`` frame is written; a frame that cannot be written returns the task to the queue.  At
most ``max_parallel`` tasks are in flight, ``terminal_*`` actions aside.
"""

from __future__ import annotations

from typing import Any

import orjson
from autobahn.twisted.websocket import WebSocketServerFactory, WebSocketServerProtocol
from twisted.internet.defer import Deferred, ensureDeferred, succeed
from twisted.logger import Logger

from gateway.links.claim_batch import Claim, TaskClaims
from gateway.links.frames import MAX_FAST_PAYLOAD, read_text_frame, text_frame
from gateway.links.hello import HelloError, parse_capacity, parse_hello, parse_max_parallel
from gateway.links.hello_batch import HelloRegistrations, Registration
from gateway.links.hub import CLOSE_PROTOCOL, CLOSE_REVOKED, LinkHub
from gateway.links.results import ResultError
from gateway.links.socket_write import write_now
from gateway.links.tasks import ConnectorTasks
from gateway.links.views import device_view, dispatch_view, rfc3339
from gateway.store import connector_tasks as task_store
from gateway.store import devices as device_store
from gateway.store.connector_tasks import TaskRow
from gateway.store.devices import DeviceRow

log = Logger()

MAX_FRAME = 1 << 20
#: frames read without autobahn are always within its caps (so none escapes them)
assert MAX_FAST_PAYLOAD < MAX_FRAME
HELLO_SECONDS = 10.0
HEARTBEAT_INTERVAL = 20
#: live output forwarded per task (the rest is dropped, §2.4)
OUTPUT_CAP = 64 * 1024
STREAMS = frozenset({"stdout", "stderr", "log"})
TERMINAL_PREFIX = "terminal_"
TERMINAL_ACTIONS = frozenset({"terminal_open", "terminal_input", "terminal_read",
                              "terminal_resize", "terminal_close"})


class DeviceLink(WebSocketServerProtocol):
    #: copied onto each connection by autobahn from the factory's protocol options
    autoFragmentSize: int
    maxMessagePayloadSize: int
    logFrames: bool

    def __init__(self, hub: LinkHub, tasks: ConnectorTasks, device: DeviceRow,
                 registrations: HelloRegistrations) -> None:
        super().__init__()
        self.hub = hub
        self.tasks = tasks
        self.registrations = registrations
        self.device = device
        self.device_id = device.id
        self.link_id = hub.new_link_id()
        self.max_parallel = 1
        self.said_hello = False
        self.gone = False
        #: tasks handed over on this link and not finished yet
        self.in_flight: dict[str, TaskRow] = {}
        self._output_sent: dict[str, int] = {}
        self._frames: Deferred[None] = succeed(None)
        #: frames chained on ``_frames`` and not handled yet
        self._frames_queued = 0
        self._hello_timer: Any = None
        self._pumping = False
        self._pump_again = False
        #: wakes received (a claim that finds nothing proves the queue empty only if none came
        #: in while it ran)
        self._wakes = 0
        #: the last full claim found nothing and no wake came since: a freed slot needs no
        #: claim, and a task created on this node may be handed over directly
        self._queue_empty = False
        #: slots promised to tasks being created on this node (``reserve``)
        self._reserved = 0
        #: liveness (``liveness.Watched``): last receipt, outstanding native ping
        self.heard_at = hub.clock.seconds()
        self.pinged_at: float | None = None

    # --- connection --------------------------------------------------------------------------

    def onOpen(self) -> None:
        self._hello_timer = self.hub.clock.callLater(HELLO_SECONDS, self._hello_overdue)

    def _hello_overdue(self) -> None:
        if not self.said_hello:
            self.close_link(CLOSE_PROTOCOL, "hello required")

    def onClose(self, wasClean: bool, code: int | None, reason: str | None) -> None:
        self.gone = True
        if self._hello_timer is not None and self._hello_timer.active():
            self._hello_timer.cancel()
        self.hub.detach(self)
        if self.said_hello:
            self._closed_in_db()

    def _closed_in_db(self) -> None:
        ensureDeferred(self.hub.link_closed(self.device_id, self.link_id)).addErrback(
            lambda f: log.failure("closing link {link} failed", f, link=self.link_id))

    def dataReceived(self, data: bytes) -> None:
        # any bytes prove the peer alive (no ping needed).  Complete small text frames read
        # while autobahn is between frames go straight to ``onMessage`` (``frames``: the idle
        # heartbeat and most results); the first anything else, and all after it, go to
        # autobahn's parser -- without the base class's per-read debug record (its arguments
        # are formatted even when nothing logs them)
        self.heard_at = self.hub.clock.seconds()
        self.pinged_at = None
        start = 0
        while self._between_frames():
            frame = read_text_frame(data, start)
            if frame is None:
                break
            payload, end = frame
            self.trafficStats.incomingOctetsWireLevel += end - start
            start = end
            self.onMessage(payload, False)
            if start == len(data):
                return
        self._dataReceived(data[start:] if start else data)

    def _between_frames(self) -> bool:
        """Autobahn holds no part of a frame or message and would read the next frame with
        nothing negotiated or logged that changes how (so reading it here is the same)."""
        return (self.state == WebSocketServerProtocol.STATE_OPEN and not self.data
                and self.current_frame is None and not self.inside_message
                and self._perMessageCompress is None and not self.logFrames
                and not self.logOctets and not self.trackedTimings)

    def sendData(self, data: bytes, sync: bool = False, chopsize: int | None = None) -> None:
        # an open link's frame goes straight to the transport, without the base class's
        # per-write debug record (formatted even when nothing logs it); anything unusual
        # (queued or chopped writes, octet logging, the handshake) takes the base path
        transport = self.transport
        if (sync or chopsize or self.send_queue or getattr(self, "logOctets", False)
                or transport is None or self.state != WebSocketServerProtocol.STATE_OPEN):
            super().sendData(data, sync, chopsize)
            return
        write_now(transport, data)
        self.trafficStats.outgoingOctetsWireLevel += len(data)

    def ping(self) -> None:
        if not self.gone and self.state == WebSocketServerProtocol.STATE_OPEN:
            self.sendPing()

    def drop(self) -> None:
        """The peer stopped answering pings: drop the socket (``onClose`` does the rest)."""
        if not self.gone:
            self.wasClean = False
            self.wasNotCleanReason = "no answer to a native ping"
            self.dropConnection(abort=True)

    def close_link(self, code: int, reason: str) -> None:
        if not self.gone:
            self.sendClose(code, reason)

    def send(self, frame: dict[str, Any]) -> bool:
        if self.gone or self.state != WebSocketServerProtocol.STATE_OPEN:
            return False
        payload = orjson.dumps(frame)
        if (self._perMessageCompress is None and not self.autoFragmentSize
                and self.send_state == WebSocketServerProtocol.SEND_STATE_GROUND
                and len(payload) <= self.maxMessagePayloadSize and not self.logFrames
                and not self.trackedTimings):
            # the frame autobahn would build (one unmasked text frame), without its
            # per-message Python
            self.sendData(text_frame(payload))
        else:
            self.sendMessage(payload, isBinary=False)
        return True

    def send_error(self, message: str) -> None:
        self.send({"type": "error", "error": message})

    # --- frames ------------------------------------------------------------------------------

    def onMessage(self, payload: bytes, isBinary: bool) -> None:
        if isBinary:
            self.send_error("frames must be UTF-8 JSON text")
            return
        try:
            frame = orjson.loads(payload)
        except orjson.JSONDecodeError as exc:
            self.send_error(f"invalid JSON: {exc.msg}")
            return
        if not isinstance(frame, dict) or not isinstance(frame.get("type"), str):
            self.send_error("a frame must be a JSON object with a string type")
            return
        kind = frame["type"]
        handler = HANDLERS.get(kind)
        if handler is None:
            self.send_error(f"unknown frame type: {kind[:64]}")
            return
        if not self.said_hello and kind != "hello":
            self.send_error(f"hello required before {kind}")
            return
        if kind == "heartbeat" and len(frame) == 1 and not self._frames_queued:
            # the idle link's one frame: nothing to write, nothing ahead of it to wait for
            self.send({"type": "heartbeat_ack", "server_time": rfc3339(self.hub.now())})
            return
        self._frames_queued += 1
        self._frames.addCallback(lambda _: ensureDeferred(handler(self, frame)))
        self._frames.addErrback(self._frame_failed)
        self._frames.addBoth(self._frame_done)

    def _frame_done(self, _: object) -> None:
        self._frames_queued -= 1

    def _frame_failed(self, failure: Any) -> None:
        log.failure("link frame failed on {link}", failure, link=self.link_id)
        self.send_error("internal error handling the frame")

    async def on_hello(self, frame: dict[str, Any]) -> None:
        if self.said_hello:
            self.send_error("hello was already received")
            return
        try:
            fields = parse_hello(frame)
            max_parallel = parse_max_parallel(frame)
            capacity = parse_capacity(frame)
        except HelloError as exc:
            self.send_error(str(exc))
            return
        if frame.get("protocol", 1) != 1:
            self.send_error("unsupported protocol version (this server speaks 1)")
            return
        # the hello came in time: a slow database (thousands of links saying hello at once)
        # must not turn into "hello required"
        if self._hello_timer is not None and self._hello_timer.active():
            self._hello_timer.cancel()
        now = self.hub.now()
        # many links saying hello together share a transaction (group commit)
        outcome = await self.registrations.register(Registration(
            device_id=self.device_id, token_hash=self.device.token_hash, fields=fields,
            capacity=capacity, max_parallel=max_parallel, link_id=self.link_id, now=now))
        if isinstance(outcome, str):
            self.close_link(CLOSE_REVOKED, outcome)
            return
        self.device = outcome
        self.max_parallel = max_parallel
        self.said_hello = True
        if self.gone:
            self._closed_in_db()
            return
        self.send({"type": "welcome", "device": device_view(outcome, now),
                   "heartbeat_interval": HEARTBEAT_INTERVAL, "server_time": rfc3339(now)})
        self.hub.attach(self)

    async def on_heartbeat(self, frame: dict[str, Any]) -> None:
        try:
            fields = parse_hello(frame)
        except HelloError as exc:
            self.send_error(str(exc))
            return
        now = self.hub.now()
        if fields:
            self.device = await self.hub.db.transaction(device_store.report, self.device,
                                                        fields, now, link_id=self.link_id)
        self.send({"type": "heartbeat_ack", "server_time": rfc3339(now)})

    async def on_task_output(self, frame: dict[str, Any]) -> None:
        task = self.in_flight.get(str(frame.get("task_id")))
        if task is None:
            self.send_error("task_output for a task not running on this link")
            return
        seq, stream, data = frame.get("seq"), frame.get("stream"), frame.get("data")
        if isinstance(seq, bool) or not isinstance(seq, int) or seq < 1:
            self.send_error("task_output seq must be a positive integer")
            return
        if stream not in STREAMS or not isinstance(data, str):
            self.send_error("task_output needs stream stdout|stderr|log and text data")
            return
        if not task.run_id:
            return
        sent = self._output_sent.get(task.id, 0)
        if sent > OUTPUT_CAP:
            return
        event: dict[str, Any] = {"task_id": task.id, "tool_call_id": task.tool_call_id,
                                 "stream": stream}
        encoded = data.encode("utf-8")
        if sent + len(encoded) <= OUTPUT_CAP:
            self._output_sent[task.id] = sent + len(encoded)
            self.hub.output(task, {**event, "delta": data})
            return
        room = OUTPUT_CAP - sent
        if room > 0:
            self.hub.output(task, {**event, "delta": encoded[:room].decode("utf-8", "ignore")})
        self._output_sent[task.id] = OUTPUT_CAP + 1
        self.hub.output(task, {**event, "delta": "", "truncated": True})

    async def on_task_result(self, frame: dict[str, Any]) -> None:
        task_id = frame.get("task_id")
        if not isinstance(task_id, str) or not task_id:
            self.send_error("task_result needs a task_id")
            return
        try:
            task = await self.tasks.record_result(self.device, task_id, frame)
        except ResultError as exc:
            self.send_error(f"task_result: {exc}")
            return
        self.in_flight.pop(task_id, None)
        self._output_sent.pop(task_id, None)
        if task is None:
            self.send({"type": "task_result_ack", "task_id": task_id, "ok": True,
                       "ignored": True, "error": "task is not running on this device"})
        else:
            self.send({"type": "task_result_ack", "task_id": task_id, "ok": True})
        self.refill()

    # --- dispatch ----------------------------------------------------------------------------

    def pump(self) -> None:
        """Queued tasks may exist for the device: claim them while the link has room."""
        self._wakes += 1
        self._queue_empty = False
        self._start_pump()

    def refill(self) -> None:
        """A slot freed up: claim the next queued task unless the queue is known empty."""
        if not self._queue_empty:
            self._start_pump()

    def _start_pump(self) -> None:
        if not self.said_hello or self.gone:
            return
        if self._pumping:
            self._pump_again = True
            return
        self._pumping = True
        ensureDeferred(self._pump()).addErrback(
            lambda f: log.failure("dispatch on {link} failed", f, link=self.link_id))

    def _busy(self) -> int:
        return self._reserved + sum(1 for task in self.in_flight.values()
                                    if not task.action.startswith(TERMINAL_PREFIX))

    def _has_room(self, action: str) -> bool:
        return action.startswith(TERMINAL_PREFIX) or self._busy() < self.max_parallel

    async def _pump(self) -> None:
        owner = None if self.device.mode == device_store.SANDBOXD else self.device.user_id
        try:
            while True:
                self._pump_again = False
                while not self.gone:
                    full = self._busy() >= self.max_parallel
                    wakes = self._wakes
                    # links claiming at once (a mass reconnect) share transactions
                    task = await self.factory.claims.claim(Claim(
                        self.device_id, owner, self.link_id, self.hub.now(),
                        TERMINAL_ACTIONS if full else None))
                    if task is None:
                        if not full and wakes == self._wakes:
                            self._queue_empty = True
                        break
                    if not self._hand_over(task):
                        break
                if not self._pump_again or self.gone:
                    break
        finally:
            self._pumping = False

    def _hand_over(self, task: TaskRow) -> bool:
        """Write the ``task`` frame of a task claimed for this link; a frame that cannot be
        written gives the task back to the queue."""
        self.in_flight[task.id] = task
        if self.send({"type": "task", "task": dispatch_view(task)}):
            return True
        self.in_flight.pop(task.id, None)
        ensureDeferred(self._give_back(task)).addErrback(
            lambda f: log.failure("returning task {task} failed", f, task=task.id))
        return False

    async def _give_back(self, task: TaskRow) -> None:
        returned = await self.hub.db.transaction(task_store.unclaim, task.id, self.link_id,
                                                 self.hub.now())
        if returned and self.gone:
            self.hub.wake(task.device_id)

    # --- direct dispatch from the creating node ----------------------------------------------

    def reserve(self, action: str, user_id: int) -> bool:
        """Promise a slot to a task this node is creating for the device, so the creating
        transaction can claim it for this link at once (no queue round trip).  Only when
        nothing is queued ahead of it (``created_at`` order), the link has room and the device
        may run the task at all (a user device runs only its owner's tasks)."""
        if (not self.said_hello or self.gone or self._pumping or not self._queue_empty
                or not self._has_room(action)):
            return False
        if self.device.mode != device_store.SANDBOXD and user_id != self.device.user_id:
            return False
        if not action.startswith(TERMINAL_PREFIX):
            self._reserved += 1
        return True

    def release(self, action: str) -> None:
        """The reserved task was not created (its transaction failed)."""
        if not action.startswith(TERMINAL_PREFIX):
            self._reserved -= 1

    def deliver(self, task: TaskRow) -> None:
        """The reserved task committed as ``running`` on this link: write its frame."""
        self.release(task.action)
        self._hand_over(task)

    def task_ended(self, task_id: str) -> None:
        if self.in_flight.pop(task_id, None) is not None:
            self._output_sent.pop(task_id, None)

    def cancel_task(self, task_id: str, reason: str) -> None:
        if self.in_flight.pop(task_id, None) is not None:
            self._output_sent.pop(task_id, None)
            self.send({"type": "task_cancel", "task_id": task_id, "reason": reason})
            self.refill()


HANDLERS = {
    "hello": DeviceLink.on_hello,
    "heartbeat": DeviceLink.on_heartbeat,
    "task_output": DeviceLink.on_task_output,
    "task_result": DeviceLink.on_task_result,
}


class DeviceLinkFactory(WebSocketServerFactory):
    """Builds a ``DeviceLink`` for the device admitted by the handshake that is upgrading."""

    def __init__(self, hub: LinkHub, tasks: ConnectorTasks) -> None:
        super().__init__()
        self.hub = hub
        self.tasks = tasks
        self.registrations = HelloRegistrations(hub.db)
        self.claims = TaskClaims(hub.db)
        #: set by the endpoint for the duration of one synchronous upgrade
        self.admitted: DeviceRow | None = None
        self.setProtocolOptions(
            maxFramePayloadSize=MAX_FRAME, maxMessagePayloadSize=MAX_FRAME,
            # pings come from ``liveness.LivenessSweep``, only to quiet links
            autoPingInterval=0, autoPingTimeout=0,
            openHandshakeTimeout=HELLO_SECONDS, closeHandshakeTimeout=5, failByDrop=False,
        )

    def buildProtocol(self, addr: Any) -> DeviceLink | None:
        if self.admitted is None:
            return None
        link = DeviceLink(self.hub, self.tasks, self.admitted, self.registrations)
        link.factory = self
        return link
