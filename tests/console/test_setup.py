"""First-run setup: exactly one administrator, clear refusals, nothing changed on bad input."""

from __future__ import annotations

from sqlalchemy import func, select
from twisted.internet.defer import gatherResults

from gateway.store import schema
from tests.support.app import AppTestCase


class SetupTests(AppTestCase):
    async def count_users(self) -> int:
        return await self.ctx.db.transaction(
            lambda conn: conn.execute(select(func.count()).select_from(schema.users)).scalar_one())

    async def test_status_then_setup_then_complete(self) -> None:
        assert (await self.call("GET", "/api/setup/status")).json() == {"required": True}
        response = await self.call("POST", "/api/setup", {
            "site_name": "Acme AI", "username": "root", "email": "Root@Example.com",
            "password": "password123"})
        assert response.status == 200, response
        body = response.json()
        assert body["user"]["is_admin"] is True
        assert body["user"]["email"] == "root@example.com"
        assert "password_hash" not in body["user"]
        assert (await self.call("GET", "/api/setup/status")).json() == {"required": False}
        assert self.ctx.settings.text("site_name") == "Acme AI"
        me = await self.call("GET", "/api/user/me", token=body["token"])
        assert me.status == 200 and me.json()["username"] == "root"

    async def test_second_setup_conflicts(self) -> None:
        await self.setup_admin()
        again = await self.call("POST", "/api/setup", {
            "username": "other", "email": "other@example.com", "password": "password123"})
        assert again.status == 409
        assert again.json() == {"error": "Initial setup is already complete", "type": "conflict"}
        assert await self.count_users() == 1

    async def test_twenty_concurrent_setups_make_one_admin(self) -> None:
        calls = [
            self.call("POST", "/api/setup", {
                "username": f"admin{i}", "email": f"admin{i}@example.com",
                "password": "password123"})
            for i in range(20)
        ]
        from twisted.internet.defer import ensureDeferred
        responses = await gatherResults([ensureDeferred(c) for c in calls])
        statuses = sorted(r.status for r in responses)
        assert statuses.count(200) == 1, statuses
        assert statuses.count(409) == 19, statuses
        assert await self.count_users() == 1

    async def test_bad_inputs_are_refused_and_change_nothing(self) -> None:
        cases = [
            (b"{not json", None),
            (b"[1,2]", None),
            (None, {"email": "a@example.com", "password": "password123"}),
            (None, {"username": "ab", "email": "a@example.com", "password": "password123"}),
            (None, {"username": "abc", "email": "not-an-email", "password": "password123"}),
            (None, {"username": "abc", "email": "a@example.com", "password": "short"}),
            (None, {"username": 7, "email": "a@example.com", "password": "password123"}),
            (None, {"username": "abc", "email": "a@example.com", "password": "password123",
                    "site_name": "x" * 81}),
        ]
        for raw, payload in cases:
            response = await self.call("POST", "/api/setup", payload, data=raw)
            assert response.status == 400, (payload, raw, response)
            body = response.json()
            assert body["type"] == "invalid_request" and body["error"]
        assert await self.count_users() == 0
        assert (await self.call("GET", "/api/setup/status")).json() == {"required": True}

    async def test_setup_is_throttled_per_ip(self) -> None:
        statuses = []
        for _ in range(6):
            response = await self.call("POST", "/api/setup", {"username": "x"}, ip="203.0.113.9")
            statuses.append(response.status)
        assert statuses[:5] == [400] * 5
        assert statuses[5] == 429
        last = await self.call("POST", "/api/setup", {"username": "x"}, ip="203.0.113.9")
        assert int(last.header("Retry-After")) >= 1
        self.clock.advance(61)
        after = await self.call("POST", "/api/setup", {"username": "x"}, ip="203.0.113.9")
        assert after.status == 400

    async def test_setup_email_domain_rule(self) -> None:
        await self.ctx.live_settings.save({"registration_email_suffixes": "corp.example"},
                                          self.ctx.now())
        refused = await self.call("POST", "/api/setup", {
            "username": "root", "email": "root@gmail.example", "password": "password123"})
        assert refused.status == 400
        assert refused.json()["error"] == "email domain is not allowed for registration"
        accepted = await self.call("POST", "/api/setup", {
            "username": "root", "email": "root@corp.example", "password": "password123"})
        assert accepted.status == 200


class SetupOnPostgresTests(SetupTests):
    backend = "postgresql"
