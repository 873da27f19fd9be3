"""A running Lockgate with a sandbox host, a user and their sandboxes, for the sandbox tests.

Hosts are written through the agent-links store (a hidden ``sandboxd`` device owned by the
admin, and the host row); "online" is the device's link state as the link code writes it
(``devices.report`` with a link id).  Tasks go through the real queue: created with the §3.5
gate's payload, claimed (``started_at``) and finished (``finished_at``) at chosen times.
"""

from __future__ import annotations

import secrets
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any

from sqlalchemy import select

from gateway.assistant.ids import random_id
from gateway.billing.money import to_nanos
from gateway.invalidation import USERS
from gateway.sandboxes.gate import sandbox_gate
from gateway.store import connector_tasks, devices, sandbox_hosts, schema
from gateway.store.ledger_audit import audit
from tests.support.app import AppTestCase

FUNDING = "test_funding"
SANDBOXES = "/api/user/advanced-chat/cloud-sandboxes"
PRICE_FIELDS = ("runtime_price_hour", "cpu_price_hour", "memory_price_gb_hour",
                "storage_price_gb_hour", "runtime_multiplier")


class SandboxCase(AppTestCase):
    async def start(self, balance: str = "100") -> None:
        self.admin_token = await self.setup_admin()
        self.admin_id = await self.user_id("admin")
        self.user_token = (await self.register("alice"))["token"]
        self.alice = await self.user_id("alice")
        await self.set_balance(self.alice, balance)

    async def user_id(self, username: str) -> int:
        u = schema.users
        return await self.ctx.db.transaction(lambda conn: int(conn.execute(
            select(u.c.id).where(u.c.username == username)).scalar_one()))

    async def add_host(self, *, policy: str = "", enabled: bool = True, online: bool = True,
                       capacity: dict[str, Any] | None = None, name: str = "host",
                       **prices: str) -> tuple[str, str]:
        """(host id, device id); prices as decimal strings by contract name."""
        unknown = set(prices) - set(PRICE_FIELDS)
        assert not unknown, unknown
        stored = {f"{name}_nanos": to_nanos(Decimal(value)) for name, value in prices.items()}
        now = self.ctx.now()

        def run(conn: Any) -> tuple[str, str]:
            device = devices.create(
                conn, device_id=random_id("acd"), user_id=self.admin_id, name=name, remark="",
                mode=devices.SANDBOXD, listen_port=0, token_hash=secrets.token_hex(32),
                hidden=True, now=now)
            host = sandbox_hosts.create(
                conn, host_id=random_id("ash"), device_id=device.id, name=name,
                created_by=self.admin_id, enabled=enabled, security_policy=policy,
                prices=stored, now=now)
            if online:
                devices.report(conn, device, {}, now, link_id=f"test/{device.id}")
            if capacity is not None:
                sandbox_hosts.record_capacity(conn, device.id, capacity, now)
            return host.id, device.id

        return await self.ctx.db.transaction(run)

    async def set_online(self, device_id: str, online: bool) -> None:
        now = self.ctx.now()

        def run(conn: Any) -> None:
            device = devices.get(conn, device_id)
            assert device is not None
            if online:
                devices.report(conn, device, {}, now, link_id=f"test/{device_id}")
            else:
                devices.release_link(conn, device_id, device.link_id or "", now)

        await self.ctx.db.transaction(run)

    async def create_sandbox(self, host_id: str, *, token: str | None = None,
                             **fields: Any) -> dict[str, Any]:
        body = {"host_id": host_id, "name": "box", "image": "python:3.12-slim",
                "cpu_cores": "1", "memory_mb": 1024, "disk_gb": 10, **fields}
        response = await self.call("POST", SANDBOXES, body, token=token or self.user_token)
        assert response.status == 201, response
        return response.json()  # type: ignore[no-any-return]

    async def finished_task(self, sandbox_id: str, started: datetime, finished: datetime, *,
                            success: bool = True, user_id: int | None = None,
                            action: str = "run_command") -> str:
        """A task created through the gate, claimed at ``started``, finished at ``finished``."""
        owner = user_id if user_id is not None else self.alice

        def run(conn: Any) -> str:
            binding = sandbox_gate(conn, owner, sandbox_id, started, require_credit=False)
            task = connector_tasks.create(
                conn, task_id=random_id("act"), user_id=owner, device_id=binding.device_id,
                action=action, payload=binding.payload({"command": "true"}), workspace_path="",
                status=connector_tasks.QUEUED, now=started, cloud_sandbox_id=sandbox_id)
            assert connector_tasks.claim(conn, task.id, connector_tasks.HTTP_CLAIM, started)
            assert connector_tasks.finish(
                conn, task.id, binding.device_id, success=success, result="done",
                error_message="", output={}, now=finished) is not None
            return task.id

        return await self.ctx.db.transaction(run)

    def at(self, seconds: float) -> datetime:
        """The test clock's start plus ``seconds``."""
        return self.ctx.now() + timedelta(seconds=seconds)

    # --- money ------------------------------------------------------------------------------

    async def set_balance(self, user_id: int, amount: str) -> None:
        """Set the balance as an admin change does: with a ledger row (the ledger sums to it)."""
        nanos = to_nanos(Decimal(amount))
        now = self.ctx.now()

        def run(conn: Any) -> None:
            users = schema.users
            before = conn.execute(select(users.c.balance_nanos)
                                  .where(users.c.id == user_id)).scalar_one()
            conn.execute(users.update().where(users.c.id == user_id)
                         .values(balance_nanos=nanos))
            if nanos != before:
                conn.execute(schema.ledger.insert().values(
                    user_id=user_id, kind=FUNDING, amount_nanos=nanos - before,
                    balance_after_nanos=nanos, ref=None, memo="test funding", created_at=now))

        await self.ctx.db.transaction(run)
        await self.ctx.invalidation.announce(USERS, str(user_id).encode())

    async def balance(self, user_id: int) -> int:
        u = schema.users
        return await self.ctx.db.transaction(lambda conn: int(conn.execute(
            select(u.c.balance_nanos).where(u.c.id == user_id)).scalar_one()))

    async def sandbox_ledger(self, user_id: int) -> list[dict[str, Any]]:
        """The user's ledger rows but the test's funding, oldest first."""
        led = schema.ledger
        return await self.ctx.db.transaction(lambda conn: [dict(r) for r in conn.execute(
            select(led).where(led.c.user_id == user_id, led.c.kind != FUNDING)
            .order_by(led.c.id)).mappings()])

    async def charges(self, sandbox_id: str) -> list[dict[str, Any]]:
        c = schema.sandbox_charges
        return await self.ctx.db.transaction(lambda conn: [dict(r) for r in conn.execute(
            select(c).where(c.c.sandbox_id == sandbox_id).order_by(c.c.created_at, c.c.kind))
            .mappings()])

    async def verify_ledger(self) -> None:
        differences = await self.ctx.db.transaction(audit)
        assert differences == [], "\n".join(str(d) for d in differences)
