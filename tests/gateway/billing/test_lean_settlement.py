"""SQLite settlement batches commit on the lean DB-API path, and fall back to Core when needed.

Why: the batch's Python holds the GIL on the database thread while the reactor waits (issue 22,
goal 3); ``write_batch_lean`` skips SQLAlchemy's transaction machinery.  A batch with a part
still written through Core (a subscriber's quota, a referral commission) must settle exactly
as before: it is rolled back before writing anything and run through ``write_batch``.
These run real batches on a real SQLite file and count the commits of each path.
"""

from __future__ import annotations

from tests.gateway.billing.ledger_case import UNIT
from tests.gateway.billing.test_subscription_and_referral import (
    TENTH,
    SubscriptionCase,
    record,
)


class LeanSettlementTests(SubscriptionCase):
    async def test_a_plain_batch_commits_once_outside_sqlalchemy(self) -> None:
        user = await self.add_user(5 * UNIT)
        core, lean = self.core_commits, self.db.driver_commits
        charges = await self.settle(record("p1", user, 3), record("p2", user, 4))
        assert [c.charged_nanos for c in charges] == [3 * TENTH, 4 * TENTH]
        assert (self.db.driver_commits - lean, self.core_commits - core) == (1, 0)
        assert await self.assert_ledger_matches(user, 5 * UNIT) == 43 * TENTH
        assert len(await self.logs()) == 2

    async def test_a_subscriber_in_the_batch_settles_through_core_once(self) -> None:
        plain = await self.add_user(5 * UNIT)
        subscriber = await self.add_user(5 * UNIT)
        sub = await self.add_subscription(subscriber, await self.add_plan(10), 10)
        core, lean = self.core_commits, self.db.driver_commits
        charges = await self.settle(record("q1", plain, 2), record("q2", subscriber, 15))
        assert [c.charged_nanos for c in charges] == [2 * TENTH, 15 * TENTH]
        assert (self.db.driver_commits - lean, self.core_commits - core) == (0, 1)
        assert (await self.subscription(sub))["balance_nanos"] == 0  # quota first
        assert await self.assert_ledger_matches(subscriber, 5 * UNIT) == 45 * TENTH
        assert await self.assert_ledger_matches(plain, 5 * UNIT) == 48 * TENTH
        assert sorted(log["request_id"] for log in await self.logs()) == ["q1", "q2"]

    async def test_referral_commissions_settle_through_core_and_a_repeat_is_a_duplicate(
            self) -> None:
        inviter = await self.add_user(0)
        invitee = await self.add_user(5 * UNIT)
        await self.invite(inviter, invitee)
        await self.enable_referral("0.1")
        core = self.core_commits
        [charge] = await self.settle(record("r1", invitee, 10))
        assert charge.charged_nanos == 10 * TENTH and self.core_commits - core == 1
        assert await self.balance(inviter) == TENTH  # 10 % of the wallet's 1 unit
        assert await self.assert_ledger_matches(inviter, 0) == TENTH
        again = self.new_settler()  # a restarted node: the database decides
        repeat = again.settle(None, record("r1", invitee, 10))
        await again.flush()
        assert (await repeat).duplicate
        assert await self.assert_ledger_matches(invitee, 5 * UNIT) == 4 * UNIT
