"""Status monitor checks and the scheduler (console contract §5.14), on real loopback servers."""

from __future__ import annotations

import socket
from datetime import timedelta
from typing import Any

from twisted.internet import reactor
from twisted.internet.defer import ensureDeferred
from twisted.internet.protocol import Factory, Protocol
from twisted.internet.task import Clock
from twisted.trial.unittest import SkipTest, TestCase

from gateway.channels.net_policy import UrlPolicy
from gateway.jobs.monitors import TargetError, check_target, run_check, tcp_address
from gateway.store import monitors as store
from gateway.sync.fetch import FetchError, fetch
from tests.support.app import AppTestCase
from tests.support.names import ScriptedNames
from tests.support.scripted_upstream import ScriptedUpstream

OPEN = UrlPolicy.from_entries(allow_private=True)


def loopback_name() -> str | None:
    """A host name (not ``localhost``) that resolves to a loopback address, if any."""
    for name in (socket.gethostname(), "localhost.localdomain"):
        try:
            address = socket.gethostbyname(name)
        except OSError:
            continue
        if address.startswith("127.") and name != "localhost":
            return name
    return None


def monitor(target: str, check_type: str = "http", method: str = "GET",
            **extra: Any) -> dict[str, Any]:
    values = {"name": "m", "target_url": target, "check_type": check_type, "method": method,
              "interval_seconds": 10, "retention_hours": 168, "enabled": True}
    values.update(extra)
    return values


class TargetTests(TestCase):
    def test_tcp_address(self) -> None:
        self.assertEqual(tcp_address("db.example:5432"), ("db.example", 5432))
        self.assertEqual(tcp_address("https://api.example"), ("api.example", 443))
        self.assertEqual(tcp_address("http://api.example:8080/x"), ("api.example", 8080))
        self.assertEqual(tcp_address("[::1]:22"), ("::1", 22))
        for bad in ("db.example", "ftp://x", "host:notaport", ":80", "host:80/path"):
            with self.assertRaises(TargetError, msg=bad):
                tcp_address(bad)

    def test_policy(self) -> None:
        strict = UrlPolicy.from_entries()
        self.assertEqual(check_target("http", " https://status.example/x ", strict),
                         "https://status.example/x")
        for check_type, target in (("http", "http://127.0.0.1:1/"), ("tcp", "127.0.0.1:22"),
                                   ("http", "http://169.254.169.254/"), ("http", "ftp://x/"),
                                   ("tcp", "metadata.google.internal:80")):
            with self.assertRaises(TargetError):
                check_target(check_type, target, strict)
        self.assertEqual(check_target("tcp", "127.0.0.1:22", OPEN), "127.0.0.1:22")
        with self.assertRaises(TargetError):
            check_target("http", "http://169.254.169.254/", OPEN)


