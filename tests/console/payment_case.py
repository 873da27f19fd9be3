"""Shared pieces of the payment tests: provider fakes, settings, balances and ledger reads.

Not a test module itself (no ``test_`` prefix), so nothing here is collected twice.
"""

from __future__ import annotations

from typing import Any

import orjson
import treq
from sqlalchemy import select

from gateway.store import schema
from tests.support.app import AppTestCase
from tests.support.epay_gateway import FakeEpayGateway
from tests.support.stripe_api import FakeStripeApi

EPAY_PID = "1001"
EPAY_KEY = "epay-merchant-key-1"
STRIPE_KEY = "sk_test_lockgate"
STRIPE_WEBHOOK = "whsec_lockgate"


class PaymentCase(AppTestCase):
    def setUp(self) -> None:
        super().setUp()
        self.epay = FakeEpayGateway.start(pid=EPAY_PID, key=EPAY_KEY)
        self.addCleanup(self.epay.stop)
        self.stripe = FakeStripeApi.start(secret_key=STRIPE_KEY, webhook_secret=STRIPE_WEBHOOK)
        self.addCleanup(self.stripe.stop)

    async def settings(self, **rows: Any) -> None:
        values = {k: v if isinstance(v, str) else orjson.dumps(v).decode()
                  for k, v in rows.items()}
        await self.ctx.live_settings.save(values, self.ctx.now())

    async def use_epay(self, **extra: Any) -> None:
        await self.settings(**{
            "payment_enabled": "true", "payment_gateway_provider": "yipay",
            "payment_methods": ["alipay", "wxpay"], "payment_yipay_gateway_url": self.epay.base_url,
            "payment_yipay_pid": EPAY_PID, "payment_yipay_key": EPAY_KEY, **extra})

    async def use_stripe(self, **extra: Any) -> None:
        await self.settings(**{
            "payment_enabled": "true", "payment_gateway_provider": "stripe",
            "payment_official_currency": "USD", "payment_stripe_base_url": self.stripe.base_url,
            "payment_stripe_secret_key": STRIPE_KEY,
            "payment_stripe_webhook_secret": STRIPE_WEBHOOK,
            # the fake Stripe API lives on loopback, which the SSRF policy refuses by default
            "ssrf_allow_private_networks": "true", **extra})

    async def use_both(self) -> None:
        """Two channels: EPay (alipay) and Stripe (USD)."""
        await self.settings(payment_enabled="true", payment_channels=[
            {"id": "ch-epay", "name": "Alipay", "provider": "epay", "enabled": True,
             "methods": ["alipay"], "config": {
                 "gateway_url": self.epay.base_url, "pid": EPAY_PID, "key": EPAY_KEY}},
            {"id": "ch-card", "name": "Cards", "provider": "stripe", "enabled": True,
             "methods": ["stripe"], "currency": "USD", "config": {
                 "stripe_base_url": self.stripe.base_url, "stripe_secret_key": STRIPE_KEY,
                 "stripe_webhook_secret": STRIPE_WEBHOOK}},
        ], ssrf_allow_private_networks="true")

    async def user(self, name: str) -> str:
        if not getattr(self, "_admin", None):
            self._admin = await self.setup_admin()
        return str((await self.register(name))["token"])

    async def order(self, token: str, amount: Any = "10", method: str = "alipay",
                    **extra: Any) -> dict[str, Any]:
        response = await self.call("POST", "/api/user/payment/orders",
                                   {"amount": amount, "method": method, **extra}, token=token)
        assert response.status == 200, response
        return dict(response.json())

    async def balance(self, token: str) -> str:
        response = await self.call("GET", "/api/user/me", token=token)
        assert response.status == 200, response
        return str(response.json()["balance"])

    async def ledger(self) -> list[dict[str, Any]]:
        def read(conn: Any) -> list[dict[str, Any]]:
            led = schema.ledger
            return [dict(r._mapping) for r in conn.execute(
                select(led).where(led.c.kind == "topup").order_by(led.c.id))]
        return await self.ctx.db.transaction(read)

    async def stored(self, order_no: str) -> dict[str, Any]:
        def read(conn: Any) -> dict[str, Any]:
            o = schema.orders
            return dict(conn.execute(select(o).where(o.c.order_no == order_no)).one()._mapping)
        return await self.ctx.db.transaction(read)

    async def all_orders(self) -> list[dict[str, Any]]:
        def read(conn: Any) -> list[dict[str, Any]]:
            return [dict(r._mapping) for r in conn.execute(select(schema.orders))]
        return await self.ctx.db.transaction(read)

    async def redirect_of(self, path: str) -> tuple[int, str]:
        """GET ``path`` without following redirects: (status, Location)."""
        response = await treq.get(self.base + path, allow_redirects=False, pool=self.pool)
        await treq.content(response)
        location = response.headers.getRawHeaders("location") or [""]
        return int(response.code), location[0]

    def notify_url(self, provider: str) -> str:
        return f"{self.base}/api/payment/{provider}/notify"
