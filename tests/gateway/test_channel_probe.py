"""Channel probes: auto-detect records health, auto-recover brings auto-disabled channels back
(contract §5.4 reliability settings); admin-disabled channels are never touched."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from sqlalchemy import select
from twisted.internet import reactor

from gateway.store import schema
from tests.support.app import AppTestCase
from tests.support.catalog_fixtures import CatalogBuilder
from tests.support.names import ScriptedNames
from tests.support.scripted_upstream import ScriptedUpstream

MODELS = {"data": [{"id": "m"}]}


class ChannelProbeTests(AppTestCase):
    async def prepare(self, **settings: str) -> None:
        rows = {"ssrf_allow_private_networks": "true",
                "reliability_recovery_after_seconds": "1800",
                "reliability_auto_detect_interval_seconds": "300"}
        rows.update(settings)
        await self.ctx.live_settings.save(rows, self.ctx.now())
        self.up = ScriptedUpstream.start()
        self.addCleanup(self.up.stop)
        self.build = CatalogBuilder(self.ctx)
        self.uc = await self.build.user_channel("standard")

    @property
    def probe(self) -> Any:
        return self.app.background[1]

    async def channel(self, name: str, *, disabled_ago: float | None, enabled: bool = True,
                      base_url: str | None = None) -> int:
        channel_id = await self.build.channel(self.uc, name, enabled=enabled,
                                              base_url=base_url or self.up.base_url,
                                              api_key="sk-probe")
        if disabled_ago is not None:
            await self.build.set(schema.channels, channel_id,
                                 auto_disabled_at=self.ctx.now() - timedelta(
                                     seconds=disabled_ago),
                                 auto_disabled_reason="HTTP 401", consecutive_failures=4)
        return channel_id

    async def row(self, channel_id: int) -> dict[str, Any]:
        def run(conn: Any) -> dict[str, Any]:
            found = conn.execute(select(schema.channels).where(
                schema.channels.c.id == channel_id)).mappings().one()
            return dict(found)

        return await self.ctx.db.transaction(run)

    async def round(self) -> None:
        started = self.probe.tick()
        assert started is not None, "no probe round started"
        await started

    async def test_successful_probe_after_the_wait_recovers(self) -> None:
        await self.prepare(reliability_auto_recover_enabled="true")
        self.up.answer("/v1/models", 200, MODELS)
        ready = await self.channel("ready", disabled_ago=2000)
        early = await self.channel("early", disabled_ago=100)
        await self.round()
        row = await self.row(ready)
        self.assertIsNone(row["auto_disabled_at"])
        self.assertEqual((row["auto_disabled_reason"], row["consecutive_failures"],
                          row["last_health_status"]), ("", 0, "up"))
        self.assertIsNotNone(row["last_health_checked_at"])
        row = await self.row(early)
        self.assertIsNotNone(row["auto_disabled_at"])  # not yet: recovery_after not reached
        self.assertEqual(row["last_health_status"], "up")
        self.assertEqual(self.up.paths(), ["/v1/models", "/v1/models"])
        self.assertEqual({s.headers["authorization"] for s in self.up.requests},
                         {"Bearer sk-probe"})
        # the catalog caches were told
        channels = {c.id: c for c in self.ctx.catalog.snapshot.channels.values()}
        self.assertIsNone(channels[ready].auto_disabled_at)
        self.assertIsNotNone(channels[early].auto_disabled_at)
        # the next round only comes after the interval; then the early one recovers too
        self.assertIsNone(self.probe.tick())
        self.clock.advance(1800)
        await self.probe.idle()
        self.assertIsNone((await self.row(early))["auto_disabled_at"])

    async def test_failing_probe_keeps_the_channel_off(self) -> None:
        await self.prepare(reliability_auto_recover_enabled="true")
        self.up.answer("/v1/models", 401, {})
        failing = await self.channel("failing", disabled_ago=5000)
        closed = ScriptedUpstream.start()
        dead_url = closed.base_url
        await closed.stop()
        dead = await self.channel("dead", disabled_ago=5000, base_url=dead_url)
        await self.round()
        for channel_id in (failing, dead):
            row = await self.row(channel_id)
            self.assertIsNotNone(row["auto_disabled_at"])
            self.assertEqual(row["last_health_status"], "down")

    async def test_admin_disabled_channels_are_never_touched(self) -> None:
        await self.prepare(reliability_auto_recover_enabled="true",
                           reliability_auto_detect_upstream_enabled="true")
        self.up.answer("/v1/models", 200, MODELS)
        off = await self.channel("off", disabled_ago=5000, enabled=False)
        before = await self.row(off)
        await self.round()
        self.assertEqual(self.up.requests, [])
        self.assertEqual(await self.row(off), before)

    async def test_nothing_happens_with_both_settings_off(self) -> None:
        await self.prepare()
        self.up.answer("/v1/models", 200, MODELS)
        channel = await self.channel("c", disabled_ago=5000)
        self.assertIsNone(self.probe.tick())
        self.clock.advance(600)
        await self.probe.idle()
        self.assertEqual(self.up.requests, [])
        self.assertIsNotNone((await self.row(channel))["auto_disabled_at"])

    async def test_auto_detect_alone_records_health_without_recovering(self) -> None:
        await self.prepare(reliability_auto_detect_upstream_enabled="true")
        self.up.answer("/v1/models", 200, MODELS)
        healthy = await self.channel("healthy", disabled_ago=None)
        disabled = await self.channel("disabled", disabled_ago=5000)
        await self.round()
        self.assertEqual((await self.row(healthy))["last_health_status"], "up")
        row = await self.row(disabled)
        self.assertEqual(row["last_health_status"], "up")
        self.assertIsNotNone(row["auto_disabled_at"])

    async def test_a_name_resolving_to_loopback_is_refused_at_connect(self) -> None:
        await self.prepare(reliability_auto_detect_upstream_enabled="true",
                           ssrf_allow_private_networks="false")
        names = ScriptedNames({"probe.evil.example": [["127.0.0.1"]]}).install(self, reactor)
        self.up.answer("/v1/models", 200, MODELS)
        named = await self.channel("named", disabled_ago=None,
                                   base_url=f"http://probe.evil.example:{self.up.port}")
        await self.round()
        self.assertEqual((await self.row(named))["last_health_status"], "down")
        self.assertEqual(self.up.requests, [])  # the key never reached the listener
        self.assertIn("probe.evil.example", names.asked)

    async def test_probe_timeout_uses_the_setting(self) -> None:
        await self.prepare(reliability_auto_recover_enabled="true",
                           reliability_auto_detect_timeout_seconds="5")
        self.up.hang("/v1/models")
        channel = await self.channel("slow", disabled_ago=5000)
        started = self.probe.tick()
        await self.up.wait_for(1)
        self.clock.advance(5)
        await started
        row = await self.row(channel)
        self.assertEqual(row["last_health_status"], "down")
        self.assertIsNotNone(row["auto_disabled_at"])

    async def test_credential_failure_then_recovery_clears_node_health(self) -> None:
        await self.prepare(reliability_auto_recover_enabled="true")
        self.up.answer("/v1/models", 200, MODELS)
        channel = await self.channel("c", disabled_ago=None)
        health = self.app.gateway.health
        await health.record_failure(channel, "HTTP 401", 401)
        self.assertTrue(health.is_auto_disabled(channel))
        self.assertIsNotNone((await self.row(channel))["auto_disabled_at"])
        self.clock.advance(1801)  # the looping call starts the round
        await self.probe.idle()
        self.assertIsNone((await self.row(channel))["auto_disabled_at"])
        self.assertFalse(health.is_auto_disabled(channel))
