"""The user's API key routes (contract §4.9, D4, D5) and their effect on the gateway key cache."""

from __future__ import annotations

from typing import Any

from sqlalchemy import select, update

from gateway.store import schema
from tests.support.app import AppTestCase
from tests.support.catalog_fixtures import CatalogBuilder, nanos


class ApiKeyTests(AppTestCase):
    def setUp(self) -> None:
        super().setUp()
        self.build = CatalogBuilder(self.ctx)

    async def users(self) -> tuple[str, str]:
        await self.setup_admin()
        alice = (await self.register("alice"))["token"]
        bob = (await self.register("bob"))["token"]
        return alice, bob

    async def rows(self) -> list[dict[str, Any]]:
        def run(conn: Any) -> list[dict[str, Any]]:
            k = schema.api_keys
            return [dict(r) for r in conn.execute(select(k).order_by(k.c.id)).mappings()]
        return await self.ctx.db.transaction(run)

    async def create(self, token: str, body: Any = None, status: int = 200) -> dict[str, Any]:
        response = await self.call("POST", "/api/user/api-keys",
                                   {"name": "k"} if body is None else body,
                                   token=token)
        assert response.status == status, response
        return response.json()

    async def test_create_returns_plaintext_once_and_stores_only_the_hmac(self):
        alice, _ = await self.users()
        body = await self.create(alice, {})
        plaintext = body["api_key"]
        assert plaintext.startswith("sk-") and len(plaintext) == 46
        assert body["name"] == "API key"
        assert body["key"]["id"] == body["id"]
        assert "api_key" not in body["key"]
        assert body["key_prefix"] == plaintext[:8] + "..." + plaintext[-4:]
        assert body["enabled"] is True
        assert body["quota_limit"] == "0" and body["quota"] == "0"
        assert "quota_remaining" not in body
        assert body["usage"] == {"request_count": 0, "input_tokens": 0, "output_tokens": 0,
                                 "cached_input_tokens": 0, "total_tokens": 0, "total_cost": "0"}
        assert body["allowed_models"] == [] and body["allowed_user_channels"] == []
        assert body["usage_reset_at"] is None and body["created_at"].endswith("Z")
        [row] = await self.rows()
        assert row["key_hash"] == self.ctx.key_hasher.hash(plaintext)
        assert plaintext not in str(row)
        listed = (await self.call("GET", "/api/user/api-keys", token=alice)).json()
        assert [k["id"] for k in listed] == [body["id"]]
        assert plaintext not in str(listed) and "api_key" not in listed[0]
        record = await self.ctx.keys.lookup(self.ctx.key_hasher.hash(plaintext))
        assert record is not None and record.id == body["id"]

    async def test_inputs_and_aliases_are_normalised(self):
        alice, _ = await self.users()
        uc1 = await self.build.user_channel("one")
        uc2 = await self.build.user_channel("two")
        body = await self.create(alice, {
            "name": "  ci-bot ", "allowed_models": ["b", "a", "b"],
            "allowed_user_channels": [uc2, uc1, uc2],
            "ip_whitelist": "203.0.113.7, 10.1.2.3/8\n203.0.113.7 2001:db8::1",
            "quota": 20, "enabled": False})
        assert body["name"] == "ci-bot"
        assert body["allowed_models"] == ["a", "b"]
        assert body["allowed_user_channels"] == [uc2, uc1]
        assert body["allowed_ips"] == ["10.0.0.0/8", "2001:db8::1", "203.0.113.7"]
        assert body["ip_whitelist"] == body["allowed_ips"]
        assert body["quota_limit"] == "20" and body["quota_remaining"] == "20"
        assert body["enabled"] is False
        other = await self.create(alice, {"name": "x", "allowed_ips": ["::1"],
                                          "quota_limit": "0.5"})
        assert other["allowed_ips"] == ["::1"] and other["quota"] == "0.5"

    async def test_bad_inputs_are_refused_and_change_nothing(self):
        alice, _ = await self.users()
        disabled = await self.build.user_channel("off", enabled=False)
        many = [await self.build.user_channel(f"uc{i}") for i in range(11)]
        cases = [
            ({"quota": -1}, "quota", "API key quota limit cannot be negative"),
            ({"quota_limit": "abc"}, "quota_limit", None),
            ({"ip_whitelist": "1.2.3.4, nope"}, "ip_whitelist", None),
            ({"allowed_ips": ["300.1.1.1"]}, "allowed_ips", None),
            ({"allowed_ips": 5}, "allowed_ips", None),
            ({"allowed_user_channels": many}, "allowed_user_channels",
             "API key cannot be bound to more than 10 user channels"),
            ({"allowed_user_channels": [9999]}, "allowed_user_channels",
             "User channel not found or disabled"),
            ({"allowed_user_channels": [disabled]}, "allowed_user_channels",
             "User channel not found or disabled"),
            ({"allowed_user_channels": ["1"]}, "allowed_user_channels", None),
            ({"allowed_models": [1]}, "allowed_models", None),
            ({"enabled": "yes"}, "enabled", None),
            ({"name": "x" * 101}, "name", None),
        ]
        for body, field, message in cases:
            response = await self.call("POST", "/api/user/api-keys", body, token=alice)
            assert response.status == 400, (body, response)
            assert response.json()["field"] == field, (body, response.json())
            if message:
                assert response.json()["error"] == message
        for raw in (b"{nope", b"[1]"):
            response = await self.call("POST", "/api/user/api-keys", data=raw, token=alice)
            assert response.status == 400
        assert await self.rows() == []
        # at most 10 after de-duplication is fine
        ok = await self.create(alice, {"allowed_user_channels": many[:10] + many[:3]})
        assert ok["allowed_user_channels"] == many[:10]

    async def test_update_keeps_absent_fields_and_validates_all_or_nothing(self):
        alice, _ = await self.users()
        uc = await self.build.user_channel("one")
        created = await self.create(alice, {"name": "k", "allowed_models": ["m"],
                                            "allowed_user_channels": [uc],
                                            "ip_whitelist": ["10.0.0.1"], "quota": "5"})
        path = f"/api/user/api-keys/{created['id']}"
        response = await self.call("PUT", path, {"name": "renamed"}, token=alice)
        assert response.status == 200, response
        body = response.json()
        assert body["name"] == "renamed" and body["allowed_models"] == ["m"]
        assert body["allowed_user_channels"] == [uc] and body["allowed_ips"] == ["10.0.0.1"]
        assert body["quota"] == "5" and "api_key" not in body
        response = await self.call("PUT", path, {"allowed_models": [], "quota": 0,
                                                 "enabled": False}, token=alice)
        body = response.json()
        assert body["allowed_models"] == [] and body["quota"] == "0" and body["enabled"] is False
        before = await self.rows()
        for bad in ({"name": ""}, {"name": "ok", "quota": -2},
                    {"enabled": True, "allowed_user_channels": [424242]}):
            response = await self.call("PUT", path, bad, token=alice)
            assert response.status == 400, (bad, response)
        assert await self.rows() == before

    async def test_other_users_keys_are_invisible_and_untouchable(self):
        alice, bob = await self.users()
        key = await self.create(alice)
        path = f"/api/user/api-keys/{key['id']}"
        assert (await self.call("GET", "/api/user/api-keys", token=bob)).json() == []
        for method, suffix, body in [("PUT", "", {"name": "mine"}), ("POST", "/rotate", None),
                                     ("POST", "/reset-usage", None), ("DELETE", "", None)]:
            response = await self.call(method, path + suffix, body, token=bob)
            assert response.status == 404, (method, suffix, response)
            assert response.json()["error"] == "API key not found"
        response = await self.call("POST", "/api/user/api-key/rotate", {"id": key["id"]},
                                   token=bob)
        assert response.status == 404
        [row] = await self.rows()
        assert row["name"] == "k" and row["key_hash"] == self.ctx.key_hasher.hash(key["api_key"])
        assert (await self.call("GET", "/api/user/api-keys")).status == 401
        response = await self.call("GET", "/api/user/api-keys", token=key["api_key"])
        assert response.status == 401

    async def test_rotate_keeps_restrictions_and_usage_and_kills_the_old_secret(self):
        alice, _ = await self.users()
        key = await self.create(alice, {"name": "k", "allowed_models": ["m"], "quota": "3"})
        await self.set_usage(key["id"], spent="1.25", requests=4)
        old_hash = self.ctx.key_hasher.hash(key["api_key"])
        assert (await self.ctx.keys.lookup(old_hash)) is not None
        response = await self.call("POST", f"/api/user/api-keys/{key['id']}/rotate", token=alice)
        assert response.status == 200, response
        rotated = response.json()
        assert rotated["api_key"] != key["api_key"] and rotated["id"] == key["id"]
        assert rotated["key_prefix"] == rotated["api_key"][:8] + "..." + rotated["api_key"][-4:]
        assert rotated["allowed_models"] == ["m"] and rotated["quota"] == "3"
        assert rotated["usage"]["total_cost"] == "1.25" and rotated["quota_remaining"] == "1.75"
        assert rotated["usage"]["request_count"] == 4
        assert self.ctx.keys.cached(old_hash) is None
        assert await self.ctx.keys.lookup(old_hash) is None
        new = await self.ctx.keys.lookup(self.ctx.key_hasher.hash(rotated["api_key"]))
        assert new is not None and new.id == key["id"]

    async def set_usage(self, key_id: int, spent: str, requests: int) -> None:
        def run(conn: Any) -> None:
            k = schema.api_keys
            conn.execute(update(k).where(k.c.id == key_id).values(
                spent_nanos=nanos(spent), request_count=requests, input_tokens=100,
                output_tokens=20, cached_input_tokens=5))
        await self.ctx.db.transaction(run)

    async def test_usage_comes_from_counters_and_reset_clears_them(self):
        alice, _ = await self.users()
        key = await self.create(alice, {"quota": "1"})
        await self.set_usage(key["id"], spent="1.5", requests=2)
        [listed] = (await self.call("GET", "/api/user/api-keys", token=alice)).json()
        assert listed["usage"] == {"request_count": 2, "input_tokens": 100,
                                   "output_tokens": 20, "cached_input_tokens": 5,
                                   "total_tokens": 120, "total_cost": "1.5"}
        assert listed["quota_remaining"] == "0"
        self.clock.advance(60)
        response = await self.call("POST", f"/api/user/api-keys/{key['id']}/reset-usage",
                                   token=alice)
        assert response.status == 200, response
        body = response.json()
        assert body["usage"]["total_cost"] == "0" and body["usage"]["request_count"] == 0
        assert body["quota_remaining"] == "1"
        assert body["usage_reset_at"] == self.ctx.now().isoformat().replace("+00:00", "Z")

    async def test_disable_and_delete_take_effect_in_the_key_cache_at_once(self):
        alice, _ = await self.users()
        key = await self.create(alice)
        key_hash = self.ctx.key_hasher.hash(key["api_key"])
        assert (await self.ctx.keys.lookup(key_hash)).enabled is True
        await self.call("PUT", f"/api/user/api-keys/{key['id']}", {"enabled": False},
                        token=alice)
        assert (await self.ctx.keys.lookup(key_hash)).enabled is False
        response = await self.call("DELETE", f"/api/user/api-keys/{key['id']}", token=alice)
        assert response.status == 200 and response.json() == {"message": "API key deleted"}
        assert await self.ctx.keys.lookup(key_hash) is None
        again = await self.call("DELETE", f"/api/user/api-keys/{key['id']}", token=alice)
        assert again.status == 404
        assert await self.rows() == []

    async def test_legacy_rotate_creates_or_rotates(self):
        alice, _ = await self.users()
        created = await self.call("POST", "/api/user/api-key/rotate", token=alice)
        assert created.status == 200, created
        body = created.json()
        assert body["name"] == "Default key" and body["api_key"].startswith("sk-")
        assert body["key"]["id"] == body["id"]
        rotated = await self.call("POST", "/api/user/api-key/rotate", {"id": body["id"]},
                                  token=alice)
        assert rotated.status == 200 and rotated.json()["id"] == body["id"]
        assert rotated.json()["api_key"] != body["api_key"]
        assert len(await self.rows()) == 1
        bad = await self.call("POST", "/api/user/api-key/rotate", {"id": "x"}, token=alice)
        assert bad.status == 400 and bad.json()["field"] == "id"
        assert len(await self.rows()) == 1

    async def test_newest_first(self):
        alice, _ = await self.users()
        first = await self.create(alice, {"name": "first"})
        self.clock.advance(1)
        second = await self.create(alice, {"name": "second"})
        listed = (await self.call("GET", "/api/user/api-keys", token=alice)).json()
        assert [k["id"] for k in listed] == [second["id"], first["id"]]


class ApiKeyPostgresTests(ApiKeyTests):
    backend = "postgresql"
