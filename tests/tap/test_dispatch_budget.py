"""A burst of new /v1 requests is started a few per reactor turn (``tap.dispatch_budget``).

Real loopback sockets through a real ``CountingSite`` (the site ``twistd lockgate`` serves):
a burst sent in one go is served completely, each request once and in arrival order, spread
over reactor turns; a stream already running keeps getting its chunks while a burst of
CPU-heavy starts is worked off (without a budget it stalls for the whole burst); a client
that hangs up while its request waits releases it (never started, no longer in flight);
a drain waits for the queued requests and they get the drain's answer; the console's routes
never wait.  Where a test must hold requests in the queue, the budget's turns come from a
turnstile the test turns; the sockets and the site stay real.
"""

from __future__ import annotations

import socket
import time
from itertools import pairwise
from typing import Any

from twisted.internet import reactor as global_reactor
from twisted.internet.base import DelayedCall
from twisted.internet.task import deferLater
from twisted.internet.threads import deferToThread
from twisted.trial.unittest import TestCase
from twisted.web.resource import Resource
from twisted.web.server import NOT_DONE_YET

from tap.access_log import OFF
from tap.dispatch_budget import DispatchBudget
from tap.drain import CountingSite, InFlight
from tap.options import resolve

reactor: Any = global_reactor


class _Turns:
    """Counts reactor turns: a zero-delay call that re-arms itself runs once per turn."""

    def __init__(self) -> None:
        self.count = 0
        self._call = reactor.callLater(0, self._tick)

    def _tick(self) -> None:
        self.count += 1
        self._call = reactor.callLater(0, self._tick)

    def stop(self) -> None:
        if self._call.active():
            self._call.cancel()


class _Turnstile:
    """Reactor turns the test makes one at a time: ``callLater(0, ...)`` calls wait for the
    next ``turn()``, which runs the ones made before it (``Clock.advance`` would also run
    those they make)."""

    def __init__(self) -> None:
        self.pending: list[Any] = []

    def callLater(self, delay: float, fn: Any, *args: Any) -> Any:
        call = DelayedCall(0, fn, args, {}, self.pending.remove, lambda _: None, lambda: 0)
        self.pending.append(call)
        return call

    def turn(self) -> None:
        due, self.pending = self.pending, []
        for call in due:
            call.called = 1
            call.func(*call.args)


class _Starts(Resource):
    """Records each request it starts (body, reactor turn); ``/v1/spin`` burns 2 ms of CPU
    first (a stream start's work), ``/v1/hold`` answers only when the test says so,
    ``/v1/tick`` streams 40 chunks 5 ms apart and records when each was written."""

    isLeaf = True

    def __init__(self, turns: _Turns) -> None:
        super().__init__()
        self.turns = turns
        self.started: list[tuple[bytes, int]] = []
        self.held: list[Any] = []
        self.ticks: list[float] = []

    def render(self, request: Any) -> Any:
        body = request.content.read()
        self.started.append((body, self.turns.count))
        request.setHeader(b"content-type", b"text/plain")
        if request.path == b"/v1/spin":
            until = time.perf_counter() + 0.002
            while time.perf_counter() < until:
                pass
        if request.path == b"/v1/hold":
            self.held.append(request)
            return NOT_DONE_YET
        if request.path == b"/v1/tick":
            self._tick(request, 40)
            return NOT_DONE_YET
        return b"answer to " + body

    def _tick(self, request: Any, left: int) -> None:
        if request.finished or request.channel is None:
            return
        self.ticks.append(time.perf_counter())
        request.write(b"tick\n")
        if left == 1:
            request.finish()
        else:
            reactor.callLater(0.005, self._tick, request, left - 1)


class _Site(CountingSite):
    """The served site, counting the connections it accepted (so a test can send a burst
    once every connection is in)."""

    accepted = 0

    def buildProtocol(self, addr: Any) -> Any:
        self.accepted += 1
        return super().buildProtocol(addr)


def _post(path: bytes, body: bytes) -> bytes:
    return (b"POST " + path + b" HTTP/1.1\r\nHost: x\r\nContent-Length: "
            + str(len(body)).encode() + b"\r\n\r\n" + body)


def _get(path: bytes) -> bytes:
    return b"GET " + path + b" HTTP/1.1\r\nHost: x\r\n\r\n"


