"""The in-memory catalog: candidates, ordering, visibility, effective prices, reload on announce."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal as D

from twisted.internet.defer import Deferred

from gateway.billing.pricing import active_group_ids
from gateway.catalog.cache import CatalogCache
from gateway.catalog.snapshot import CatalogSnapshot
from gateway.invalidation import CATALOG, Invalidation
from gateway.store import schema
from tests.support.app import AppTestCase
from tests.support.catalog_fixtures import CatalogBuilder, nanos


class CatalogSnapshotTests(AppTestCase):
    def setUp(self) -> None:
        super().setUp()
        self.build = CatalogBuilder(self.ctx)

    @property
    def snap(self) -> CatalogSnapshot:
        return self.ctx.catalog.snapshot

    async def test_candidates_need_all_four_records_enabled(self):
        uc = await self.build.user_channel("standard")
        off_uc = await self.build.user_channel("closed", enabled=False)
        up = await self.build.channel(uc, "up")
        off_up = await self.build.channel(uc, "up-off", enabled=False)
        orphan = await self.build.channel(None, "orphan")
        in_closed = await self.build.channel(off_uc, "in-closed")
        m = await self.build.model("m1")
        off_model = await self.build.model("m-off", enabled=False)
        good = await self.build.config(up, m)
        await self.build.config(up, m, upstream="other", enabled=False)
        await self.build.config(off_up, m)
        await self.build.config(orphan, m)
        await self.build.config(in_closed, m)
        await self.build.config(up, off_model)
        await self.build.announce()
        found = self.snap.candidates("m1")
        assert [c.config.id for c in found] == [good]
        assert found[0].upstream_model == "m1"
        assert self.snap.candidates(" models/m1 ") == found
        assert self.snap.candidates("m-off") == ()
        assert self.snap.model_names() == ["m1"]

    async def test_candidate_order_priority_weight_id(self):
        uc = await self.build.user_channel("standard")
        m = await self.build.model("m1")
        ids = {}
        for name, priority, weight in [("a", 1, 1), ("b", 5, 1), ("c", 5, 9), ("d", 1, 1)]:
            ids[name] = await self.build.channel(uc, name, priority=priority, weight=weight)
            await self.build.config(ids[name], m, upstream=f"up-{name}")
        await self.build.announce()
        order = [c.channel.name for c in self.snap.candidates("m1")]
        assert order == ["c", "b", "a", "d"]
        assert self.snap.candidates("m1")[0].upstream_model == "up-c"
        assert self.snap.candidates("m1")[0].channel.api_key == "up-key"

    async def test_visibility_open_group_and_user_grants(self):
        admin = await self.setup_admin()
        me = (await self.call("GET", "/api/user/me", token=admin)).json()
        open_uc = await self.build.user_channel("open")
        vip = await self.build.group("vip")
        by_group = await self.build.user_channel("by-group")
        by_user = await self.build.user_channel("by-user")
        await self.build.grant(by_group, group_id=vip)
        await self.build.grant(by_user, user_id=me["id"])
        await self.build.announce()
        names = [uc.name for uc in self.snap.visible_user_channels(me["id"], [me["group_id"]])]
        assert names == ["by-user", "open"]
        names = [uc.name for uc in self.snap.visible_user_channels(999, [vip])]
        assert names == ["by-group", "open"]
        assert open_uc in self.snap.user_channels

    async def test_price_change_plus_announce_is_visible_at_once(self):
        ids = await self.build.simple("m1", input="0.3", output="1.2", uc_multiplier="1.5")
        group = await self.build.group("g", "0.8")
        await self.build.announce()
        rates = self.snap.group_rates([group])
        before = self.snap.candidates("m1")[0].prices_for(rates)
        assert before.prices["input_price"] == D("0.36")
        await self.build.set(schema.models, ids["model"], input_price_nanos=nanos("0.5"))
        after = self.snap.candidates("m1")[0].prices_for(rates)
        assert after.prices["input_price"] == D("0.6")
        await self.build.set(schema.channel_models, ids["config"],
                             input_price_nanos=nanos("0.25"))
        assert self.snap.candidates("m1")[0].prices_for(rates).prices["input_price"] == D("0.3")
        await self.build.set(schema.user_channels, ids["user_channel"], enabled=False)
        assert self.snap.candidates("m1") == ()

    async def test_group_multiplier_rows_take_precedence(self):
        ids = await self.build.simple("m1", input="10")
        g1 = await self.build.group("g1", "2")
        g2 = await self.build.group("g2", "0")
        await self.build.channel_multiplier(ids["channel"], g1, "0.7")
        await self.build.config_multiplier(ids["config"], g1, "0.5")
        await self.build.channel_multiplier(ids["channel"], g2, "1.3")
        await self.build.announce()
        candidate = self.snap.candidates("m1")[0]
        assert candidate.prices_for(self.snap.group_rates([g1])).group_multiplier == D("0.5")
        assert candidate.prices_for(self.snap.group_rates([g2])).group_multiplier == D("1.3")
        both = self.snap.group_rates([g1, g2])
        assert candidate.prices_for(both, "min").prices["input_price"] == D("5")
        assert candidate.prices_for(both, "max").prices["input_price"] == D("13")
        g3 = await self.build.group("g3", "0")
        await self.build.announce()
        assert candidate.prices_for(self.snap.group_rates([g3])).group_multiplier == 1
        assert self.snap.group_rates([12345]) == []

    async def test_older_reload_never_replaces_a_newer_one(self):
        await self.build.simple("m1")
        cache = CatalogCache(self.ctx.db)
        await cache.reload()
        newer = cache.snapshot
        assert newer.model_names() == ["m1"]
        # a read that started before the one installed finishes late: it is ignored
        cache._install(0, CatalogSnapshot())
        assert cache.snapshot is newer

    async def test_expired_membership_does_not_grant_access(self):
        admin = await self.setup_admin()
        me = (await self.call("GET", "/api/user/me", token=admin)).json()
        vip = await self.build.group("vip")
        uc = await self.build.user_channel("vip-only")
        await self.build.grant(uc, group_id=vip)
        await self.build.membership(me["id"], vip, self.ctx.now() - timedelta(seconds=1))
        await self.build.announce()
        groups = active_group_ids([(vip, self.ctx.now() - timedelta(seconds=1))],
                                  me["group_id"], self.ctx.now())
        assert self.snap.visible_user_channels(me["id"], groups) == []

    async def test_an_announcement_from_another_node_reloads(self):
        ids = await self.build.simple("m1")
        other_node = Invalidation(self.ctx.state)
        self.addCleanup(other_node.close)
        reloaded = Deferred()
        self.ctx.invalidation.on(CATALOG, lambda _detail: self._after_reload(reloaded))
        await self.ctx.db.transaction(
            lambda conn: conn.execute(schema.models.update().values(enabled=False)))
        await other_node.announce(CATALOG)
        await reloaded
        assert self.snap.candidates("m1") == ()
        assert ids["model"] in self.snap.models

    async def _after_reload(self, d: Deferred) -> None:
        # one SQLite worker thread runs transactions in order, and results come back in order:
        # once this empty one returns, the cache's reload has been installed
        await self.ctx.db.transaction(lambda conn: None)
        d.callback(None)

    async def test_candidates_for_a_user_and_key(self):
        open_uc = await self.build.user_channel("open")
        vip = await self.build.group("vip")
        closed = await self.build.user_channel("closed")
        other = await self.build.user_channel("other")
        await self.build.grant(closed, group_id=vip)
        m = await self.build.model("m1")
        only_closed = await self.build.model("m2")
        for uc in (open_uc, closed, other):
            await self.build.config(await self.build.channel(uc, f"up-{uc}"), m)
        await self.build.config(await self.build.channel(closed, "up-m2"), only_closed)
        await self.build.announce()

        def ucs(found):
            return [c.user_channel.id for c in found]

        assert ucs(self.snap.candidates_for("m1", 7, [999])) == [open_uc, other]
        assert ucs(self.snap.candidates_for("m1", 7, [vip])) == [open_uc, closed, other]
        assert ucs(self.snap.candidates_for("m1", 7, [vip], [other, closed])) == [closed, other]
        assert ucs(self.snap.candidates_for("models/m1", 7, [999], [closed])) == []
        assert self.snap.models_for(7, [999]) == ["m1"]
        assert self.snap.models_for(7, [vip]) == ["m1", "m2"]
        assert self.snap.models_for(7, [vip], [other]) == ["m1"]
