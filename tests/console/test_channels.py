"""``/api/channels``: upstream channels, URL policy, write-only keys, health reset, price sync
defaults, group multipliers and cascading delete."""

from __future__ import annotations

from sqlalchemy import update

from gateway.store import schema
from tests.console.admin_case import AdminCase

TABLES = ("channels", "channel_group_multipliers", "channel_models", "models")
KEY = "sk-abcdefghijklmnop9xYz"


class ChannelTests(AdminCase):
    async def create(self, **fields: object) -> dict:
        payload = {"name": "up-a", "type": "compat", "base_url": "https://api.example.com/v1",
                   **fields}
        response = await self.api("POST", "/api/channels", payload)
        assert response.status == 200, response
        return response.json()

    async def test_create_defaults_and_explicit_values(self) -> None:
        channel = await self.create(api_key=KEY)
        assert channel["priority"] == 1 and channel["weight"] == 1
        assert channel["enabled"] is True and channel["price_sync_enabled"] is False
        assert channel["price_sync_cron"] == "" and channel["last_health_status"] == "pending"
        assert channel["has_api_key"] is True and channel["api_key_masked"] == "sk-a...9xYz"
        assert "api_key" not in channel
        assert channel["models"] == [] and channel["group_multipliers"] == []
        zero = await self.create(name="z", priority=0, weight=0, enabled=False)
        assert zero["priority"] == 0 and zero["weight"] == 0 and zero["enabled"] is False
        assert zero["has_api_key"] is False and zero["api_key_masked"] == ""

    async def test_type_normalisation(self) -> None:
        cases = {"Compat": "compat", "responses": "responses", "RESPONSE": "responses",
                 "compat_video": "compat-video", "Compat Video": "compat-video",
                 "imgvideo": "imgvideo", "img_video": "imgvideo", "messages": "messages",
                 "model_action": "modelaction", "ModelAction": "modelaction",
                 "art-job": "artjob", "artjob": "artjob", "whatever": "compat"}
        for index, (given, expected) in enumerate(cases.items()):
            channel = await self.create(name=f"c{index}", type=given)
            assert channel["type"] == expected, given
        await self.assert_refused("POST", "/api/channels", {
            "name": "p", "type": "plugin:foo", "base_url": "https://a.example"}, 400, TABLES,
            field="type")

    async def test_base_url_policy(self) -> None:
        for url in ("http://169.254.169.254/latest", "http://127.0.0.1:8080",
                    "http://10.0.0.1", "ftp://a.example", "https://u:p@a.example",
                    "https://a.example/#x", "http://metadata.google.internal"):
            await self.assert_refused("POST", "/api/channels", {
                "name": "bad", "type": "compat", "base_url": url}, 400, TABLES,
                field="base_url")
        channel = await self.create()
        await self.assert_refused("PUT", f"/api/channels/{channel['id']}",
                                  {"base_url": "http://192.168.0.10"}, 400, TABLES,
                                  field="base_url")
        await self.ctx.live_settings.save({"ssrf_allow_private_networks": "true"}, self.ctx.now())
        local = await self.create(name="local", base_url="http://127.0.0.1:11434")
        assert local["base_url"] == "http://127.0.0.1:11434"
        await self.assert_refused("POST", "/api/channels", {
            "name": "meta", "type": "compat", "base_url": "http://169.254.169.254"}, 400, TABLES,
            field="base_url")
        await self.ctx.live_settings.save({"ssrf_allow_private_networks": "false",
                                           "ssrf_allowed_hosts": "10.9.0.0/16"}, self.ctx.now())
        assert (await self.create(name="listed", base_url="http://10.9.1.1/v1"))["id"]
        await self.ctx.live_settings.save({"ssrf_protection_enabled": "false"}, self.ctx.now())
        assert (await self.create(name="open", base_url="http://192.168.1.1"))["id"]

    async def test_odd_host_spellings_are_refused_or_normalised(self) -> None:
        for url in ("http://127\u30020\u30020\u30021:8080/v1", "http://127\uff0e0\uff0e0\uff0e1/",
                    "http://%31%32%37.0.0.1/", "http://169.254.169.254.nip.io/latest",
                    "http://10-0-0-1.sslip.io/v1", "http://app-7f000001.nip.io/"):
            await self.assert_refused("POST", "/api/channels", {
                "name": "odd", "type": "compat", "base_url": url}, 400, TABLES,
                field="base_url")
        refused = await self.api("POST", "/api/channels", {
            "name": "odd", "type": "compat", "base_url": "http://127\u30020\u30020\u30021/"})
        assert "ssrf_allow_private_networks" in refused.json()["error"]
        # a real international name is stored in its ASCII form
        idn = await self.create(name="idn", base_url="https://b\u00fccher.example/v1")
        assert idn["base_url"] == "https://xn--bcher-kva.example/v1"
        # public addresses spelled into names are fine
        aws = await self.create(name="aws", base_url="https://ec2-54-1-2-3.compute.example/v1")
        assert aws["id"]

    async def test_header_unsafe_api_keys_are_refused(self) -> None:
        channel = await self.create(api_key=KEY)
        for key in ("sk-caf\u00e9", "sk-\u2603", "sk-a\x00b", "sk-a\x7fb", "sk-a\nb"):
            await self.assert_refused("POST", "/api/channels", {
                "name": "k", "type": "compat", "base_url": "https://a.example", "api_key": key},
                400, TABLES, field="api_key")
            await self.assert_refused("PUT", f"/api/channels/{channel['id']}", {"api_key": key},
                                      400, TABLES, field="api_key")

    async def test_api_key_is_write_only_and_kept_on_blank(self) -> None:
        channel = await self.create(api_key=KEY)
        for body in ({"name": "renamed"}, {"api_key": ""}, {"api_key": "   "}):
            response = await self.api("PUT", f"/api/channels/{channel['id']}", body)
            assert response.status == 200
        stored = (await self.rows("channels"))[0]
        assert stored["api_key"] == KEY and stored["name"] == "renamed"
        listing = await self.api("GET", "/api/channels")
        assert KEY.encode() not in listing.body
        assert listing.json()[0]["api_key_masked"] == "sk-a...9xYz"
        await self.api("PUT", f"/api/channels/{channel['id']}", {"api_key": "sk-new-key-000000"})
        assert (await self.rows("channels"))[0]["api_key"] == "sk-new-key-000000"

    async def test_health_fields_read_only_and_reset_on_enable(self) -> None:
        channel = await self.create()
        cid = channel["id"]
        ignored = await self.api("PUT", f"/api/channels/{cid}", {
            "consecutive_failures": 9, "last_health_status": "down", "auto_disabled_reason": "x"})
        assert ignored.json()["consecutive_failures"] == 0
        now = self.ctx.now()

        def break_it(conn: object) -> None:
            conn.execute(update(schema.channels).where(schema.channels.c.id == cid).values(  # type: ignore[attr-defined]
                enabled=False, consecutive_failures=5, last_failure_at=now,
                last_failure_reason="boom", auto_disabled_at=now,
                auto_disabled_reason="too many failures", last_health_status="down"))

        await self.ctx.db.transaction(break_it)
        still = (await self.api("PUT", f"/api/channels/{cid}", {"weight": 3})).json()
        assert still["consecutive_failures"] == 5 and still["last_health_status"] == "down"
        enabled = (await self.api("PUT", f"/api/channels/{cid}", {"enabled": True})).json()
        assert enabled["consecutive_failures"] == 0 and enabled["last_failure_at"] is None
        assert enabled["auto_disabled_at"] is None and enabled["auto_disabled_reason"] == ""
        assert enabled["last_failure_reason"] == ""
        assert enabled["last_health_status"] == "pending"

    async def test_price_sync_fields(self) -> None:
        channel = await self.create(price_sync_enabled=True)
        assert channel["price_sync_cron"] == "0 * * * *"
        custom = await self.create(name="b", price_sync_cron="*/15  2-4 * JAN-MAR mon")
        assert custom["price_sync_cron"] == "*/15 2-4 * JAN-MAR mon"
        assert custom["price_sync_enabled"] is False
        daily = await self.create(name="c", price_sync_cron="@daily")
        assert daily["price_sync_cron"] == "@daily"
        for cron in ("* * * *", "61 * * * *", "* 24 * * *", "*/0 * * * *", "@sometimes",
                     "a b c d e", "5-1 * * * *"):
            await self.assert_refused("POST", "/api/channels", {
                "name": "x", "type": "compat", "base_url": "https://a.example",
                "price_sync_cron": cron}, 400, TABLES, field="price_sync_cron")

    async def test_other_bad_inputs_change_nothing(self) -> None:
        channel = await self.create()
        cases = [
            ("POST", "/api/channels", {"type": "compat", "base_url": "https://a.example"}, 400,
             "name"),
            ("POST", "/api/channels", {"name": "x", "base_url": "https://a.example"}, 400, "type"),
            ("POST", "/api/channels", {"name": "x", "type": "compat"}, 400, "base_url"),
            ("POST", "/api/channels", {"name": "x", "type": "compat",
                                       "base_url": "https://a.example", "weight": -1}, 400,
             "weight"),
            ("POST", "/api/channels", {"name": "x", "type": "compat",
                                       "base_url": "https://a.example", "priority": "high"},
             400, "priority"),
            ("POST", "/api/channels", {"name": "x", "type": "compat",
                                       "base_url": "https://a.example", "user_channel_id": 42},
             400, "user_channel_id"),
            ("POST", "/api/channels", {"name": "x", "type": "compat",
                                       "base_url": "https://a.example", "multiplier": "-0.1"},
             400, "multiplier"),
            ("PUT", f"/api/channels/{channel['id']}", {"base_url": ""}, 400, "base_url"),
            ("PUT", f"/api/channels/{channel['id']}", {"enabled": "yes"}, 400, "enabled"),
            ("PUT", "/api/channels/999", {"name": "n"}, 404, None),
        ]
        for method, path, payload, status, field in cases:
            await self.assert_refused(method, path, payload, status, TABLES, field=field)

    async def test_user_channel_attach_and_detach(self) -> None:
        uc = (await self.api("POST", "/api/user-channels", {"name": "standard"})).json()
        channel = await self.create(user_channel_id=uc["id"])
        assert channel["user_channel"]["name"] == "standard"
        detached = await self.api("PUT", f"/api/channels/{channel['id']}",
                                  {"user_channel_id": None})
        assert detached.json()["user_channel_id"] is None

    async def test_group_multipliers_replace_all(self) -> None:
        channel = await self.create()
        vip = (await self.api("POST", "/api/groups", {"name": "vip"})).json()
        pro = (await self.api("POST", "/api/groups", {"name": "pro"})).json()
        path = f"/api/channels/{channel['id']}/group-multipliers"
        first = await self.api("PUT", path, [{"group_id": vip["id"], "multiplier": "0.8"},
                                             {"group_id": pro["id"], "multiplier": 1.5},
                                             {"group_id": 0, "multiplier": "2"},
                                             {"group_id": pro["id"] + 100, "multiplier": 0}])
        assert first.status == 200, first
        assert [(m["group"]["name"], m["multiplier"]) for m in first.json()] == [
            ("vip", "0.8"), ("pro", "1.5")]
        second = await self.api("PUT", path, [{"group_id": pro["id"], "multiplier": "2"}])
        assert [(m["group_id"], m["multiplier"]) for m in second.json()] == [(pro["id"], "2")]
        embedded = (await self.api("GET", f"/api/channels/{channel['id']}")).json()
        assert [m["multiplier"] for m in embedded["group_multipliers"]] == ["2"]
        for payload, field in (
            ([{"group_id": 999, "multiplier": "1"}], "group_id"),
            ([{"group_id": vip["id"], "multiplier": "-1"}], "multiplier"),
            ([{"group_id": vip["id"], "multiplier": "x"}], "multiplier"),
            ([{"group_id": vip["id"], "multiplier": 1}, {"group_id": vip["id"], "multiplier": 2}],
             "group_id"),
            ([{"group_id": "1", "multiplier": 1}], "group_id"),
            ({"group_id": vip["id"]}, None),
        ):
            await self.assert_refused("PUT", path, payload, 400, TABLES, field=field)
        await self.assert_refused("PUT", "/api/channels/999/group-multipliers", [], 404, TABLES)
        cleared = await self.api("PUT", path, [])
        assert cleared.json() == []

    async def test_delete_cascades(self) -> None:
        channel = await self.create()
        vip = (await self.api("POST", "/api/groups", {"name": "vip"})).json()
        await self.api("PUT", f"/api/channels/{channel['id']}/group-multipliers",
                       [{"group_id": vip["id"], "multiplier": "0.5"}])
        config = await self.api("POST", f"/api/channels/{channel['id']}/models",
                                {"model_name": "fast-small"})
        assert config.status == 200, config
        await self.api("PUT", f"/api/channel-models/{config.json()['id']}/group-multipliers",
                       [{"group_id": vip["id"], "multiplier": "0.7"}])
        deleted = await self.api("DELETE", f"/api/channels/{channel['id']}")
        assert deleted.json() == {"message": "Channel deleted"}
        for table in ("channels", "channel_group_multipliers", "channel_models",
                      "channel_model_group_multipliers"):
            assert await self.rows(table) == [], table
        assert [m["model_name"] for m in await self.rows("models")] == ["fast-small"]
        assert (await self.api("DELETE", f"/api/channels/{channel['id']}")).status == 404

    async def test_permissions(self) -> None:
        await self.admin()
        user = await self.register("mallory")
        for method, path in (("GET", "/api/channels"), ("POST", "/api/channels"),
                             ("PUT", "/api/channels/1"), ("DELETE", "/api/channels/1"),
                             ("PUT", "/api/channels/1/group-multipliers"),
                             ("GET", "/api/channels/1/models"),
                             ("POST", "/api/channels/1/models")):
            assert (await self.call(method, path, {"name": "x"})).status == 401
            assert (await self.call(method, path, {"name": "x"},
                                    token=user["token"])).status == 403
        assert await self.rows("channels") == []


class ChannelOnPostgresTests(ChannelTests):
    backend = "postgresql"