def _answers(raw: bytes) -> list[tuple[int, bytes]]:
    """(status, body) of each sized answer in ``raw``; stops at an incomplete one."""
    found = []
    while b"\r\n\r\n" in raw:
        head, _, rest = raw.partition(b"\r\n\r\n")
        lines = head.lower().split(b"\r\n")
        length = next((int(line.split(b":")[1]) for line in lines
                       if line.startswith(b"content-length:")), None)
        if length is None or len(rest) < length:
            break
        found.append((int(head.split(b" ", 2)[1]), rest[:length]))
        raw = rest[length:]
    return found


def _read_answers(sock: socket.socket, count: int) -> list[tuple[int, bytes]]:
    received = b""
    while len(_answers(received)) < count:
        data = sock.recv(65536)
        if not data:
            break
        received += data
    return _answers(received)


def _read_stream(sock: socket.socket) -> bytes:
    received = b""
    while not received.endswith(b"0\r\n\r\n"):
        data = sock.recv(65536)
        if not data:
            break
        received += data
    return received


class DispatchBudgetSocketTests(TestCase):
    def setUp(self) -> None:
        self.turns = _Turns()
        self.addCleanup(self.turns.stop)
        self.resource = _Starts(self.turns)
        root = Resource()
        v1 = Resource()
        root.putChild(b"v1", v1)
        api = Resource()
        root.putChild(b"api", api)
        for name in (b"x", b"spin", b"hold", b"tick"):
            v1.putChild(name, self.resource)
        api.putChild(b"x", self.resource)
        self.in_flight = InFlight()
        self.site = _Site(root, self.in_flight, access_log=OFF)
        self.port = reactor.listenTCP(0, self.site, backlog=512, interface="127.0.0.1")
        self.addCleanup(self.port.stopListening)
        self.sockets: list[socket.socket] = []

    def tearDown(self) -> Any:
        for request in self.resource.held:
            if not request.finished and request.channel is not None:
                request.finish()
        for sock in self.sockets:
            sock.close()
        return deferLater(reactor, 0.05, lambda: None)

    async def connect(self, count: int) -> list[socket.socket]:
        """``count`` client connections, returned once the site accepted every one."""
        expected = self.site.accepted + count
        made = []
        for _ in range(count):
            sock = socket.create_connection(("127.0.0.1", self.port.getHost().port), 10)
            self.sockets.append(sock)
            made.append(sock)
        while self.site.accepted < expected:
            await deferLater(reactor, 0.005, lambda: None)
        await deferLater(reactor, 0.02, lambda: None)
        return made

    async def until(self, condition: Any, what: str, within: float = 10.0) -> None:
        deadline = time.monotonic() + within
        while not condition():
            assert time.monotonic() < deadline, f"timed out waiting for {what}"
            await deferLater(reactor, 0.005, lambda: None)

    async def test_a_burst_is_served_completely_in_arrival_order_over_several_turns(
            self) -> None:
        self.site.dispatch_budget = DispatchBudget(reactor, 4, self.in_flight)
        socks = await self.connect(40)
        # one connection pipelines three requests: they stay in their order
        for n, sock in enumerate(socks):  # all in before the reactor reads: one epoll batch
            if n == 7:
                sock.sendall(_post(b"/v1/x", b"p0") + _post(b"/v1/x", b"p1")
                             + _post(b"/v1/x", b"p2"))
            else:
                sock.sendall(_post(b"/v1/x", b"n%d" % n))

        def read_all() -> list[list[tuple[int, bytes]]]:
            return [_read_answers(sock, 3 if n == 7 else 1) for n, sock in enumerate(socks)]

        answers = await deferToThread(read_all)
        for n, got in enumerate(answers):
            bodies = [b"p0", b"p1", b"p2"] if n == 7 else [b"n%d" % n]
            assert got == [(200, b"answer to " + body) for body in bodies], (n, got)
        started = [body for body, _ in self.resource.started]
        assert sorted(started) == sorted([b"n%d" % n for n in range(40) if n != 7]
                                         + [b"p0", b"p1", b"p2"]), started
        assert len(started) == len(set(started))  # each started exactly once
        # the first request of every connection in the order the kernel handed them over
        firsts = [body for body in started if body != b"p1" and body != b"p2"]
        assert firsts == [b"p0" if n == 7 else b"n%d" % n for n in range(40)], firsts
        per_turn: dict[int, int] = {}
        for _, turn in self.resource.started[:40]:
            per_turn[turn] = per_turn.get(turn, 0) + 1
        # a turn is an epoll pass plus its timers: at most one budget in each of the two
        assert max(per_turn.values()) <= 8, per_turn
        assert len(per_turn) >= 5, per_turn
        assert self.site.dispatch_budget.waiting == 0
        assert self.in_flight.count == 0

    async def burst_beside_a_stream(self, budget: DispatchBudget | None) -> float:
        """The longest pause (s) of a 5 ms-paced stream while 150 starts of 2 ms each come in
        one burst."""
        self.site.dispatch_budget = budget
        [runner] = await self.connect(1)
        socks = await self.connect(150)
        runner.sendall(_get(b"/v1/tick"))
        await self.until(lambda: len(self.resource.ticks) >= 3, "the stream to run")
        ticks_before = len(self.resource.ticks)
        for n, sock in enumerate(socks):
            sock.sendall(_post(b"/v1/spin", b"s%d" % n))

        def read_all() -> list[list[tuple[int, bytes]]]:
            return [_read_answers(sock, 1) for sock in socks]

        answers = await deferToThread(read_all)
        assert all(got == [(200, b"answer to s%d" % n)] for n, got in enumerate(answers))
        stream = await deferToThread(_read_stream, runner)
        assert stream.count(b"tick\n") == 40
        ticks = self.resource.ticks[ticks_before - 1:]
        return max(b - a for a, b in pairwise(ticks))

    async def test_a_running_stream_keeps_flowing_during_a_burst(self) -> None:
        # the control first: without a budget all 150 starts (300 ms of CPU) run in the epoll
        # pass that read them, and the stream's 5 ms ticks wait for all of them
        stalled = await self.burst_beside_a_stream(None)
        assert stalled > 0.28, stalled
        self.resource.ticks.clear()
        # worked off 4 (or 8) per turn: what remains is reading and parsing all 150 requests
        # in one epoll pass (~20-30 ms on a quiet machine)
        flowing = await self.burst_beside_a_stream(DispatchBudget(reactor, 4, self.in_flight))
        assert flowing < stalled / 3, (flowing, stalled)

    async def test_a_saturated_reactor_does_not_starve_the_queue(self) -> None:
        # other work of 15 ms in every reactor turn (thousands of running streams' chunks):
        # one start per turn would take 60 turns (~1 s) to work off 60 queued requests; the
        # fair share lets a turn's starts take as long as the rest of the turn did
        self.site.dispatch_budget = DispatchBudget(reactor, 1, self.in_flight)
        socks = await self.connect(60)
        busy: list[Any] = []

        def burn() -> None:
            until = time.perf_counter() + 0.015
            while time.perf_counter() < until:
                pass
            busy[:] = [reactor.callLater(0, burn)]

        burn()
        self.addCleanup(lambda: busy[0].cancel() if busy[0].active() else None)
        for n, sock in enumerate(socks):
            sock.sendall(_post(b"/v1/x", b"b%d" % n))
        answers = await deferToThread(lambda: [_read_answers(s, 1) for s in socks])
        assert all(got == [(200, b"answer to b%d" % n)] for n, got in enumerate(answers))
        turns = sorted({turn for _, turn in self.resource.started})
        assert len(turns) <= 8, turns  # one start per turn would be 60 turns

    async def test_a_hang_up_while_queued_releases_the_request(self) -> None:
        turns = _Turnstile()
        budget = self.site.dispatch_budget = DispatchBudget(turns, 1, self.in_flight)
        socks = await self.connect(6)
        for n, sock in enumerate(socks):
            sock.sendall(_post(b"/v1/hold", b"h%d" % n))
        await self.until(lambda: budget.waiting == 5, "five requests to queue")
        assert len(self.resource.started) == 1
        assert self.in_flight.count == 6  # the queued ones count: a drain would wait
        queued_first = self.resource.started[0][0]
        gone = [sock for n, sock in enumerate(socks) if b"h%d" % n != queued_first][:3]
        for sock in gone:
            sock.close()
        await self.until(lambda: budget.waiting == 2, "the hung-up requests to leave")
        assert self.in_flight.count == 3
        for _ in range(4):
            turns.turn()
        started = [body for body, _ in self.resource.started]
        assert len(started) == 3 and len(set(started)) == 3, started
        hung_up = {b"h%d" % socks.index(sock) for sock in gone}
        assert not hung_up & set(started), (hung_up, started)
        for request in self.resource.held:
            request.write(b"done")
            request.finish()
        await self.until(lambda: self.in_flight.count == 0, "every request to end")
        assert budget.waiting == 0

    async def test_a_drain_waits_for_queued_requests_and_they_get_its_answer(self) -> None:
        turns = _Turnstile()
        budget = self.site.dispatch_budget = DispatchBudget(turns, 1, self.in_flight)
        socks = await self.connect(4)
        for n, sock in enumerate(socks):
            sock.sendall(_post(b"/v1/x", b"d%d" % n))
        await self.until(lambda: budget.waiting == 3, "three requests to queue")
        self.in_flight.draining = True
        drained = self.in_flight.drained(reactor, 30)
        assert not drained.called  # three requests are still waiting for their turn
        turns.turn()
        turns.turn()
        assert not drained.called
        turns.turn()
        await drained
        answers = await deferToThread(lambda: [_read_answers(s, 1) for s in socks])
        statuses = sorted(got[0][0] for got in answers)
        assert statuses == [200, 503, 503, 503], answers
        assert len(self.resource.started) == 1
        assert budget.waiting == 0 and self.in_flight.count == 0

    async def test_console_routes_do_not_wait_behind_queued_requests(self) -> None:
        turns = _Turnstile()
        budget = self.site.dispatch_budget = DispatchBudget(turns, 1, self.in_flight)
        socks = await self.connect(4)
        for n, sock in enumerate(socks[:3]):
            sock.sendall(_post(b"/v1/x", b"q%d" % n))
        await self.until(lambda: budget.waiting == 2, "two requests to queue")
        socks[3].sendall(_post(b"/api/x", b"console"))
        [answer] = await deferToThread(_read_answers, socks[3], 1)
        assert answer == (200, b"answer to console")
        assert budget.waiting == 2
        turns.turn()
        turns.turn()
        answers = await deferToThread(lambda: [_read_answers(s, 1) for s in socks[:3]])
        assert sorted(got[0] for got in answers) == [
            (200, b"answer to q0"), (200, b"answer to q1"), (200, b"answer to q2")]


    async def test_an_upgrade_request_never_waits(self) -> None:
        # what follows an Upgrade request's head belongs to whoever takes the transport over
        # when it is dispatched: it must not sit in the queue meanwhile
        turns = _Turnstile()
        budget = self.site.dispatch_budget = DispatchBudget(turns, 1, self.in_flight)
        socks = await self.connect(3)
        for n, sock in enumerate(socks[:2]):
            sock.sendall(_post(b"/v1/x", b"u%d" % n))
        await self.until(lambda: budget.waiting == 1, "one request to queue")
        socks[2].sendall(b"GET /v1/x HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\n"
                         b"Upgrade: websocket\r\n\r\n")
        [answer] = await deferToThread(_read_answers, socks[2], 1)
        assert answer == (200, b"answer to ")
        assert budget.waiting == 1
        turns.turn()
        [queued] = await deferToThread(_read_answers, socks[1], 1)
        assert queued == (200, b"answer to u1")


