"""``/api/groups``: CRUD, multipliers, the default group and in-use protection."""

from __future__ import annotations

from gateway.invalidation import CATALOG
from tests.console.admin_case import AdminCase

TABLES = ("groups", "settings", "group_memberships")


class GroupTests(AdminCase):
    async def test_list_has_default_user_group(self) -> None:
        response = await self.api("GET", "/api/groups")
        assert response.status == 200
        groups = response.json()
        assert [g["name"] for g in groups] == ["user"]
        assert groups[0]["is_default"] is True
        assert groups[0]["multiplier"] == "1"

    async def test_create_update_delete(self) -> None:
        created = await self.api("POST", "/api/groups", {"name": "vip", "multiplier": 0.8})
        assert created.status == 200, created
        group = created.json()
        assert group["name"] == "vip" and group["multiplier"] == "0.8"
        assert group["is_default"] is False
        assert (CATALOG, b"*") in self.announced
        zero = await self.api("POST", "/api/groups", {"name": "free", "multiplier": "0"})
        assert zero.json()["multiplier"] == "1"
        updated = await self.api("PUT", f"/api/groups/{group['id']}", {"multiplier": "1.25"})
        assert updated.status == 200
        assert updated.json()["name"] == "vip" and updated.json()["multiplier"] == "1.25"
        renamed = await self.api("PUT", f"/api/groups/{group['id']}", {"name": "gold"})
        assert renamed.json()["name"] == "gold" and renamed.json()["multiplier"] == "1.25"
        names = [g["name"] for g in (await self.api("GET", "/api/groups")).json()]
        assert names == ["free", "gold", "user"]
        deleted = await self.api("DELETE", f"/api/groups/{group['id']}")
        assert deleted.json() == {"message": "Group deleted"}
        missing = await self.api("DELETE", f"/api/groups/{group['id']}")
        assert missing.status == 404 and missing.json()["error"] == "Group not found"

    async def test_bad_inputs_change_nothing(self) -> None:
        group = (await self.api("POST", "/api/groups", {"name": "vip"})).json()
        cases = [
            ("POST", "/api/groups", {}, 400, "name"),
            ("POST", "/api/groups", {"name": "  "}, 400, "name"),
            ("POST", "/api/groups", {"name": 5}, 400, "name"),
            ("POST", "/api/groups", {"name": "x" * 51}, 400, "name"),
            ("POST", "/api/groups", {"name": "n", "multiplier": "-1"}, 400, "multiplier"),
            ("POST", "/api/groups", {"name": "n", "multiplier": "abc"}, 400, "multiplier"),
            ("POST", "/api/groups", {"name": "n", "is_default": "yes"}, 400, "is_default"),
            ("POST", "/api/groups", {"name": "vip"}, 409, "name"),
            ("PUT", f"/api/groups/{group['id']}", {"name": "user"}, 409, "name"),
            ("PUT", f"/api/groups/{group['id']}", {"multiplier": -2}, 400, "multiplier"),
            ("PUT", "/api/groups/999", {"name": "z"}, 404, None),
        ]
        for method, path, payload, status, field in cases:
            await self.assert_refused(method, path, payload, status, TABLES, field=field)
        await self.assert_refused("POST", "/api/groups", None, 400, TABLES, data=b"{bad")

    async def test_default_group_rules(self) -> None:
        groups = (await self.api("GET", "/api/groups")).json()
        user_group = groups[0]
        await self.assert_refused("DELETE", f"/api/groups/{user_group['id']}", None, 400, TABLES,
                                  message="Default user group cannot be deleted")
        await self.assert_refused("PUT", f"/api/groups/{user_group['id']}", {"name": "basic"},
                                  400, TABLES, field="name")
        await self.assert_refused("PUT", f"/api/groups/{user_group['id']}",
                                  {"is_default": False}, 400, TABLES, field="is_default")
        vip = (await self.api("POST", "/api/groups", {"name": "vip", "is_default": True})).json()
        assert vip["is_default"] is True
        listed = {g["name"]: g["is_default"] for g in (await self.api("GET", "/api/groups")).json()}
        assert listed == {"user": False, "vip": True}
        assert self.ctx.settings.raw("default_group_id") == str(vip["id"])
        # a pinned default may be renamed and stays the default
        renamed = await self.api("PUT", f"/api/groups/{vip['id']}", {"name": "premium"})
        assert renamed.json()["is_default"] is True
        # new registrations land in the default group
        registered = await self.register("newbie")
        assert registered["user"]["group"]["name"] == "premium"
        # the old default is now an ordinary group; switching back works
        back = await self.api("PUT", f"/api/groups/{user_group['id']}", {"is_default": True})
        assert back.json()["is_default"] is True

    async def test_group_in_use_cannot_be_deleted(self) -> None:
        vip = (await self.api("POST", "/api/groups", {"name": "vip"})).json()
        spare = (await self.api("POST", "/api/groups", {"name": "spare"})).json()
        user = (await self.register("alice"))["user"]
        put = await self.api("PUT", f"/api/users/{user['id']}", {"group_id": vip["id"]})
        assert put.status == 200, put
        await self.assert_refused("DELETE", f"/api/groups/{vip['id']}", None, 400, TABLES,
                                  message="Group is in use")
        channel = await self.api("POST", "/api/channels", {
            "name": "up", "type": "compat", "base_url": "https://api.example.com"})
        multipliers = await self.api("PUT", f"/api/channels/{channel.json()['id']}/group-multipliers",
                                     [{"group_id": spare["id"], "multiplier": "0.5"}])
        assert multipliers.status == 200, multipliers
        await self.assert_refused("DELETE", f"/api/groups/{spare['id']}", None, 400, TABLES,
                                  message="Group is in use")

    async def test_permissions(self) -> None:
        await self.admin()
        user = await self.register("mallory")
        for method, path in (("GET", "/api/groups"), ("POST", "/api/groups"),
                             ("PUT", "/api/groups/1"), ("DELETE", "/api/groups/1")):
            anonymous = await self.call(method, path, {"name": "x"})
            assert anonymous.status == 401, (method, path, anonymous)
            forbidden = await self.call(method, path, {"name": "x"}, token=user["token"])
            assert forbidden.status == 403, (method, path, forbidden)
        assert [g["name"] for g in (await self.api("GET", "/api/groups")).json()] == ["user"]
