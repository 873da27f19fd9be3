"""Stripe Checkout against a loopback Stripe API: sessions, signed webhooks, credit once."""

from __future__ import annotations

from typing import Any

from twisted.internet.defer import ensureDeferred, gatherResults

from gateway.store import orders
from tests.console.payment_case import STRIPE_WEBHOOK, PaymentCase
from tests.support.stripe_api import stripe_signature


class StripeSessionTests(PaymentCase):
    async def test_session_is_created_with_the_order(self) -> None:
        await self.use_stripe()
        token = await self.user("alice")
        order = await self.order(token, amount="12.5", method="stripe")
        assert order["status"] == "pending" and order["currency"] == "USD"
        assert order["rmb_amount"] == "90.00"
        [form] = self.stripe.forms
        [request] = self.stripe.requests
        assert request["authorization"] == "Bearer sk_test_lockgate"
        assert request["idempotency_key"] == order["order_no"]
        assert form["mode"] == "payment"
        assert form["client_reference_id"] == order["order_no"]
        assert form["metadata[order_no]"] == order["order_no"]
        assert form["line_items[0][price_data][currency]"] == "usd"
        assert form["line_items[0][price_data][unit_amount]"] == "1250"
        assert form["line_items[0][quantity]"] == "1"
        assert form["success_url"].endswith(
            f"/api/payment/stripe/return?order_no={order['order_no']}&payment=success")
        assert int(form["expires_at"]) == int(self.clock.seconds()) + 120 * 60
        [session] = self.stripe.sessions.values()
        assert order["payment_url"] == session["url"]
        row = await self.stored(order["order_no"])
        assert row["provider_ref"] == session["id"]
        assert row["gateway_amount_nanos"] == 12_500_000_000

    async def test_cny_account_charges_the_local_amount(self) -> None:
        await self.use_stripe(payment_official_currency="CNY")
        token = await self.user("alice")
        order = await self.order(token, amount="10", method="stripe")
        assert order["currency"] == "CNY"
        assert self.stripe.forms[0]["line_items[0][price_data][unit_amount]"] == "7200"
        assert self.stripe.forms[0]["line_items[0][price_data][currency]"] == "cny"

    async def test_provider_failure_stores_a_failed_order_not_a_pending_one(self) -> None:
        await self.use_stripe()
        token = await self.user("alice")
        self.stripe.fail_next = 500
        response = await self.call("POST", "/api/user/payment/orders",
                                   {"amount": "10", "method": "stripe"}, token=token)
        assert response.status == 502
        assert response.json()["error"] == "Failed to build payment URL"
        await self.use_stripe(payment_stripe_secret_key="sk_test_wrong")
        response = await self.call("POST", "/api/user/payment/orders",
                                   {"amount": "10", "method": "stripe"}, token=token)
        assert response.status == 502
        rows = await self.all_orders()
        assert [r["status"] for r in rows] == [orders.FAILED, orders.FAILED]
        assert {r["failure_reason"] for r in rows} == {"status 500", "status 401"}
        assert all(r["payment_url"] == "" for r in rows)
        listed = (await self.call("GET", "/api/user/payment/orders", token=token)).json()
        assert [o["status"] for o in listed] == ["failed", "failed"]

    async def test_unreachable_api_fails_the_order(self) -> None:
        await self.use_stripe(payment_stripe_base_url="http://127.0.0.1:1")
        token = await self.user("alice")
        response = await self.call("POST", "/api/user/payment/orders",
                                   {"amount": "10", "method": "stripe"}, token=token)
        assert response.status == 502
        assert [r["status"] for r in await self.all_orders()] == [orders.FAILED]