class CheckTests(TestCase):
    def setUp(self) -> None:
        self.clock = Clock()
        self.up = ScriptedUpstream.start()
        self.addCleanup(self.up.stop)

    async def check(self, target: str, **extra: Any) -> Any:
        return await run_check(reactor, self.clock, monitor(target, **extra), OPEN)

    async def test_http_up_and_down(self) -> None:
        self.up.answer("/ok", 200, {})
        self.up.answer("/moved", 302, b"")
        self.up.answer("/broken", 500, {})
        ok = await self.check(self.up.base_url + "/ok")
        self.assertEqual((ok.status, ok.status_code, ok.message), ("up", 200, "HTTP 200"))
        self.assertGreaterEqual(ok.latency_ms, 0)
        moved = await self.check(self.up.base_url + "/moved")
        self.assertEqual((moved.status, moved.status_code), ("up", 302))
        broken = await self.check(self.up.base_url + "/broken")
        self.assertEqual((broken.status, broken.status_code, broken.message),
                         ("down", 500, "HTTP 500"))
        head = await self.check(self.up.base_url + "/ok", method="HEAD")
        self.assertEqual(head.status, "up")
        self.assertEqual([s.method for s in self.up.requests], ["GET", "GET", "GET", "HEAD"])
        self.assertTrue(self.up.requests[0].headers["user-agent"].startswith("Lockgate"))

    async def test_connection_refused_is_down(self) -> None:
        closed = ScriptedUpstream.start()
        url = closed.base_url
        await closed.stop()
        outcome = await self.check(url + "/")
        self.assertEqual((outcome.status, outcome.status_code), ("down", 0))
        self.assertIn("refused", outcome.message.lower())
        self.assertLessEqual(len(outcome.message), 500)

    async def test_slow_target_times_out_on_the_clock(self) -> None:
        self.up.hang("/slow")
        done = ensureDeferred(run_check(reactor, self.clock,
                                        monitor(self.up.base_url + "/slow"), OPEN))
        await self.up.wait_for(1)
        self.assertFalse(done.called)
        self.clock.advance(10)
        outcome = await done
        self.assertEqual((outcome.status, outcome.message), ("down", "timeout after 10s"))

    async def test_unsafe_target_is_down_without_a_request(self) -> None:
        outcome = await run_check(reactor, self.clock, monitor(self.up.base_url + "/"),
                                  UrlPolicy.from_entries())
        self.assertEqual(outcome.status, "down")
        self.assertIn("Unsafe or invalid target URL", outcome.message)
        self.assertEqual(self.up.requests, [])

    async def test_names_resolving_to_private_addresses_are_refused_at_connect(self) -> None:
        name = loopback_name()
        if name is None:
            raise SkipTest("no non-localhost name resolves to loopback here")
        self.up.answer("/ok", 200, {})
        strict = UrlPolicy.from_entries()
        url = f"http://{name}:{self.up.port}/ok"
        self.assertEqual(check_target("http", url, strict), url)  # the name itself passes
        for check_type, target in (("http", url), ("tcp", f"{name}:{self.up.port}")):
            outcome = await run_check(reactor, self.clock, monitor(target, check_type=check_type),
                                      strict)
            self.assertEqual(outcome.status, "down")
            self.assertIn("unsafe address", outcome.message)
        self.assertEqual(self.up.requests, [])
        outcome = await self.check(url)
        self.assertEqual(outcome.status, "up")
        self.assertEqual(self.up.requests[0].headers["host"], f"{name}:{self.up.port}")

    async def test_scripted_name_resolving_to_loopback_is_refused_at_connect(self) -> None:
        names = ScriptedNames({"mon.evil.example": [["127.0.0.1"]]}).install(self, reactor)
        self.up.answer("/ok", 200, {})
        strict = UrlPolicy.from_entries()
        url = f"http://mon.evil.example:{self.up.port}/ok"
        for check_type, target in (("http", url), ("tcp", f"mon.evil.example:{self.up.port}")):
            outcome = await run_check(reactor, self.clock, monitor(target, check_type=check_type),
                                      strict)
            self.assertEqual(outcome.status, "down")
            self.assertIn("unsafe address", outcome.message)
            self.assertIn("127.0.0.1", outcome.message)
        self.assertEqual(self.up.requests, [])
        self.assertEqual(names.asked, ["mon.evil.example", "mon.evil.example"])
        self.assertEqual((await self.check(url)).status, "up")

    async def test_tcp_open_and_closed_ports(self) -> None:
        factory = Factory.forProtocol(Protocol)
        listening = reactor.listenTCP(0, factory, interface="127.0.0.1")
        self.addCleanup(listening.stopListening)
        port = listening.getHost().port
        outcome = await self.check(f"127.0.0.1:{port}", check_type="tcp")
        self.assertEqual((outcome.status, outcome.status_code, outcome.message),
                         ("up", 0, "TCP connected"))
        closed = reactor.listenTCP(0, factory, interface="127.0.0.1")
        closed_port = closed.getHost().port
        await closed.stopListening()
        outcome = await self.check(f"127.0.0.1:{closed_port}", check_type="tcp")
        self.assertEqual(outcome.status, "down")
        self.assertTrue(outcome.message)


class FetchTests(TestCase):
    """The bounded fetch shared by sync, monitors and probes."""

    async def test_body_size_is_bounded(self) -> None:
        up = ScriptedUpstream.start()
        self.addCleanup(up.stop)
        up.answer("/big", 200, b"x" * 5000)
        up.answer("/small", 200, b"y" * 10)
        clock = Clock()
        fetched = await fetch(reactor, clock, up.base_url + "/small", limit=100)
        self.assertEqual((fetched.status, fetched.body), (200, b"y" * 10))
        with self.assertRaises(FetchError) as caught:
            await fetch(reactor, clock, up.base_url + "/big", limit=100)
        self.assertIn("larger than 100 bytes", str(caught.exception))
        with self.assertRaises(FetchError):
            await fetch(reactor, clock, "http://[bad", limit=100)


