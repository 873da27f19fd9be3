"""``/api/user-channels``: fields, normalisation, rate-limit rules, access grants, delete."""

from __future__ import annotations

from gateway.invalidation import CATALOG
from tests.console.admin_case import AdminCase

TABLES = ("user_channels", "user_channel_access", "channels")


class UserChannelTests(AdminCase):
    async def create(self, **fields: object) -> dict:
        response = await self.api("POST", "/api/user-channels", {"name": "standard", **fields})
        assert response.status == 200, response
        return response.json()

    async def test_create_with_defaults_and_explicit_false_zero(self) -> None:
        plain = await self.create()
        assert plain["routing_algorithm"] == "priority" and plain["enabled"] is True
        assert plain["multiplier"] == "1" and plain["description"] == ""
        assert plain["rate_limit_enabled"] is False
        assert plain["channels"] == [] and plain["allowed_groups"] == []
        assert plain["allowed_users"] == []
        off = await self.create(name="off", enabled=False, multiplier="0", routing_algorithm="RR",
                                description="cheap", rate_limit_enabled=True,
                                rate_limit_requests_per_minute=60, rate_limit_burst=0)
        assert off["enabled"] is False and off["multiplier"] == "1"
        assert off["routing_algorithm"] == "round_robin" and off["description"] == "cheap"
        assert off["rate_limit_requests_per_minute"] == 60 and off["rate_limit_burst"] == 0
        assert (CATALOG, b"*") in self.announced

    async def test_routing_algorithm_aliases(self) -> None:
        uc = await self.create()
        for given, expected in (("wrr", "weighted_round_robin"), ("Weighted", "weighted_round_robin"),
                                ("weighted_roundrobin", "weighted_round_robin"),
                                ("roundrobin", "round_robin"), ("round-robin", "round_robin"),
                                ("nonsense", "priority")):
            response = await self.api("PUT", f"/api/user-channels/{uc['id']}",
                                      {"routing_algorithm": given})
            assert response.json()["routing_algorithm"] == expected, given

    async def test_put_merges(self) -> None:
        uc = await self.create(description="d", multiplier="1.5")
        response = await self.api("PUT", f"/api/user-channels/{uc['id']}", {"enabled": False})
        body = response.json()
        assert body["enabled"] is False and body["description"] == "d"
        assert body["multiplier"] == "1.5" and body["name"] == "standard"

    async def test_bad_inputs_change_nothing(self) -> None:
        uc = await self.create()
        await self.create(name="other")
        path = f"/api/user-channels/{uc['id']}"
        rpm_error = "Rate limit requests per minute must be between 1 and 1000000"
        cases = [
            ("POST", "/api/user-channels", {}, 400, "name"),
            ("POST", "/api/user-channels", {"name": "standard"}, 409, "name"),
            ("POST", "/api/user-channels", {"name": "x", "multiplier": -1}, 400, "multiplier"),
            ("POST", "/api/user-channels", {"name": "x", "rate_limit_enabled": True}, 400,
             "rate_limit_requests_per_minute"),
            ("POST", "/api/user-channels", {"name": "x", "rate_limit_enabled": True,
                                            "rate_limit_requests_per_minute": 10,
                                            "rate_limit_burst": 1_000_001}, 400,
             "rate_limit_burst"),
            ("POST", "/api/user-channels", {"name": "x", "rate_limit_burst": -1}, 400,
             "rate_limit_burst"),
            ("POST", "/api/user-channels", {"name": "x", "enabled": "no"}, 400, "enabled"),
            ("PUT", path, {"name": "other"}, 409, "name"),
            ("PUT", path, {"name": ""}, 400, "name"),
            ("PUT", path, {"rate_limit_enabled": True}, 400, "rate_limit_requests_per_minute"),
            ("PUT", "/api/user-channels/999", {"name": "z"}, 404, None),
        ]
        for method, target, payload, status, field in cases:
            await self.assert_refused(method, target, payload, status, TABLES, field=field)
        await self.assert_refused("PUT", path, {"rate_limit_enabled": True}, 400, TABLES,
                                  message=rpm_error)

    async def test_nested_channels_in_body_are_ignored(self) -> None:
        uc = await self.create(channels=[{"name": "evil", "base_url": "http://169.254.169.254"}],
                               id=77, created_at="2000-01-01T00:00:00Z")
        assert uc["channels"] == [] and uc["id"] != 77
        assert await self.rows("channels") == []

    async def test_access_grants(self) -> None:
        uc = await self.create()
        vip = (await self.api("POST", "/api/groups", {"name": "vip"})).json()
        alice = (await self.register("alice"))["user"]
        groups = await self.api("PUT", f"/api/user-channels/{uc['id']}/allowed-groups",
                                {"group_ids": [vip["id"], vip["id"]]})
        assert groups.status == 200, groups
        assert [(g["group_id"], g["group"]["name"]) for g in groups.json()] == [
            (vip["id"], "vip")]
        users = await self.api("PUT", f"/api/user-channels/{uc['id']}/allowed-users",
                               {"user_ids": [alice["id"]]})
        assert [(u["user_id"], u["user"]["username"]) for u in users.json()] == [
            (alice["id"], "alice")]
        assert "password_hash" not in users.json()[0]["user"]
        listed = (await self.api("GET", "/api/user-channels")).json()[0]
        assert len(listed["allowed_groups"]) == 1 and len(listed["allowed_users"]) == 1
        for path, payload, field in (
            ("allowed-groups", {"group_ids": [vip["id"], 999]}, "group_ids"),
            ("allowed-users", {"user_ids": [998]}, "user_ids"),
            ("allowed-users", {"user_ids": "1"}, "user_ids"),
            ("allowed-groups", {}, "group_ids"),
        ):
            await self.assert_refused("PUT", f"/api/user-channels/{uc['id']}/{path}", payload,
                                      400, TABLES, field=field)
        cleared = await self.api("PUT", f"/api/user-channels/{uc['id']}/allowed-groups",
                                 {"group_ids": []})
        assert cleared.json() == []
        still = (await self.api("GET", f"/api/user-channels/{uc['id']}")).json()
        assert still["allowed_groups"] == [] and len(still["allowed_users"]) == 1

    async def test_list_embeds_channels_without_keys(self) -> None:
        uc = await self.create()
        channel = await self.api("POST", "/api/channels", {
            "name": "up-a", "type": "compat", "base_url": "https://api.example.com",
            "api_key": "sk-secret-upstream-key-1234", "user_channel_id": uc["id"]})
        assert channel.status == 200, channel
        listed = (await self.api("GET", "/api/user-channels")).json()
        embedded = listed[0]["channels"]
        assert [c["name"] for c in embedded] == ["up-a"]
        assert "api_key" not in embedded[0] and embedded[0]["has_api_key"] is True
        assert b"sk-secret-upstream-key-1234" not in (
            await self.api("GET", "/api/user-channels")).body

    async def test_delete_detaches_channels_and_drops_grants(self) -> None:
        uc = await self.create()
        vip = (await self.api("POST", "/api/groups", {"name": "vip"})).json()
        await self.api("PUT", f"/api/user-channels/{uc['id']}/allowed-groups",
                       {"group_ids": [vip["id"]]})
        channel = (await self.api("POST", "/api/channels", {
            "name": "up-a", "type": "compat", "base_url": "https://api.example.com",
            "user_channel_id": uc["id"]})).json()
        deleted = await self.api("DELETE", f"/api/user-channels/{uc['id']}")
        assert deleted.json() == {"message": "User channel deleted"}
        kept = (await self.api("GET", f"/api/channels/{channel['id']}")).json()
        assert kept["user_channel_id"] is None and kept["user_channel"] is None
        assert await self.rows("user_channel_access") == []
        assert (await self.api("DELETE", f"/api/user-channels/{uc['id']}")).status == 404

    async def test_permissions(self) -> None:
        await self.admin()
        user = await self.register("mallory")
        for method, path in (("GET", "/api/user-channels"), ("POST", "/api/user-channels"),
                             ("PUT", "/api/user-channels/1"), ("DELETE", "/api/user-channels/1"),
                             ("PUT", "/api/user-channels/1/allowed-users")):
            assert (await self.call(method, path, {"name": "x"})).status == 401
            assert (await self.call(method, path, {"name": "x"},
                                    token=user["token"])).status == 403
        assert await self.rows("user_channels") == []