class StripeWebhookTests(PaymentCase):
    async def stripe_order(self, token: str, amount: str = "10",
                           **extra: Any) -> tuple[dict[str, Any], str]:
        order = await self.order(token, amount=amount, method="stripe", **extra)
        session_id = (await self.stored(order["order_no"]))["provider_ref"]
        return order, session_id

    def now(self) -> int:
        return int(self.clock.seconds())

    async def test_paid_flow_credits_once_and_replays_change_nothing(self) -> None:
        await self.use_stripe()
        token = await self.user("alice")
        order, session_id = await self.stripe_order(token, "10")
        payload = self.stripe.completed_event(session_id)
        signature = stripe_signature(payload, STRIPE_WEBHOOK, self.now())
        url = self.notify_url("stripe")
        assert await self.stripe.deliver(url, payload, signature) == (200, "success")
        assert await self.balance(token) == "10"
        row = await self.stored(order["order_no"])
        assert row["status"] == orders.PAID and row["notify_payload"] == payload.decode()
        for _ in range(20):
            assert await self.stripe.deliver(url, payload, signature) == (200, "success")
        alias = f"{self.base}/api/payment/stripe/webhook"
        replies = await gatherResults([ensureDeferred(self.stripe.deliver(
            alias if i % 2 else url, payload, signature)) for i in range(20)])
        assert set(replies) == {(200, "success")}
        # a fresh, differently signed event for the same session is a replay too
        assert await self.stripe.complete(session_id, url, timestamp=self.now() + 5) == (
            200, "success")
        assert await self.balance(token) == "10"
        ledger = await self.ledger()
        assert [(e["ref"], e["amount_nanos"]) for e in ledger] == [
            (order["order_no"], 10_000_000_000)]

    async def test_forged_stale_and_mismatched_webhooks_change_nothing(self) -> None:
        await self.use_stripe()
        token = await self.user("alice")
        order, session_id = await self.stripe_order(token, "10")
        url = self.notify_url("stripe")
        now = self.now()
        good = self.stripe.completed_event(session_id)
        tampered = good.replace(b'"amount_total":1000', b'"amount_total":100000')
        assert tampered != good
        cases = [
            (good, stripe_signature(good, "whsec_guess", now)),  # forged secret
            (good, stripe_signature(good, STRIPE_WEBHOOK, now - 301)),  # too old
            (good, stripe_signature(good, STRIPE_WEBHOOK, now + 301)),  # from the future
            (good, ""),  # no header
            (good, f"t={now}"),  # no v1
            (tampered, stripe_signature(good, STRIPE_WEBHOOK, now)),  # changed after signing
        ]
        for payload, signature in cases:
            assert await self.stripe.deliver(url, payload, signature) == (400, "fail"), \
                signature
        # genuinely signed, but the amount or currency does not match the order
        for event in ({"amount_total": 999}, {"currency": "eur"}, {"amount_total": 100000}):
            status = await self.stripe.complete(session_id, url, timestamp=now, **event)
            assert status == (400, "fail"), event
        assert await self.balance(token) == "0"
        assert await self.ledger() == []
        row = await self.stored(order["order_no"])
        assert row["status"] == orders.PENDING and row["notify_payload"] is None

    async def test_unpaid_and_other_events_are_acknowledged_only(self) -> None:
        await self.use_stripe()
        token = await self.user("alice")
        order, session_id = await self.stripe_order(token)
        url = self.notify_url("stripe")
        assert await self.stripe.complete(session_id, url, timestamp=self.now(),
                                          payment_status="unpaid") == (200, "success")
        assert await self.stripe.complete(session_id, url, timestamp=self.now(),
                                          event_type="checkout.session.expired") == (
            200, "success")
        assert await self.balance(token) == "0"
        assert (await self.stored(order["order_no"]))["status"] == orders.PENDING
        assert await self.stripe.complete(
            session_id, url, timestamp=self.now(),
            event_type="checkout.session.async_payment_succeeded") == (200, "success")
        assert await self.balance(token) == "10"

    async def test_event_for_an_epay_order_is_refused(self) -> None:
        await self.use_both()
        token = await self.user("alice")
        epay_order = await self.order(token, method="alipay")
        self.stripe.sessions["cs_test_forged"] = {
            "id": "cs_test_forged", "object": "checkout.session",
            "client_reference_id": epay_order["order_no"],
            "metadata": {"order_no": epay_order["order_no"]},
            "currency": "cny", "amount_total": 7200}
        assert await self.stripe.complete("cs_test_forged", self.notify_url("stripe"),
                                          timestamp=self.now()) == (400, "fail")
        assert await self.balance(token) == "0"
        assert (await self.stored(epay_order["order_no"]))["status"] == orders.PENDING

    async def test_late_event_after_expiry_is_recorded_and_refused(self) -> None:
        await self.use_stripe(payment_order_ttl_minutes="60")
        token = await self.user("alice")
        order, session_id = await self.stripe_order(token)
        self.clock.advance(61 * 60)
        assert await self.stripe.complete(session_id, self.notify_url("stripe"),
                                          timestamp=self.now()) == (400, "fail")
        row = await self.stored(order["order_no"])
        assert row["status"] == orders.EXPIRED and row["notified_at"] is not None
        assert await self.balance(token) == "0"

    async def test_return_redirects_without_crediting(self) -> None:
        await self.use_stripe()
        token = await self.user("alice")
        order, _session = await self.stripe_order(token)
        status, location = await self.redirect_of(
            f"/api/payment/stripe/return?order_no={order['order_no']}&payment=success")
        assert status == 302
        assert location == f"/dashboard/wallet?payment=success&order_no={order['order_no']}"
        status, location = await self.redirect_of(
            "/api/payment/stripe/return?order_no=x&payment=%3Cscript%3E")
        assert location == "/dashboard/wallet?payment=pending&order_no=x"
        assert await self.balance(token) == "0"


class StripeWebhookPostgresTests(StripeWebhookTests):
    backend = "postgresql"
