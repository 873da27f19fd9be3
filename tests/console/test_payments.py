"""Payment config and top-up orders: validation, listing, ownership, expiry (contract §4.7)."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal

from gateway.store import orders
from tests.console.payment_case import PaymentCase
from tests.support.epay_gateway import epay_sign, query_of


class PaymentConfigTests(PaymentCase):
    async def test_disabled_by_default(self) -> None:
        token = await self.user("alice")
        body = (await self.call("GET", "/api/user/payment/config", token=token)).json()
        assert body["enabled"] is False
        assert body["recharge_presets"] == [] and body["methods"] == []
        refused = await self.call("POST", "/api/user/payment/orders",
                                  {"amount": "10", "method": "alipay"}, token=token)
        assert refused.status == 400
        assert refused.json()["error"] == "Payment channel is not enabled"
        assert await self.all_orders() == []

    async def test_config_requires_a_session(self) -> None:
        assert (await self.call("GET", "/api/user/payment/config")).status == 401
        assert (await self.call("GET", "/api/user/payment/orders")).status == 401

    async def test_enabled_config_reports_channels_and_valid_presets(self) -> None:
        await self.use_epay(payment_min_recharge_amount="5",
                            payment_recharge_presets=["1", "5", "20", "x", "20"],
                            payment_usd_to_rmb_rate="7.10")
        token = await self.user("alice")
        body = (await self.call("GET", "/api/user/payment/config", token=token)).json()
        assert body == {
            "enabled": True, "currency_display_name": "$", "usd_to_rmb_rate": "7.1",
            "min_recharge_amount": "5", "recharge_presets": ["5", "20"],
            "methods": ["alipay", "wxpay"],
            "channels": [{"id": "legacy", "name": "Default payment channel",
                          "provider": "yipay", "methods": ["alipay", "wxpay"]}]}

    async def test_two_channels_union_methods(self) -> None:
        await self.use_both()
        token = await self.user("alice")
        body = (await self.call("GET", "/api/user/payment/config", token=token)).json()
        assert body["methods"] == ["alipay", "stripe"]
        assert [c["id"] for c in body["channels"]] == ["ch-epay", "ch-card"]


class OrderCreationTests(PaymentCase):
    async def test_epay_order_has_signed_url_and_rmb_amount(self) -> None:
        await self.use_epay(payment_usd_to_rmb_rate="7.2")
        token = await self.user("alice")
        order = await self.order(token, amount=10.5, method="ALIPAY")
        assert order["status"] == "pending"
        assert order["amount"] == "10.5" and order["rmb_amount"] == "75.60"
        assert order["method"] == "alipay"
        assert order["order_no"].startswith("PAY") and len(order["order_no"]) == 25
        params = query_of(order["payment_url"])
        assert order["payment_url"].startswith(self.epay.base_url + "submit.php?")
        assert params["money"] == "75.60" and params["pid"] == "1001"
        assert params["out_trade_no"] == order["order_no"] and params["type"] == "alipay"
        assert params["notify_url"] == self.notify_url("yipay")
        assert params["sign_type"] == "MD5"
        assert params["sign"] == epay_sign(params, "epay-merchant-key-1")
        assert await self.epay.open(order["payment_url"]) == 200
        row = await self.stored(order["order_no"])
        assert row["gateway_amount_nanos"] == 75_600_000_000 and row["currency"] == "CNY"
        assert row["expires_at"] == row["created_at"] + timedelta(minutes=120)

    async def test_bad_inputs_are_refused_and_store_nothing(self) -> None:
        await self.use_epay(payment_min_recharge_amount="2")
        token = await self.user("alice")
        cases = [
            ({"amount": "abc", "method": "alipay"}, "Invalid recharge amount"),
            ({"amount": "-5", "method": "alipay"}, "Invalid recharge amount"),
            ({"amount": 0, "method": "alipay"}, "Invalid recharge amount"),
            ({"amount": True, "method": "alipay"}, "Invalid recharge amount"),
            ({"method": "alipay"}, "Invalid recharge amount"),
            ({"amount": "1.99", "method": "alipay"}, "Recharge amount is below the minimum"),
            ({"amount": "10", "method": "paypal"}, "Payment method is not enabled"),
            ({"amount": "10"}, "method is required"),
            ({"amount": "10", "method": "alipay", "channel_id": "nope"},
             "Payment channel is not enabled"),
        ]
        for body, message in cases:
            response = await self.call("POST", "/api/user/payment/orders", body, token=token)
            assert response.status == 400, (body, response)
            assert response.json()["error"] == message, (body, response.json())
        bad_json = await self.call("POST", "/api/user/payment/orders", data=b"{", token=token)
        assert bad_json.status == 400
        assert await self.all_orders() == []

    async def test_unconfigured_provider_and_bad_rate(self) -> None:
        await self.use_epay(payment_yipay_key="")
        token = await self.user("alice")
        response = await self.call("POST", "/api/user/payment/orders",
                                   {"amount": "10", "method": "alipay"}, token=token)
        assert response.status == 400 and "not configured" in response.json()["error"]
        await self.use_epay(payment_usd_to_rmb_rate="0")
        response = await self.call("POST", "/api/user/payment/orders",
                                   {"amount": "10", "method": "alipay"}, token=token)
        assert response.json()["error"] == "Invalid payment exchange rate"
        assert await self.all_orders() == []

    async def test_personal_mode_refuses_orders(self) -> None:
        await self.use_epay(system_mode="personal")
        token = await self.user("alice")
        response = await self.call("POST", "/api/user/payment/orders",
                                   {"amount": "10", "method": "alipay"}, token=token)
        assert response.status == 403
        assert response.json()["error"] == "Payment requires premium edition"
        body = (await self.call("GET", "/api/user/payment/config", token=token)).json()
        assert body["enabled"] is False

    async def test_two_channels_need_channel_id_only_when_ambiguous(self) -> None:
        await self.use_both()
        token = await self.user("alice")
        order = await self.order(token, method="alipay")
        assert order["channel_id"] == "ch-epay" and order["provider"] == "yipay"
        card = await self.order(token, method="stripe", channel_id="ch-card")
        assert card["provider"] == "stripe" and card["currency"] == "USD"
        wrong = await self.call("POST", "/api/user/payment/orders",
                                {"amount": "10", "method": "alipay", "channel_id": "ch-card"},
                                token=token)
        assert wrong.status == 400 and wrong.json()["error"] == "Payment method is not enabled"


class OrderListTests(PaymentCase):
    async def test_list_detail_and_ownership(self) -> None:
        await self.use_epay()
        alice = await self.user("alice")
        bob = await self.user("bob")
        first = await self.order(alice, amount="5")
        self.clock.advance(60)
        second = await self.order(alice, amount="6")
        plain = (await self.call("GET", "/api/user/payment/orders", token=alice)).json()
        assert [o["order_no"] for o in plain] == [second["order_no"], first["order_no"]]
        assert "payment_url" not in plain[0]
        page = (await self.call("GET", "/api/user/payment/orders?page=2&page_size=1",
                                token=alice)).json()
        assert page["total"] == 2 and page["page"] == 2 and page["page_size"] == 1
        assert [o["order_no"] for o in page["items"]] == [first["order_no"]]
        detail = await self.call("GET", f"/api/user/payment/orders/{first['order_no']}",
                                 token=alice)
        assert detail.status == 200 and detail.json()["amount"] == "5"
        assert detail.json()["payment_url"] == first["payment_url"]
        stolen = await self.call("GET", f"/api/user/payment/orders/{first['order_no']}",
                                 token=bob)
        assert stolen.status == 404
        assert stolen.json()["error"] == "Payment order not found"
        assert (await self.call("GET", "/api/user/payment/orders", token=bob)).json() == []
        missing = await self.call("GET", "/api/user/payment/orders/PAYNOPE", token=alice)
        assert missing.status == 404

    async def test_time_filter_and_bad_time(self) -> None:
        await self.use_epay()
        alice = await self.user("alice")
        await self.order(alice)
        bad = await self.call("GET", "/api/user/payment/orders?from=yesterday", token=alice)
        assert bad.status == 400
        future = await self.call("GET", "/api/user/payment/orders?from=2099-01-01",
                                 token=alice)
        assert future.json() == {"items": [], "total": 0, "page": 1, "page_size": 20}


class ExpiryTests(PaymentCase):
    async def barrier(self) -> None:
        """Wait until work queued on the (single-threaded SQLite) pool before now is done."""
        await self.ctx.db.transaction(lambda conn: None)

    async def test_pending_orders_expire_after_ttl(self) -> None:
        await self.use_epay(payment_order_ttl_minutes="30")
        token = await self.user("alice")
        order = await self.order(token)
        self.clock.advance(29 * 60)
        await self.barrier()
        assert (await self.stored(order["order_no"]))["status"] == orders.PENDING
        self.clock.advance(2 * 60)  # the expiry job runs every minute of the app's clock
        await self.barrier()
        assert (await self.stored(order["order_no"]))["status"] == orders.EXPIRED
        detail = (await self.call("GET", f"/api/user/payment/orders/{order['order_no']}",
                                  token=token)).json()
        assert detail["status"] == "expired" and "payment_url" not in detail
        assert await self.balance(token) == "0"

    async def test_expiry_job_leaves_paid_and_fresh_orders_alone(self) -> None:
        await self.use_epay(payment_order_ttl_minutes="10")
        token = await self.user("alice")
        old = await self.order(token)
        paid = await self.order(token)
        await self.epay.open(paid["payment_url"])
        status, text = await self.epay.notify(paid["order_no"])
        assert (status, text) == (200, "success")
        self.clock.advance(11 * 60)
        fresh = await self.order(token)
        assert self.app.order_expiry is not None
        closed = await self.app.order_expiry.run_once()  # the clock's tick may have run first
        assert closed in ([], [old["order_no"]])
        assert (await self.stored(old["order_no"]))["status"] == orders.EXPIRED
        assert (await self.stored(paid["order_no"]))["status"] == orders.PAID
        assert (await self.stored(fresh["order_no"]))["status"] == orders.PENDING
        assert await self.app.order_expiry.run_once() == []
        assert Decimal(await self.balance(token)) == Decimal(10)
