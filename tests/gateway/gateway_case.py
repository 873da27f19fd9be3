"""A running Lockgate with a fake OpenAI-compatible upstream and a provisioned catalog.

``GatewayTestCase.provision()`` creates a user with a balance, one user channel / upstream
channel / model / config pointing at the fake upstream, and an API key made through the real
console route.  SDK clients run in a thread (they block) against the real listening port.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from sqlalchemy import func, select
from twisted.internet import reactor
from twisted.internet.threads import deferToThread

from gateway.billing.money import to_nanos
from gateway.invalidation import USERS
from gateway.store import schema
from gateway.store.ledger_audit import audit
from tests.support.app import AppTestCase
from tests.support.catalog_fixtures import CatalogBuilder
from tests.support.upstream import FakeUpstream

#: prices per 1M tokens: 1000 per 1M input = 0.001 per input token; 2000 per 1M output
INPUT_PRICE = "1000"
OUTPUT_PRICE = "2000"
#: the ledger kind of the funding ``set_balance`` writes (like an admin's balance change)
FUNDING = "test_funding"


class GatewayTestCase(AppTestCase):
    def setUp(self) -> None:
        super().setUp()
        self.fake = FakeUpstream.start(reactor)
        self.addCleanup(self.fake.stop)
        self.catalog = CatalogBuilder(self.ctx)

    @property
    def gateway(self) -> Any:
        return self.app.gateway

    async def provision(self, *, balance: str = "100", model: str = "gpt-fake",
                        channel_type: str = "compat", upstream_model: str = "",
                        key_body: dict[str, Any] | None = None) -> dict[str, Any]:
        self.admin_token = await self.setup_admin()
        # the fake upstream lives on loopback, which the SSRF policy refuses by default
        await self.ctx.live_settings.save({"ssrf_allow_private_networks": "true"},
                                          self.ctx.now())
        user = await self.register("alice")
        self.user_id = user["user"]["id"]
        self.user_token = user["token"]
        await self.set_balance(self.user_id, balance)
        self.uc_id = await self.catalog.user_channel("standard")
        self.channel_id = await self.catalog.channel(self.uc_id, "fake-up", type=channel_type,
                                                     base_url=self.fake.base_url)
        self.model_id = await self.catalog.model(model, input=INPUT_PRICE, output=OUTPUT_PRICE)
        self.config_id = await self.catalog.config(self.channel_id, self.model_id,
                                                   upstream=upstream_model)
        await self.catalog.announce()
        created = await self.call("POST", "/api/user/api-keys", key_body or {"name": "test"},
                                  token=self.user_token)
        assert created.status == 200, created
        self.api_key = created.json()["api_key"]
        self.key_id = created.json()["id"]
        return {"user_id": self.user_id, "api_key": self.api_key}

    async def set_balance(self, user_id: int, amount: str) -> None:
        """Set the balance the way an admin's change does: with a ledger
        row, so that ``verify_ledger`` holds (the balance is the sum of the ledger)."""
        nanos = to_nanos(Decimal(amount))

        def run(conn: Any) -> None:
            users = schema.users
            before = conn.execute(select(users.c.balance_nanos)
                                  .where(users.c.id == user_id)).scalar_one()
            conn.execute(users.update().where(users.c.id == user_id)
                         .values(balance_nanos=nanos))
            if nanos != before:
                conn.execute(schema.ledger.insert().values(
                    user_id=user_id, kind=FUNDING, amount_nanos=nanos - before,
                    balance_after_nanos=nanos, ref=None, memo="test funding",
                    created_at=self.ctx.now()))

        await self.ctx.db.transaction(run)
        await self.ctx.invalidation.announce(USERS, str(user_id).encode())

    async def balance_nanos(self, user_id: int) -> int:
        return await self.ctx.db.transaction(lambda conn: conn.execute(
            select(schema.users.c.balance_nanos).where(schema.users.c.id == user_id)
        ).scalar_one())

    async def usage_rows(self) -> list[dict[str, Any]]:
        await self.gateway.settler.flush()
        return await self.ctx.db.transaction(lambda conn: [dict(r) for r in conn.execute(
            select(schema.usage_logs).order_by(schema.usage_logs.c.id)).mappings()])

    async def ledger_sum(self, user_id: int) -> int:
        """What the calls moved: the sum of the user's ledger rows but the test's funding."""
        await self.gateway.settler.flush()
        return await self.ctx.db.transaction(lambda conn: conn.execute(
            select(func.coalesce(func.sum(schema.ledger.c.amount_nanos), 0))
            .where(schema.ledger.c.user_id == user_id, schema.ledger.c.kind != FUNDING)
        ).scalar_one())

    async def verify_ledger(self) -> None:
        """``lockgate-admin verify-ledger``'s check: no balance or key quota differs from
        its recomputation from the ledger and the usage logs."""
        await self.gateway.settler.flush()
        differences = await self.ctx.db.transaction(audit)
        assert differences == [], "\n".join(str(d) for d in differences)

    def openai_client(self, api_key: str | None = None, **kwargs: Any) -> Any:
        import openai

        client = openai.OpenAI(api_key=api_key or self.api_key, base_url=self.base + "/v1",
                               max_retries=0, timeout=20, **kwargs)
        self.addCleanup(client.close)
        return client

    def in_thread(self, fn: Any, *args: Any, **kwargs: Any) -> Any:
        return deferToThread(fn, *args, **kwargs)


def expected_cost_nanos(prompt_tokens: int, completion_tokens: int) -> int:
    cost = (Decimal(prompt_tokens) * Decimal(INPUT_PRICE)
            + Decimal(completion_tokens) * Decimal(OUTPUT_PRICE)) / Decimal(1_000_000)
    return to_nanos(cost)