class _Counts:
    def __init__(self) -> None:
        self.count = 0

    def started(self) -> None:
        self.count += 1

    def finished(self, _ignored: Any = None) -> None:
        self.count -= 1


class DispatchBudgetTurnTests(TestCase):
    """The FIFO and the per-turn count, turn by turn."""

    def test_requests_start_per_turn_in_arrival_order(self) -> None:
        clock = _Turnstile()
        holds = _Counts()
        budget = DispatchBudget(clock, 3, holds)
        started: list[int] = []
        requests = [object() for _ in range(11)]  # a queued request is alive: ids differ
        for n in range(10):
            budget.admit(requests[n], lambda n=n: started.append(n))
        assert started == [0, 1, 2] and budget.waiting == 7 and holds.count == 7
        clock.turn()
        assert started == [0, 1, 2, 3, 4, 5] and holds.count == 4
        clock.turn()
        clock.turn()
        assert started == list(range(10)) and budget.waiting == 0 and holds.count == 0
        clock.turn()
        assert not clock.pending  # idle: no timer left behind
        budget.admit(requests[10], lambda: started.append(10))
        assert started[-1] == 10  # a fresh turn starts at once

    def test_a_newcomer_waits_behind_the_queue_even_with_budget_left(self) -> None:
        clock = _Turnstile()
        budget = DispatchBudget(clock, 2)
        started: list[str] = []
        requests = {name: object() for name in "abcdef"}
        for name in "abc":
            budget.admit(requests[name], lambda name=name: started.append(name))
        clock.turn()  # c starts: one of two left this turn
        assert started == ["a", "b", "c"]
        for name in "def":
            budget.admit(requests[name], lambda name=name: started.append(name))
        assert started == ["a", "b", "c", "d"]
        clock.turn()
        assert started == ["a", "b", "c", "d", "e", "f"]

    def test_forget_drops_only_a_waiting_request_once(self) -> None:
        clock = _Turnstile()
        holds = _Counts()
        budget = DispatchBudget(clock, 1, holds)
        requests = [object() for _ in range(3)]
        started: list[int] = []
        for n, request in enumerate(requests):
            budget.admit(request, lambda n=n: started.append(n))
        budget.forget(requests[0])  # already started: nothing to drop
        budget.forget(requests[1])
        budget.forget(requests[1])
        assert holds.count == 1 and budget.waiting == 1
        clock.turn()
        assert started == [0, 2] and holds.count == 0

    def test_a_start_that_raises_is_logged_and_the_queue_goes_on(self) -> None:
        clock = _Turnstile()
        holds = _Counts()
        budget = DispatchBudget(clock, 1, holds)
        requests = [object() for _ in range(3)]
        budget.admit(requests[0], lambda: None)

        def broken() -> None:
            raise RuntimeError("start failed")

        started: list[str] = []
        budget.admit(requests[1], broken)
        budget.admit(requests[2], lambda: started.append("after"))
        clock.turn()
        assert holds.count == 1 and budget.waiting == 1
        clock.turn()
        assert started == ["after"] and holds.count == 0 and budget.waiting == 0
        assert len(self.flushLoggedErrors(RuntimeError)) == 1

    def test_a_turn_may_spend_on_starts_what_the_reactor_spent_on_the_rest(self) -> None:
        clock = _Turnstile()
        moment = [0.0]
        budget = DispatchBudget(clock, 2, now=lambda: moment[0])
        started: list[int] = []
        requests = [object() for _ in range(60)]

        def start(n: int) -> None:
            started.append(n)
            moment[0] += 0.001  # each start takes 1 ms

        for n in range(40):
            budget.admit(requests[n], lambda n=n: start(n))
        assert len(started) == 2
        clock.turn()  # no earlier turn to compare with: the count
        assert len(started) == 4
        moment[0] += 0.020  # the reactor's other work before the next turn: 20 ms
        clock.turn()
        assert len(started) == 24  # 20 ms of starts
        clock.turn()  # nothing else happened in between: the count again
        assert len(started) == 26
        moment[0] += 0.005
        clock.turn()
        assert len(started) == 31
        clock.turn()
        clock.turn()
        clock.turn()
        clock.turn()
        assert len(started) == 39
        clock.turn()  # the queue empties
        assert started == list(range(40)) and budget.waiting == 0
        clock.turn()
        moment[0] += 1000.0  # an idle spell is not other work
        for n in range(40, 60):
            budget.admit(requests[n], lambda n=n: start(n))
        assert len(started) == 42
        clock.turn()
        assert len(started) == 44

    def test_a_budget_below_one_is_refused(self) -> None:
        with self.assertRaises(ValueError):
            DispatchBudget(_Turnstile(), 0)


class DispatchPerTurnOptionTests(TestCase):
    def test_default_environment_and_refusals(self) -> None:
        options: dict[str, Any] = {}
        resolve(options, {})
        assert options["dispatch-per-turn"] == 8
        options = {}
        resolve(options, {"LOCKGATE_DISPATCH_PER_TURN": "0"})
        assert options["dispatch-per-turn"] == 0
        for bad in ("-1", "many", "100001"):
            with self.assertRaises(Exception) as caught:
                resolve({}, {"LOCKGATE_DISPATCH_PER_TURN": bad})
            assert "dispatch-per-turn" in str(caught.exception)
