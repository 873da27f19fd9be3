"""What a /v1 call keeps between requests (``gateway.v1.call``) is never served stale.

- ``user_channel_limit``: the limiter's view of a user channel, kept per catalog record.  A
  change of the user channel's rate limit reloads the catalog; the next request must count
  against the new limit at once (a cache keyed by the user channel's id alone fails here).
- ``active_group_ids``: the clock is read only for users with an expiring membership; such a
  membership still stops counting the moment it expires (a fast path that never read the
  clock fails here).
"""

from __future__ import annotations

import dataclasses
from datetime import timedelta

from gateway.store import schema
from gateway.store.gateway_users import GatewayUser
from gateway.v1.call import active_group_ids, user_channel_limit
from tests.gateway.gateway_case import GatewayTestCase

CHAT = {"model": "gpt-fake", "messages": [{"role": "user", "content": "hi"}]}


class UserChannelLimitCacheTests(GatewayTestCase):
    async def chat(self):  # type: ignore[no-untyped-def]
        return await self.call("POST", "/v1/chat/completions", CHAT,
                               headers={"Authorization": f"Bearer {self.api_key}"})

    async def test_a_changed_limit_applies_to_the_next_request(self) -> None:
        await self.provision()
        first = await self.chat()
        assert first.status == 200 and first.header("X-RateLimit-Limit") is None
        await self.catalog.set(schema.user_channels, self.uc_id, rate_limit_enabled=True,
                               rate_limit_requests_per_minute=5, rate_limit_burst=1)
        limited = await self.chat()
        assert limited.status == 200
        assert (limited.header("X-RateLimit-Limit"), limited.header("X-RateLimit-Remaining")) \
            == ("6", "5")
        await self.catalog.set(schema.user_channels, self.uc_id,
                               rate_limit_requests_per_minute=1, rate_limit_burst=0)
        # one call counted in this window already: the new capacity of 1 is spent
        refused = await self.chat()
        assert refused.status == 429 and refused.header("X-RateLimit-Limit") == "1"
        await self.catalog.set(schema.user_channels, self.uc_id, rate_limit_enabled=False)
        assert (await self.chat()).header("X-RateLimit-Limit") is None

    def test_kept_per_record_not_per_id(self) -> None:
        snapshot_uc = self._user_channel()
        limit = user_channel_limit(snapshot_uc)
        assert user_channel_limit(snapshot_uc) is limit
        assert (limit.user_channel_id, limit.enabled, limit.requests_per_minute,
                limit.burst) == (41, True, 10, 2)
        reloaded = dataclasses.replace(snapshot_uc, rate_limit_requests_per_minute=3,
                                       rate_limit_burst=0)
        assert user_channel_limit(reloaded).capacity == 3
        # an equal record from another reload is a new record: never the older object
        same_values = dataclasses.replace(reloaded)
        assert user_channel_limit(same_values) == user_channel_limit(reloaded)
        assert user_channel_limit(snapshot_uc).capacity == 12

    @staticmethod
    def _user_channel():  # type: ignore[no-untyped-def]
        from decimal import Decimal

        from gateway.catalog.snapshot import UserChannel
        return UserChannel(id=41, name="uc", description="", multiplier=Decimal(1),
                           routing_algorithm="priority", enabled=True, rate_limit_enabled=True,
                           rate_limit_requests_per_minute=10, rate_limit_burst=2)


class ActiveGroupsTests(GatewayTestCase):
    def test_an_expiring_membership_stops_counting_when_it_expires(self) -> None:
        now = self.ctx.now()
        user = GatewayUser(id=5, enabled=True, is_admin=False, token_version=0,
                           primary_group_id=1,
                           memberships=((2, None), (3, now + timedelta(seconds=10))))
        assert active_group_ids(self.ctx, user) == [2, 3]
        self.clock.advance(11)
        assert active_group_ids(self.ctx, user) == [2]
        expired_only = dataclasses.replace(user, memberships=((3, now),))
        assert active_group_ids(self.ctx, expired_only) == [1]

    def test_without_expiry_it_equals_the_users_own_answer(self) -> None:
        for memberships in ((), ((2, None),), ((2, None), (7, None))):
            user = GatewayUser(id=5, enabled=True, is_admin=False, token_version=0,
                               primary_group_id=1, memberships=memberships)
            assert active_group_ids(self.ctx, user) == user.active_group_ids(self.ctx.now())
