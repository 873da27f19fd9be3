"""``GET /api/updates`` and ``POST /api/updates/check`` against a real loopback release feed."""

from __future__ import annotations

from typing import Any

from twisted.internet import reactor
from twisted.internet.defer import Deferred, ensureDeferred
from twisted.internet.protocol import Factory, Protocol
from twisted.web.resource import Resource
from twisted.web.server import NOT_DONE_YET, Site

from console.routes import updates
from tests.console.admin_case import AdminCase


class Feed(Resource):
    """Serves whatever the test sets; ``hang`` keeps the request open without answering."""

    isLeaf = True

    def __init__(self) -> None:
        super().__init__()
        self.status = 200
        self.body = b'{"tag_name": "v1.4.2"}'
        self.hits = 0
        self.hang = False
        self.arrived: Deferred[None] = Deferred()
        self.user_agents: list[bytes | None] = []

    def render_GET(self, request: Any) -> Any:
        self.hits += 1
        self.user_agents.append(request.getHeader(b"user-agent"))
        if not self.arrived.called:
            self.arrived.callback(None)
        if self.hang:
            return NOT_DONE_YET
        request.setResponseCode(self.status)
        return self.body


class UpdatesTest(AdminCase):
    def setUp(self) -> None:
        super().setUp()
        self.feed = Feed()
        site = Site(self.feed)
        self.feed_port = reactor.listenTCP(0, site, interface="127.0.0.1")
        self.addCleanup(self.feed_port.stopListening)
        self.feed_url = f"http://127.0.0.1:{self.feed_port.getHost().port}/releases/latest"

    async def configure(self, url: str, *, allow_private: bool = True) -> None:
        response = await self.api("PUT", "/api/settings", {
            "auto_update_release_url": url, "ssrf_allow_private_networks": allow_private})
        self.assertEqual(response.status, 200, response)

    async def check(self) -> Any:
        return await self.api("POST", "/api/updates/check")

    async def test_status_of_a_dev_build(self) -> None:
        response = await self.api("GET", "/api/updates")
        self.assertEqual(response.status, 200)
        status = response.json()
        self.assertEqual(status["current_version"], "dev")
        self.assertEqual((status["enabled"], status["interval_hours"]), (False, "24"))
        self.assertEqual((status["latest_version"], status["update_available"],
                          status["supported"], status["in_progress"]), ("", False, False, False))
        self.assertIn(status["platform"].split("-")[0], ("linux", "darwin", "windows"))
        user = await self.register("dora")
        denied = await self.call("POST", "/api/updates/check", token=user["token"])
        self.assertEqual(denied.status, 403)

    async def test_check_reads_the_feed_and_records_it(self) -> None:
        await self.configure(self.feed_url)
        response = await self.check()
        self.assertEqual(response.status, 200, response)
        status = response.json()
        self.assertEqual((status["latest_version"], status["last_error"]), ("v1.4.2", ""))
        self.assertEqual(status["last_checked_at"], "2027-01-15T08:00:00Z")
        self.assertEqual(self.feed.user_agents, [updates.USER_AGENT.encode()])
        again = (await self.api("GET", "/api/updates")).json()
        self.assertEqual(again["latest_version"], "v1.4.2")
        self.assertFalse(again["update_available"])  # a dev build cannot compare

    async def test_release_list_skips_drafts_and_prereleases(self) -> None:
        self.feed.body = (b'[{"tag_name": "v3.0.0", "draft": true},'
                          b' {"tag_name": "v2.1.0-rc1", "prerelease": true},'
                          b' {"tag_name": "v2.0.0"}]')
        await self.configure(self.feed_url)
        self.assertEqual((await self.check()).json()["latest_version"], "v2.0.0")

    async def test_update_available_for_a_release_build(self) -> None:
        self.patch(updates, "BUILD_VERSION", "1.4.0")
        await self.configure(self.feed_url)
        status = (await self.check()).json()
        self.assertTrue(status["update_available"])
        self.assertEqual(status["current_version"], "1.4.0")

    async def assert_bad_gateway(self, fragment: str) -> dict[str, Any]:
        response = await self.check()
        self.assertEqual(response.status, 502, response)
        body = response.json()
        self.assertIn(fragment, body["error"])
        self.assertEqual(body["status"]["last_error"], body["error"])
        self.assertEqual(body["status"]["current_version"], "dev")
        return body

    async def test_failures_answer_502_and_are_recorded(self) -> None:
        await self.assert_bad_gateway("no release feed is configured")
        await self.configure(self.feed_url)
        self.feed.body = b"<html>not json"
        await self.assert_bad_gateway("not valid JSON")
        self.feed.body = b'{"name": "no tag"}'
        await self.assert_bad_gateway("no tag_name")
        self.feed.body = b"[]"
        await self.assert_bad_gateway("lists no release")
        self.feed.status, self.feed.body = 500, b'{"tag_name": "v9.9.9"}'
        await self.assert_bad_gateway("HTTP 500")
        # a later good check clears the error
        self.feed.status = 200
        ok = await self.check()
        self.assertEqual((ok.status, ok.json()["last_error"]), (200, ""))

    async def test_unreachable_feed(self) -> None:
        factory = Factory.forProtocol(Protocol)
        closed = reactor.listenTCP(0, factory, interface="127.0.0.1")
        port = closed.getHost().port
        await closed.stopListening()
        await self.configure(f"http://127.0.0.1:{port}/feed")
        await self.assert_bad_gateway("unreachable")

    async def test_private_feed_refused_by_the_url_policy(self) -> None:
        await self.configure(self.feed_url, allow_private=False)
        await self.assert_bad_gateway("not allowed")
        self.assertEqual(self.feed.hits, 0)

    async def test_silent_feed_times_out_on_the_clock(self) -> None:
        await self.configure(self.feed_url)
        self.feed.hang = True
        pending = ensureDeferred(self.check())
        await self.feed.arrived
        self.clock.advance(updates.FEED_TIMEOUT_SECONDS + 1)
        response = await pending
        self.assertEqual(response.status, 502, response)
        self.assertIn("unreachable", response.json()["error"])
