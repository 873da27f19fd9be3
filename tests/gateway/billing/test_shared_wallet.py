"""Reservations shared through a real redis-server by two "processes" on one database.

Each node is its own ``RedisState`` connection, ``SharedWallets`` and ``Settler``, as two
``twistd lockgate`` processes would have; the ledger is the real SQLite (or PostgreSQL) file.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import update
from twisted.internet import reactor
from twisted.internet.defer import DeferredList, ensureDeferred
from twisted.internet.task import deferLater

from gateway.ledger import wallet_scripts
from gateway.ledger.settlement import SettlementRecord, Settler
from gateway.ledger.shared_wallet import HOLDS, SharedWallets
from gateway.ledger.wallet import InsufficientBalance, KeyQuotaExceeded, WalletUnavailable
from gateway.state.redis import RedisState
from gateway.store import schema
from gateway.store.billing_writes import write_batch
from tests.gateway.billing.ledger_case import NOW, UNIT, LedgerCase
from tests.gateway.billing.test_wallet import one_unit_cost
from tests.support.redis_server import fresh_prefix, redis_server


class SharedWalletTests(LedgerCase):
    def setUp(self) -> Any:
        super().setUp()
        self.server = redis_server()
        self.prefix = fresh_prefix()
        # whatever a test did, the books must balance at its end
        self.addCleanup(lambda: ensureDeferred(self.verify_ledger()))

    async def node(self) -> tuple[SharedWallets, Settler]:
        state = RedisState.from_url(reactor, self.server.url(self.prefix))
        await state.start()
        self.addCleanup(state.stop)
        wallets = SharedWallets(self.db, state, self.clock)
        return wallets, Settler(self.db, self.clock, wallets)

    async def reserve_many(self, wallets: list[SharedWallets], n: int, user: int,
                           key: int | None, amount: int) -> tuple[list[Any], list[Any]]:
        ds = [wallets[i % len(wallets)].reserve(f"r{i}", user, key, amount) for i in range(n)]
        results = await DeferredList(ds, consumeErrors=True)
        return ([value for ok, value in results if ok],
                [value for ok, value in results if not ok])

    async def settle(self, settler: Settler, reservation: Any, tokens: int) -> None:
        settler.settle(reservation, SettlementRecord(
            request_id=reservation.request_id, user_id=reservation.user_id,
            api_key_id=reservation.key_id, cost=one_unit_cost(tokens)))
        await settler.flush()

    async def holds(self, wallets: SharedWallets) -> int:
        return int(await wallets.redis.raw_command("ZCARD", self.prefix + HOLDS))

    async def test_two_nodes_never_admit_more_than_the_balance(self) -> None:
        (a, _), (b, _) = await self.node(), await self.node()
        user = await self.add_user(10 * UNIT)
        admitted, refused = await self.reserve_many([a, b], 40, user, None, UNIT)
        assert len(admitted) == 10 and len(refused) == 30
        assert all(f.check(InsufficientBalance) for f in refused)
        assert {r.request_id for r in admitted} <= {f"r{i}" for i in range(40)}
        assert await self.holds(a) == 10

    async def test_two_nodes_never_admit_more_than_the_key_quota(self) -> None:
        (a, _), (b, _) = await self.node(), await self.node()
        user = await self.add_user(1000 * UNIT)
        key = await self.add_key(user, quota_nanos=10 * UNIT)
        admitted, refused = await self.reserve_many([a, b], 200, user, key, UNIT)
        assert len(admitted) == 10
        assert all(f.check(KeyQuotaExceeded) for f in refused)
        # the refusals reserved nothing from the wallet: 990 units are still there
        more, _ = await self.reserve_many([b], 1, user, None, 990 * UNIT)
        assert len(more) == 1

    async def test_a_commit_on_one_node_counts_on_the_other(self) -> None:
        (a, settler_a), (b, _) = await self.node(), await self.node()
        user = await self.add_user(10 * UNIT)
        key = await self.add_key(user, quota_nanos=8 * UNIT)
        first = await a.reserve("one", user, key, 4 * UNIT)
        await self.settle(settler_a, first, 3)  # charged 3: balance 7, key spent 3 of 8
        assert await self.balance(user) == 7 * UNIT
        assert sum(row["amount_nanos"] for row in await self.ledger(user)) == -3 * UNIT
        await b.reserve("two", user, key, 5 * UNIT)  # the key's 5 left, all of it
        with self.assertRaises(KeyQuotaExceeded):
            await b.reserve("three", user, key, 1)
        with self.assertRaises(InsufficientBalance):
            await b.reserve("four", user, None, 2 * UNIT + 1)  # 7 - 5 reserved = 2 left
        assert await self.holds(a) == 1  # "two" only: the settled debit is gone

    async def test_forget_on_one_node_reloads_for_all(self) -> None:
        (a, _), (b, _) = await self.node(), await self.node()
        user = await self.add_user(5 * UNIT)
        held = await b.reserve("x", user, None, 5 * UNIT)
        with self.assertRaises(InsufficientBalance):
            await b.reserve("y", user, None, 1)
        await self.set_balance(user, 20 * UNIT)  # a top-up, announced on one node
        a.forget_user(user)
        await a.answered()  # (a PING is no barrier: commands go out over a pool)
        await b.reserve("z", user, None, 15 * UNIT)  # 20 - the 5 still held
        with self.assertRaises(InsufficientBalance):
            await b.reserve("w", user, None, 1)
        b.release(held)
        await b.answered()
        await a.reserve("v", user, None, 5 * UNIT)

    async def test_forget_all_keys_reloads_every_key_on_its_next_use(self) -> None:
        (a, _), (b, _) = await self.node(), await self.node()
        user = await self.add_user(100 * UNIT)
        keys = [await self.add_key(user, quota_nanos=2 * UNIT) for _ in range(3)]
        for key in keys:
            await b.reserve(f"first{key}", user, key, 2 * UNIT)
            with self.assertRaises(KeyQuotaExceeded):
                await b.reserve(f"over{key}", user, key, 1)
        await self.db.transaction(lambda conn: conn.execute(
            update(schema.api_keys).values(quota_limit_nanos=5 * UNIT)))
        a.forget_all_keys()  # a key edit announced by hash only
        await a.answered()
        for key in keys:  # each reloads: 5 - the 2 still held
            await b.reserve(f"again{key}", user, key, 3 * UNIT)
            with self.assertRaises(KeyQuotaExceeded):
                await b.reserve(f"over2{key}", user, key, 1)

    async def test_a_load_that_raced_a_commit_installs_without_it(self) -> None:
        (a, settler_a), (b, _) = await self.node(), await self.node()
        user = await self.add_user(10 * UNIT)
        account = f"wallet:u:{user}"
        reservation = await a.reserve("c", user, None, UNIT)
        a.forget_user(user)  # (a top-up, say): the next admission loads again
        await a.answered()
        marks = await b.load_marks(account)  # B's load starts: it will read balance 10 ...
        await self.settle(settler_a, reservation, 1)  # ... but A commits 1 meanwhile
        await a.answered()
        assert await self.balance(user) == 9 * UNIT
        reply = await b.redis.run_script(wallet_scripts.INSTALL, [account],
                                         [*marks, 10 * UNIT, 0, "u"])
        assert reply == [1]  # installed, less the commit it may not have seen: 9
        await b.reserve("d", user, None, 9 * UNIT)
        with self.assertRaises(InsufficientBalance):
            await b.reserve("e", user, None, 1)

    async def test_a_load_that_saw_the_racing_commit_only_refuses_early(self) -> None:
        (a, settler_a), (b, _) = await self.node(), await self.node()
        user = await self.add_user(10 * UNIT)
        key = await self.add_key(user, quota_nanos=10 * UNIT)
        account = f"wallet:k:{key}"
        reservation = await a.reserve("c", user, key, UNIT)
        a.forget_key(key)
        await a.answered()
        marks = await b.load_marks(account)
        await self.settle(settler_a, reservation, 1)
        await a.answered()
        # the database read comes after the commit (spent 1) and the commit is taken off as
        # well: it counts twice, so 8 of the 9 left are admitted -- too few, never too many
        reply = await b.redis.run_script(wallet_scripts.INSTALL, [account],
                                         [*marks, 10 * UNIT, UNIT, "k"])
        assert reply == [1]
        await b.reserve("d", user, key, 8 * UNIT)
        with self.assertRaises(KeyQuotaExceeded):
            await b.reserve("e", user, key, 1)

    async def test_a_load_that_raced_a_forget_reads_again(self) -> None:
        (a, _), (b, _) = await self.node(), await self.node()
        user = await self.add_user(10 * UNIT)
        account = f"wallet:u:{user}"
        marks = await b.load_marks(account)  # B's load starts: it will read balance 10 ...
        await self.set_balance(user, 3 * UNIT)  # ... an admin sets 3 meanwhile
        a.forget_user(user)
        await a.answered()
        reply = await b.redis.run_script(wallet_scripts.INSTALL, [account],
                                         [*marks, 10 * UNIT, 0, "u"])
        assert reply == [0]  # the stale 10 is not installed
        with self.assertRaises(InsufficientBalance):
            await b.reserve("d", user, None, 3 * UNIT + 1)  # loaded again: 3
        await b.reserve("e", user, None, 3 * UNIT)

    async def test_a_busy_account_still_loads_after_a_forget(self) -> None:
        """Commits land every millisecond or so on node A while node B reloads the account
        after each forget: a load must not start over for every commit it races."""
        (a, settler_a), (b, _) = await self.node(), await self.node()
        user = await self.add_user(10**6 * UNIT)
        running = True
        commits = 0

        async def commit_back_to_back() -> None:
            nonlocal commits
            while running:
                settler_a.settle(None, SettlementRecord(
                    request_id=f"c{commits}", user_id=user, cost=one_unit_cost()))
                await settler_a.flush()
                commits += 1

        committing = ensureDeferred(commit_back_to_back())
        while commits < 3:
            await deferLater(reactor, 0, lambda: None)
        outcomes = []
        for i in range(20):
            b.forget_user(user)
            await b.answered()
            try:
                b.release(await b.reserve(f"r{i}", user, None, UNIT))
                outcomes.append("admitted")
            except WalletUnavailable:
                outcomes.append("503")
        running = False
        await committing
        await a.answered()
        await b.answered()
        assert outcomes == ["admitted"] * 20, (outcomes, commits)
        # and nothing was counted that the ledger does not hold
        spent = 10**6 * UNIT - await self.balance(user)
        assert spent == commits * UNIT
        b.forget_user(user)
        await b.answered()
        with self.assertRaises(InsufficientBalance):
            await b.reserve("all", user, None, 10**6 * UNIT - spent + 1)

    async def test_a_dead_nodes_holds_expire_and_a_live_nodes_do_not(self) -> None:
        (dead, _), (live, _) = await self.node(), await self.node()
        user = await self.add_user(10 * UNIT)
        await dead.reserve("lost", user, None, 6 * UNIT)
        await live.reserve("kept", user, None, 2 * UNIT)
        with self.assertRaises(InsufficientBalance):
            await live.reserve("more", user, None, 3 * UNIT)
        self.clock.advance(live.hold_seconds * 0.6)
        await live.renew()  # the live node renews its own; the dead one does not
        self.clock.advance(live.hold_seconds * 0.6)
        assert await live.sweep() == 1
        assert await self.holds(live) == 1
        await live.reserve("more", user, None, 8 * UNIT)  # 10 - 2 kept
        with self.assertRaises(InsufficientBalance):
            await live.reserve("again", user, None, 1)

    async def test_a_dead_nodes_committed_debit_is_not_spent_again(self) -> None:
        """A node committed a settlement and died before telling Redis.  When its queued debit
        expires, the balance must come from the database again: the number cached before the
        commit would let the fleet spend the debit a second time."""
        (dead, _), (live, _) = await self.node(), await self.node()
        user = await self.add_user(10 * UNIT)
        reservation = await dead.reserve("lost", user, None, 6 * UNIT)
        dead.settling(reservation, user, None, 6 * UNIT)
        await dead.stop()  # the settling update was answered; nothing is renewed from here on
        rows = [SettlementRecord(request_id="lost", user_id=user, cost=one_unit_cost(6)).row()]
        await self.db.transaction(write_batch, rows, NOW)  # committed; the report never goes
        assert await self.balance(user) == 4 * UNIT
        self.clock.advance(live.hold_seconds + 1)
        assert await live.sweep() == 1
        with self.assertRaises(InsufficientBalance):
            await live.reserve("over", user, None, 4 * UNIT + 1)
        await live.reserve("all", user, None, 4 * UNIT)

    async def test_two_nodes_settling_interleaved_reconcile_with_the_ledger(self) -> None:
        (a, settler_a), (b, settler_b) = await self.node(), await self.node()
        user = await self.add_user(10 * UNIT)
        key = await self.add_key(user, quota_nanos=100 * UNIT)
        admitted, refused = await self.reserve_many([a, b], 40, user, key, UNIT)
        assert len(admitted) == 10 and len(refused) == 30
        assert all(f.check(InsufficientBalance) for f in refused)
        # each node settles what it admitted (r<even> on A, r<odd> on B); two cost nothing
        free = {admitted[0].request_id, admitted[-1].request_id}
        for r in admitted:
            settler = settler_a if int(r.request_id[1:]) % 2 == 0 else settler_b
            settler.settle(r, SettlementRecord(
                request_id=r.request_id, user_id=user, api_key_id=key,
                cost=None if r.request_id in free else one_unit_cost()))
        await a.answered()
        await b.answered()
        # queued, not committed: every node already counts the 8 units as spent
        for node in (a, b):
            with self.assertRaises(InsufficientBalance):
                await node.reserve(f"early-{id(node)}", user, None, 2 * UNIT + 1)
        # B's batch commits first, then A's: the reports interleave across the two nodes
        await settler_b.flush()
        await settler_a.flush()
        await a.answered()
        await b.answered()
        balance = await self.balance(user)
        assert balance == 2 * UNIT
        ledger = await self.ledger(user)
        assert sum(row["amount_nanos"] for row in ledger) == balance - 10 * UNIT
        assert min(row["balance_after_nanos"] for row in ledger) == balance
        logs = [row for row in await self.logs() if row["user_id"] == user]
        assert len(logs) == 10 and sum(row["cost_nanos"] for row in logs) == 8 * UNIT
        assert (await self.key_row(key))["spent_nanos"] == 8 * UNIT
        assert await self.count(schema.ledger) == 8
        # Redis agrees with the ledger on both nodes: nothing held, exactly 2 units left
        assert await self.holds(a) == 0
        for node in (a, b):
            with self.assertRaises(InsufficientBalance):
                await node.reserve(f"over-{id(node)}", user, key, 2 * UNIT + 1)
        last = await b.reserve("last", user, key, 2 * UNIT)
        with self.assertRaises(InsufficientBalance):
            await a.reserve("none", user, key, 1)
        b.release(last)
        await b.answered()

    async def test_a_zero_cost_settlement_only_releases(self) -> None:
        (a, settler), _ = await self.node(), None
        user = await self.add_user(3 * UNIT)
        reservation = await a.reserve("z", user, None, 3 * UNIT)
        settler.settle(reservation, SettlementRecord(request_id="z", user_id=user))
        await settler.flush()
        await a.answered()
        assert await self.holds(a) == 0
        await a.reserve("z2", user, None, 3 * UNIT)

    async def test_unreachable_redis_fails_closed(self) -> None:
        state = RedisState(reactor, "127.0.0.1", 9, timeout=0.2)  # nothing listens on 9
        self.addCleanup(state.stop)
        wallets = SharedWallets(self.db, state, self.clock)
        user = await self.add_user(10 * UNIT)
        with self.assertRaises(WalletUnavailable):
            await wallets.reserve("n", user, None, UNIT)
