"""EPay notifications against a loopback EPay gateway: credit once, refuse anything else."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import urlencode

from twisted.internet.defer import ensureDeferred, gatherResults

from gateway.jobs.order_expiry import OrderExpiry
from gateway.store import orders
from tests.console.payment_case import EPAY_KEY, EPAY_PID, PaymentCase
from tests.gateway.gateway_case import GatewayTestCase
from tests.support.epay_gateway import query_of


class EpayNotifyTests(PaymentCase):
    async def paid_order(self, token: str, amount: str = "10") -> dict[str, Any]:
        order = await self.order(token, amount=amount)
        assert await self.epay.open(order["payment_url"]) == 200
        return order

    async def test_paid_flow_credits_once_and_replays_change_nothing(self) -> None:
        await self.use_epay()
        token = await self.user("alice")
        order = await self.paid_order(token, "10")
        notice = self.epay.notification(order["order_no"])
        assert notice["money"] == "72.00"
        url = self.notify_url("yipay")
        assert await self.epay.send(url, notice) == (200, "success")
        assert await self.balance(token) == "10"
        row = await self.stored(order["order_no"])
        assert row["status"] == orders.PAID and row["paid_at"] is not None
        assert row["provider_ref"] == notice["trade_no"]
        assert "out_trade_no=" + order["order_no"] in row["notify_payload"]
        for _ in range(20):
            assert await self.epay.send(url, notice) == (200, "success")
        # replays arriving all at once, also through the POST form and the epay alias
        replies = await gatherResults([ensureDeferred(self.epay.send(
            url if i % 2 else self.notify_url("epay"), notice,
            method="POST" if i % 3 else "GET")) for i in range(20)])
        assert set(replies) == {(200, "success")}
        assert await self.balance(token) == "10"
        ledger = await self.ledger()
        assert len(ledger) == 1
        assert ledger[0]["ref"] == order["order_no"]
        assert ledger[0]["amount_nanos"] == 10_000_000_000
        assert ledger[0]["balance_after_nanos"] == 10_000_000_000
        detail = (await self.call("GET", f"/api/user/payment/orders/{order['order_no']}",
                                  token=token)).json()
        assert detail["status"] == "paid" and detail["paid_at"] is not None

    async def test_forged_and_mismatched_notifications_change_nothing(self) -> None:
        await self.use_epay()
        token = await self.user("alice")
        order = await self.paid_order(token, "10")
        no = order["order_no"]
        cases = [
            self.epay.notification(no, key="guessed-key"),  # forged signature
            self.epay.notification(no, money="720.00"),  # wrong amount (signed)
            self.epay.notification(no, money="10.00"),  # platform amount, not CNY
            self.epay.notification(no, pid="9999"),  # another merchant
        ]
        unsigned = self.epay.notification(no)
        del unsigned["sign"]
        cases.append(unsigned)
        tampered = self.epay.notification(no)
        tampered["money"] = "1000.00"  # changed after signing
        cases.append(tampered)
        for params in cases:
            for method in ("GET", "POST"):
                status, text = await self.epay.send(self.notify_url("yipay"), params,
                                                    method=method)
                assert (status, text) == (400, "fail"), params
        assert await self.balance(token) == "0"
        assert await self.ledger() == []
        row = await self.stored(no)
        assert row["status"] == orders.PENDING and row["notify_payload"] is None

    async def test_unpaid_status_is_acknowledged_but_not_credited(self) -> None:
        await self.use_epay()
        token = await self.user("alice")
        order = await self.paid_order(token)
        assert await self.epay.notify(order["order_no"], trade_status="WAIT_BUYER_PAY") == (
            200, "success")
        assert await self.balance(token) == "0"
        assert (await self.stored(order["order_no"]))["status"] == orders.PENDING
        assert await self.epay.notify(order["order_no"]) == (200, "success")
        assert await self.balance(token) == "10"

    async def test_unknown_order_is_refused(self) -> None:
        await self.use_epay()
        token = await self.user("alice")
        order = await self.paid_order(token)
        params = self.epay.notification(order["order_no"])
        self.epay.orders["PAY20990101000000DEADBEEF"] = self.epay.orders[order["order_no"]]
        other = self.epay.notification("PAY20990101000000DEADBEEF")
        assert await self.epay.send(self.notify_url("yipay"), other) == (400, "fail")
        assert await self.balance(token) == "0"
        assert await self.epay.send(self.notify_url("yipay"), params) == (200, "success")

    async def test_notification_for_a_stripe_order_is_refused(self) -> None:
        await self.use_both()
        token = await self.user("alice")
        card = await self.order(token, method="stripe", channel_id="ch-card")
        # a genuinely signed EPay notification naming the Stripe order's number and amount
        self.epay.orders[card["order_no"]] = {
            "type": "alipay", "name": "x", "money": "10.00",
            "notify_url": self.notify_url("yipay")}
        assert await self.epay.notify(card["order_no"]) == (400, "fail")
        assert await self.balance(token) == "0"
        assert (await self.stored(card["order_no"]))["status"] == orders.PENDING

    async def test_notification_signed_by_another_channel_is_refused(self) -> None:
        channel = {"provider": "yipay", "methods": ["alipay"]}
        await self.settings(payment_enabled="true", payment_channels=[
            {**channel, "id": "ch-a", "config": {
                "gateway_url": self.epay.base_url, "pid": EPAY_PID, "key": EPAY_KEY}},
            {**channel, "id": "ch-b", "config": {
                "gateway_url": self.epay.base_url, "pid": EPAY_PID, "key": "key-of-b"}},
        ])
        token = await self.user("alice")
        order = await self.order(token, channel_id="ch-b")
        self.epay.orders[order["order_no"]] = query_of(order["payment_url"])
        # signed with channel A's key: genuine for A, but the order belongs to B
        assert await self.epay.notify(order["order_no"]) == (400, "fail")
        assert await self.balance(token) == "0"
        assert await self.epay.notify(order["order_no"], key="key-of-b") == (200, "success")
        assert await self.balance(token) == "10"

    async def test_late_notification_for_expired_order_is_recorded_and_refused(self) -> None:
        await self.use_epay(payment_order_ttl_minutes="15")
        token = await self.user("alice")
        order = await self.paid_order(token)
        self.clock.advance(16 * 60)
        for _ in range(3):
            assert await self.epay.notify(order["order_no"]) == (400, "fail")
        row = await self.stored(order["order_no"])
        assert row["status"] == orders.EXPIRED
        assert row["notified_at"] is not None and row["notify_payload"]
        assert row["paid_at"] is None
        assert await self.balance(token) == "0"
        assert await self.ledger() == []

    async def test_return_redirects_without_crediting(self) -> None:
        await self.use_epay()
        token = await self.user("alice")
        order = await self.paid_order(token)
        params = self.epay.notification(order["order_no"])
        status, location = await self.redirect_of("/api/payment/yipay/return?"
                                                  + urlencode(params))
        assert status == 302
        assert location == f"/dashboard/wallet?payment=success&order_no={order['order_no']}"
        forged = self.epay.notification(order["order_no"], key="nope")
        status, location = await self.redirect_of("/api/payment/yipay/return?"
                                                  + urlencode(forged))
        assert status == 302 and "payment=pending" in location
        assert await self.balance(token) == "0"


class EpayRaceTests(PaymentCase):
    """Notifications (each sent three times at once) racing the expiry job over many orders."""

    orders_count = 12

    async def test_concurrent_notify_and_expiry_reach_one_final_state(self) -> None:
        await self.use_epay(payment_order_ttl_minutes="30")
        token = await self.user("alice")
        created = []
        for _ in range(self.orders_count):
            order = await self.order(token, amount="3")
            await self.epay.open(order["payment_url"])
            created.append(order)
        # the app's clock is still inside the TTL (notifications may pay); the expiry job
        # runs on a clock past it.  Notifications go newest order first while expiry closes
        # oldest first, one order per transaction, so they meet somewhere in the middle.
        late = type("LateClock", (), {"seconds": lambda _self: self.clock.seconds() + 3600})()
        expiry = OrderExpiry(self.ctx.db, late)

        async def expire_one_by_one() -> list[str]:
            closed: list[str] = []
            while batch := await self.ctx.db.transaction(orders.expire_due, expiry.now(), 1):
                closed.extend(batch)
            return closed

        work = [ensureDeferred(self.epay.notify(o["order_no"], method="POST"))
                for o in reversed(created) for _ in range(3)]
        work.append(ensureDeferred(expire_one_by_one()))
        results = await gatherResults(work)
        replies, closed = results[:-1], results[-1]
        paid = []
        for index, order in enumerate(reversed(created)):
            row = await self.stored(order["order_no"])
            answers = set(replies[index * 3:index * 3 + 3])
            assert row["status"] in (orders.PAID, orders.EXPIRED), row
            if row["status"] == orders.PAID:
                paid.append(order["order_no"])
                assert order["order_no"] not in closed
                assert answers == {(200, "success")}
            else:
                assert order["order_no"] in closed
                assert answers == {(400, "fail")}
        ledger = await self.ledger()
        assert sorted(entry["ref"] for entry in ledger) == sorted(paid)
        assert len({entry["ref"] for entry in ledger}) == len(ledger)
        assert await self.balance(token) == str(3 * len(paid))
        # and once everything settled, the job finds nothing more to close
        assert await expiry.run_once() == []
        now = datetime.fromtimestamp(self.clock.seconds(), UTC)
        assert all(r["expires_at"] <= now + timedelta(minutes=30)
                   for r in await self.all_orders())


class EpayRacePostgresTests(EpayRaceTests):
    backend = "postgresql"


class TopupUnlocksGatewayTests(PaymentCase, GatewayTestCase):
    """A top-up reaches the gateway's in-memory wallet at once (USERS announcement)."""

    async def chat(self) -> int:
        response = await self.call(
            "POST", "/v1/chat/completions",
            {"model": "gpt-fake", "max_tokens": 5,
             "messages": [{"role": "user", "content": "hello there"}]},
            headers={"Authorization": f"Bearer {self.api_key}"})
        return response.status

    async def test_balance_from_a_paid_order_is_spendable_and_ledgered(self) -> None:
        await self.provision(balance="0")
        await self.use_epay()
        assert await self.chat() == 402
        order = await self.order(self.user_token, amount="5")
        await self.epay.open(order["payment_url"])
        assert await self.epay.notify(order["order_no"]) == (200, "success")
        assert await self.chat() == 200
        await self.gateway.settler.flush()
        balance = await self.balance_nanos(self.user_id)
        assert 0 < balance < 5_000_000_000
        assert await self.ledger_sum(self.user_id) == balance