class SchedulerTests(AppTestCase):
    async def asyncSetUp(self) -> None:
        await self.ctx.live_settings.save({"ssrf_allow_private_networks": "true",
                                           "status_monitor_enabled": "true"}, self.ctx.now())
        self.up = ScriptedUpstream.start()
        self.addCleanup(self.up.stop)

    @property
    def scheduler(self) -> Any:
        return self.app.background[0]

    async def add(self, path: str, **extra: Any) -> int:
        values = monitor(self.up.base_url + path, **extra)
        return await self.ctx.db.transaction(store.create_monitor, values, self.ctx.now())

    async def rows(self, monitor_id: int) -> dict[str, Any]:
        return await self.ctx.db.transaction(store.with_checks, monitor_id, 100)

    async def test_due_monitors_run_on_the_clock_and_keep_history(self) -> None:
        await self.asyncSetUp()
        self.up.answer("/ok", 200, {})
        self.up.answer("/down", 503, {})
        up_id = await self.add("/ok")
        down_id = await self.add("/down", interval_seconds=60)
        disabled = await self.add("/ok", enabled=False)
        self.clock.advance(10)  # the looping call starts a round
        self.assertIsNone(self.scheduler.tick())  # a round is running already
        await self.scheduler.idle()
        self.assertEqual((await self.rows(up_id))["last_status"], "up")
        down = await self.rows(down_id)
        self.assertEqual((down["last_status"], down["last_status_code"], down["last_message"]),
                         ("down", 503, "HTTP 503"))
        self.assertEqual((await self.rows(disabled))["last_status"], "pending")
        # 10 s later only the 10 s monitor is due again
        self.clock.advance(10)
        await self.scheduler.idle()
        self.assertEqual(len((await self.rows(up_id))["recent_checks"]), 2)
        self.assertEqual(len((await self.rows(down_id))["recent_checks"]), 1)
        self.assertEqual(len(self.up.requests), 3)

    async def test_flapping_target_and_retention(self) -> None:
        await self.asyncSetUp()
        flap = await self.add("/flap", retention_hours=1)
        statuses = []
        for i in range(6):
            self.up.answer("/flap", 200 if i % 2 == 0 else 500, {})
            self.clock.advance(10)  # each interval the looping call runs a round
            await self.scheduler.idle()
            statuses.append((await self.rows(flap))["last_status"])
        self.assertEqual(statuses, ["up", "down"] * 3)
        row = await self.rows(flap)
        self.assertEqual([c["status"] for c in row["recent_checks"]], ["up", "down"] * 3)
        # an hour and more later: the next check deletes the older history
        self.up.answer("/flap", 200, {})
        self.clock.advance(timedelta(hours=1, seconds=10).total_seconds())
        await self.scheduler.idle()
        row = await self.rows(flap)
        self.assertEqual([c["status"] for c in row["recent_checks"]], ["up"])

    async def test_nothing_runs_while_the_status_page_is_off(self) -> None:
        await self.asyncSetUp()
        await self.ctx.live_settings.save({"status_monitor_enabled": "false"}, self.ctx.now())
        self.up.answer("/ok", 200, {})
        await self.add("/ok")
        self.assertIsNone(await self.scheduler.tick())
        self.clock.advance(10)
        await self.scheduler.idle()
        self.assertEqual(self.up.requests, [])

    async def test_bounded_concurrency_and_timeouts(self) -> None:
        await self.asyncSetUp()
        self.up.hang("/slow")
        ids = [await self.add("/slow") for _ in range(3)]
        self.scheduler._semaphore.limit = 2
        self.scheduler._semaphore.tokens = 2
        round_done = self.scheduler.tick()
        await self.up.wait_for(2)
        self.assertEqual(self.scheduler._semaphore.tokens, 0)
        self.assertEqual(len(self.scheduler._semaphore.waiting), 1)
        self.assertIsNone(self.scheduler.tick())  # rounds never overlap
        self.clock.advance(10)
        await self.up.wait_for(3)
        self.clock.advance(10)
        await round_done
        for monitor_id in ids:
            row = await self.rows(monitor_id)
            self.assertEqual((row["last_status"], row["last_message"]),
                             ("down", "timeout after 10s"))

    async def test_stop_cancels_checks_in_flight(self) -> None:
        await self.asyncSetUp()
        self.up.hang("/slow")
        monitor_id = await self.add("/slow")
        round_done = self.scheduler.tick()
        await self.up.wait_for(1)
        self.scheduler.stopService()
        await round_done
        self.assertEqual((await self.rows(monitor_id))["last_status"], "pending")
