"""``/api/users`` (admin): listing, updates with ledgered balance changes, token revocation,
last-admin and self-protection, cascading delete."""

from __future__ import annotations

from datetime import timedelta

from sqlalchemy import select, update
from twisted.internet.defer import ensureDeferred, gatherResults

from gateway.invalidation import USERS
from gateway.store import schema
from tests.console.admin_case import AdminCase

TABLES = ("users", "group_memberships", "ledger")


class AdminUserTests(AdminCase):
    async def make_group(self, name: str) -> int:
        response = await self.api("POST", "/api/groups", {"name": name})
        assert response.status == 200, response
        return response.json()["id"]

    async def test_list_plain_and_paginated(self) -> None:
        await self.admin()
        for name in ("alice", "bob", "carol"):
            await self.register(name)
            self.clock.advance(1)
        plain = await self.api("GET", "/api/users")
        assert plain.status == 200
        names = [u["username"] for u in plain.json()]
        assert names == ["carol", "bob", "alice", "admin"]
        assert "password_hash" not in plain.json()[0]
        assert plain.json()[0]["group"]["name"] == "user"
        assert plain.json()[0]["groups"][0]["group"]["name"] == "user"
        page = await self.api("GET", "/api/users?page=2&page_size=2")
        assert page.json()["total"] == 4 and page.json()["page"] == 2
        assert [u["username"] for u in page.json()["items"]] == ["alice", "admin"]
        found = await self.api("GET", "/api/users?search=AR")
        assert [u["username"] for u in found.json()["items"]] == ["carol"]
        assert found.json()["page_size"] == 20
        clamped = await self.api("GET", "/api/users?page_size=1000&page=x")
        assert clamped.json()["page_size"] == 100 and clamped.json()["page"] == 1
        wildcard = await self.api("GET", "/api/users?search=%25")
        assert wildcard.json()["items"] == []

    async def test_update_profile_and_balance_writes_ledger(self) -> None:
        token = await self.admin()
        admin_id = (await self.call("GET", "/api/user/me", token=token)).json()["id"]
        alice = (await self.register("alice"))["user"]
        response = await self.api("PUT", f"/api/users/{alice['id']}", {
            "username": "alice2", "email": "ALICE2@example.com", "balance": "12.5"})
        assert response.status == 200, response
        body = response.json()
        assert body["username"] == "alice2" and body["email"] == "alice2@example.com"
        assert body["balance"] == "12.5"
        lower = await self.api("PUT", f"/api/users/{alice['id']}", {"balance": 2})
        assert lower.json()["balance"] == "2"
        same = await self.api("PUT", f"/api/users/{alice['id']}", {"balance": "2.000"})
        assert same.status == 200
        ledger = await self.rows("ledger")
        assert [(r["kind"], r["amount_nanos"], r["balance_after_nanos"], r["actor_user_id"])
                for r in ledger] == [
            ("admin_adjust", 12_500_000_000, 12_500_000_000, admin_id),
            ("admin_adjust", -10_500_000_000, 2_000_000_000, admin_id),
        ]
        assert sum(r["amount_nanos"] for r in ledger) == 2_000_000_000
        assert (USERS, str(alice["id"]).encode()) in self.announced

    async def test_bad_updates_change_nothing(self) -> None:
        await self.admin()
        alice = (await self.register("alice"))["user"]
        await self.register("bob")
        path = f"/api/users/{alice['id']}"
        cases = [
            ({}, 400, None),
            ({"unknown": 1}, 400, None),
            ({"balance": "-1"}, 400, "balance"),
            ({"balance": "1e30"}, 400, "balance"),
            ({"balance": True}, 400, "balance"),
            ({"username": "bob"}, 409, "username"),
            ({"email": "bob@example.com"}, 409, "email"),
            ({"email": "not an email"}, 400, "email"),
            ({"username": "a b"}, 400, "username"),
            ({"group_id": 0}, 400, "group_id"),
            ({"group_id": 999}, 400, "group_id"),
            ({"group_ids": []}, 400, "group_ids"),
            ({"group_ids": [999]}, 400, "group_ids"),
            ({"group_ids": ["1"]}, 400, "group_ids"),
            ({"is_admin": "true"}, 400, "is_admin"),
            ({"enabled": 0}, 400, "enabled"),
            # a valid balance with an invalid group: the whole update is refused
            ({"balance": "5", "group_id": 999}, 400, "group_id"),
        ]
        for payload, status, field in cases:
            await self.assert_refused("PUT", path, payload, status, TABLES, field=field)
        await self.assert_refused("PUT", "/api/users/999", {"balance": 1}, 404, TABLES,
                                  message="User not found")

    async def test_group_ids_replace_permanent_memberships(self) -> None:
        await self.admin()
        alice = (await self.register("alice"))["user"]
        vip = await self.make_group("vip")
        pro = await self.make_group("pro")
        trial = await self.make_group("trial")
        user_group = alice["group_id"]

        def add_timed(conn: object) -> None:
            conn.execute(schema.group_memberships.insert().values(  # type: ignore[attr-defined]
                user_id=alice["id"], group_id=trial, expires_at=self.ctx.now() + timedelta(days=3),
                created_at=self.ctx.now(), updated_at=self.ctx.now()))

        await self.ctx.db.transaction(add_timed)
        response = await self.api("PUT", f"/api/users/{alice['id']}", {"group_ids": [vip, pro]})
        assert response.status == 200, response
        body = response.json()
        assert body["group_id"] == vip  # current primary not in the set -> first listed
        memberships = {m["group_id"]: m["expires_at"] for m in body["groups"]}
        assert set(memberships) == {vip, pro, trial}
        assert memberships[trial] is not None  # timed membership kept
        assert user_group not in memberships
        # origin's group_id: moves the primary group, drops the old permanent membership
        moved = (await self.api("PUT", f"/api/users/{alice['id']}", {"group_id": user_group})
                 ).json()
        assert moved["group_id"] == user_group
        assert {m["group_id"] for m in moved["groups"]} == {pro, trial, user_group}
        both = await self.api("PUT", f"/api/users/{alice['id']}",
                              {"group_ids": [vip, pro], "group_id": pro})
        assert both.json()["group_id"] == pro
        await self.assert_refused("PUT", f"/api/users/{alice['id']}",
                                  {"group_ids": [vip], "group_id": pro}, 400, TABLES,
                                  field="group_id")

    async def test_disable_and_demote_revoke_tokens(self) -> None:
        await self.admin()
        alice = await self.register("alice")
        bob = await self.register("bob")
        me = await self.call("GET", "/api/user/me", token=alice["token"])
        assert me.status == 200
        disabled = await self.api("PUT", f"/api/users/{alice['user']['id']}", {"enabled": False})
        assert disabled.status == 200 and disabled.json()["enabled"] is False
        assert (await self.call("GET", "/api/user/me", token=alice["token"])).status == 401
        promoted = await self.api("PUT", f"/api/users/{bob['user']['id']}", {"is_admin": True})
        assert promoted.json()["is_admin"] is True
        # promotion does not revoke; bob's token now opens admin routes
        assert (await self.call("GET", "/api/groups", token=bob["token"])).status == 200
        demoted = await self.api("PUT", f"/api/users/{bob['user']['id']}", {"is_admin": False})
        assert demoted.json()["is_admin"] is False
        assert (await self.call("GET", "/api/groups", token=bob["token"])).status == 401

    async def test_self_and_last_admin_protection(self) -> None:
        token = await self.admin()
        admin_id = (await self.call("GET", "/api/user/me", token=token)).json()["id"]
        for payload, field in (({"is_admin": False}, "is_admin"), ({"enabled": False}, "enabled")):
            await self.assert_refused("PUT", f"/api/users/{admin_id}", payload, 400, TABLES,
                                      field=field)
        await self.assert_refused("DELETE", f"/api/users/{admin_id}", None, 400, TABLES)
        # the admin may still edit their own profile
        ok = await self.api("PUT", f"/api/users/{admin_id}", {"is_admin": True, "balance": 1})
        assert ok.status == 200
        assert (await self.call("GET", "/api/user/me", token=token)).status == 200

    async def test_two_admins_demoting_each_other_leaves_one(self) -> None:
        token_a = await self.admin()
        a_id = (await self.call("GET", "/api/user/me", token=token_a)).json()["id"]
        bob = await self.register("bob")
        await self.api("PUT", f"/api/users/{bob['user']['id']}", {"is_admin": True})
        results = await gatherResults([
            ensureDeferred(self.call("PUT", f"/api/users/{bob['user']['id']}",
                                     {"is_admin": False}, token=token_a)),
            ensureDeferred(self.call("PUT", f"/api/users/{a_id}", {"is_admin": False},
                                     token=bob["token"])),
        ])
        statuses = sorted(r.status for r in results)
        assert statuses[0] == 200 and statuses[1] in (400, 401), results
        admins = [u for u in await self.rows("users") if u["is_admin"] and u["enabled"]]
        assert len(admins) == 1

    async def test_delete_cascades_and_revokes(self) -> None:
        await self.admin()
        alice = await self.register("alice")
        bob = await self.register("bob")
        alice_id = alice["user"]["id"]

        def add_key_and_referral(conn: object) -> None:
            now = self.ctx.now()
            conn.execute(schema.api_keys.insert().values(  # type: ignore[attr-defined]
                user_id=alice_id, name="k", key_hash="h" * 64, key_prefix="sk-x",
                created_at=now, updated_at=now))
            conn.execute(update(schema.users)  # type: ignore[attr-defined]
                         .where(schema.users.c.id == bob["user"]["id"])
                         .values(referrer_id=alice_id))

        await self.ctx.db.transaction(add_key_and_referral)
        await self.api("PUT", f"/api/users/{alice_id}", {"balance": 3})
        deleted = await self.api("DELETE", f"/api/users/{alice_id}")
        assert deleted.json() == {"message": "User deleted"}
        assert (await self.call("GET", "/api/user/me", token=alice["token"])).status == 401
        assert await self.rows("api_keys") == []
        assert all(m["user_id"] != alice_id for m in await self.rows("group_memberships"))
        assert all(r["user_id"] != alice_id for r in await self.rows("ledger"))
        bob_row = await self.ctx.db.transaction(lambda conn: conn.execute(
            select(schema.users.c.referrer_id).where(schema.users.c.id == bob["user"]["id"])
        ).scalar())
        assert bob_row is None
        again = await self.api("DELETE", f"/api/users/{alice_id}")
        assert again.status == 404

    async def test_permissions(self) -> None:
        await self.admin()
        user = await self.register("mallory")
        uid = user["user"]["id"]
        for method, path in (("GET", "/api/users"), ("PUT", f"/api/users/{uid}"),
                             ("DELETE", f"/api/users/{uid}")):
            assert (await self.call(method, path, {"is_admin": True})).status == 401
            forbidden = await self.call(method, path, {"is_admin": True}, token=user["token"])
            assert forbidden.status == 403, forbidden
        rows = {u["username"]: u["is_admin"] for u in await self.rows("users")}
        assert rows == {"admin": True, "mallory": False}


class AdminUserOnPostgresTests(AdminUserTests):
    backend = "postgresql"
