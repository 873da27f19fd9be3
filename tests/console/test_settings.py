"""``GET/PUT /api/settings`` and ``GET /api/public/settings`` over real HTTP (contract §3.1, §5.4).

Covers who may call them, the all-or-nothing PUT, the contract's validation messages, secrets
(never returned, kept when blank, nested secrets too), aliases and the public view.
"""

from __future__ import annotations

from typing import Any

import orjson

from gateway.settings.catalog import SPECS
from gateway.store.settings_rows import read_settings
from tests.support.app import AppTestCase

SECRETS = sorted(key for key, spec in SPECS.items() if spec.secret and key != "redis_password")
MARK = "SeCrEtMaRk"


class SettingsTestCase(AppTestCase):
    async def admin(self) -> str:
        return await self.setup_admin()

    async def stored(self) -> dict[str, str]:
        return await self.ctx.db.transaction(read_settings)

    async def put(self, token: str, body: Any) -> Any:
        return await self.call("PUT", "/api/settings", body, token=token)


class SettingsAccessTests(SettingsTestCase):
    async def test_admin_reads_full_object_with_typed_values(self) -> None:
        token = await self.admin()
        response = await self.call("GET", "/api/settings", token=token)
        assert response.status == 200, response
        body = response.json()
        assert body["edition"] == "premium"
        assert body["password_login_enabled"] is True
        assert body["top_nav_enabled"] is False
        assert body["rate_limit_requests_per_minute"] == "60"
        assert body["log_retention_days"] == "30"
        assert body["session_lifetime_hours"] == "168"
        assert body["theme_light_background"] == "#ffffff"
        assert body["theme_dark_muted_foreground"] == "#94a3b8"
        assert body["sidebar_data_board_enabled"] is True
        assert body["payment_recharge_presets"] == '["5","10","20","50","100"]'
        assert body["redis_address"] == "127.0.0.1:6379"
        assert body["redis_password_set"] is False
        assert body["smtp_security"] == "starttls"
        for key in [*SECRETS, "redis_password", "sensitive_words", "setup_completed_at", "auto_update_last_error"]:
            assert key not in body, key
        missing = [k for k, s in SPECS.items()
                   if not (s.secret or s.writeonly or s.internal) and k not in body]
        assert missing == []

    async def test_no_token_is_401(self) -> None:
        await self.admin()
        for method, body in (("GET", None), ("PUT", {"site_name": "x"})):
            response = await self.call(method, "/api/settings", body)
            assert response.status == 401, response
            assert response.json() == {"error": "Authorization is required",
                                       "type": "unauthorized"}
        assert self.ctx.settings.text("site_name") == "Lockgate"

    async def test_non_admin_is_403(self) -> None:
        await self.admin()
        user = await self.register("alice")
        for method, body in (("GET", None), ("PUT", {"site_name": "Hijacked"})):
            response = await self.call(method, "/api/settings", body, token=user["token"])
            assert response.status == 403, response
            assert response.json()["error"] == "Admin access required"
        assert "site_name" not in await self.stored()

    async def test_api_key_token_is_401(self) -> None:
        await self.admin()
        response = await self.call("GET", "/api/settings", token="sk-" + "a" * 48)
        assert response.status == 401
        response = await self.call("GET", "/api/settings", headers={"x-api-key": "sk-abc"})
        assert response.status == 401

    async def test_garbage_and_malformed_bearer_are_401(self) -> None:
        await self.admin()
        for header in ("Bearer not.a.jwt", "Bearer", "Basic abc", "Bearer a b"):
            response = await self.call("GET", "/api/settings",
                                       headers={"Authorization": header})
            assert response.status == 401, (header, response)

    async def test_public_settings_need_no_token(self) -> None:
        response = await self.call("GET", "/api/public/settings")
        assert response.status == 200
        assert response.json()["site_name"] == "Lockgate"


class SettingsUpdateTests(SettingsTestCase):
    async def test_partial_update_returns_full_object_and_persists(self) -> None:
        token = await self.admin()
        response = await self.put(token, {"site_name": "  Acme AI  ", "top_nav_enabled": True,
                                          "rate_limit_requests_per_minute": 120})
        assert response.status == 200, response
        body = response.json()
        assert body["site_name"] == "Acme AI"
        assert body["top_nav_enabled"] is True
        assert body["rate_limit_requests_per_minute"] == "120"
        assert body["password_login_enabled"] is True
        stored = await self.stored()
        assert stored["site_name"] == "Acme AI"
        assert stored["rate_limit_requests_per_minute"] == "120"
        assert self.ctx.settings.integer("rate_limit_requests_per_minute") == 120
        again = await self.call("GET", "/api/settings", token=token)
        assert again.json()["site_name"] == "Acme AI"

    async def test_one_invalid_key_changes_nothing(self) -> None:
        token = await self.admin()
        before = await self.stored()
        response = await self.put(token, {
            "site_name": "Changed", "footer_text": "hello", "log_retention_days": 0,
            "top_nav_enabled": True})
        assert response.status == 400, response
        assert response.json() == {
            "error": "Log retention must be between 1 and 3650 days",
            "type": "invalid_request", "field": "log_retention_days"}
        assert await self.stored() == before
        assert self.ctx.settings.text("site_name") == "Lockgate"

    async def test_outbound_urls_with_odd_host_spellings(self) -> None:
        token = await self.admin()
        before = await self.stored()
        for key in ("oidc_issuer", "hcaptcha_verify_url", "payment_stripe_base_url",
                    "auto_update_release_url"):
            response = await self.put(token, {key: "http://%31%32%37.0.0.1/"})
            assert response.status == 400, response
            assert response.json()["field"] == key
        assert await self.stored() == before
        response = await self.put(token, {"oidc_issuer": "http://127\u30020\u30020\u30021:9/x"})
        assert response.status == 200, response
        assert (await self.stored())["oidc_issuer"] == "http://127.0.0.1:9/x"

    async def test_unknown_key_is_refused_by_name(self) -> None:
        token = await self.admin()
        before = await self.stored()
        for key in ("no_such_setting", "setup_completed_at", "auto_update_last_error"):
            response = await self.put(token, {"site_name": "Changed", key: "x"})
            assert response.status == 400, response
            assert response.json()["field"] == key
            assert key in response.json()["error"]
        assert await self.stored() == before

    async def test_contract_messages(self) -> None:
        token = await self.admin()
        cases = [
            ({"auth_agreement_mode": "popup"}, "Invalid auth agreement mode"),
            ({"log_retention_days": 3651}, "Log retention must be between 1 and 3650 days"),
            ({"log_retention_days": "abc"}, "Log retention must be between 1 and 3650 days"),
            ({"site_name": "x" * 81}, "Site name is too long"),
            ({"site_name": "   "}, "Site name is required"),
            ({"log_storage_mode": "weekly"}, "Log storage mode must be single or daily"),
            ({"chat_page_mode": "fancy"}, "Invalid chat page mode"),
            ({"auto_update_interval_hours": 0},
             "Auto update interval must be between 1 and 168 hours"),
            ({"auto_update_interval_hours": 169},
             "Auto update interval must be between 1 and 168 hours"),
            ({"redis_database": -1}, "Redis database must be a non-negative integer"),
            ({"redis_database": "x"}, "Redis database must be a non-negative integer"),
            ({"redis_enabled": True, "redis_address": ""},
             "Redis address is required when Redis is enabled"),
            ({"oauth_providers": "{not json"}, "OAuth providers must be valid JSON"),
            ({"oauth_providers": [{"name": "No key"}]}, "OAuth provider key is required"),
            ({"oauth_providers": [{"key": "GitHub"}, {"key": "github"}]},
             "OAuth provider key must be unique"),
            ({"session_lifetime_hours": 0}, "session_lifetime_hours must be between 1 and 8760"),
            ({"smtp_port": 70000}, "smtp_port must be between 1 and 65535"),
            ({"page_layouts": [1, 2]}, "Page layouts must be a JSON object"),
            ({"top_nav_items": {"a": 1}}, "Top navigation items must be a JSON array"),
            ({"payment_methods": "not json"}, "Payment methods must be a JSON array of names"),
            ({"rate_limit_burst": "1e999999999"}, "rate_limit_burst must be a whole number"),
            ({"rate_limit_burst": 2.5}, "rate_limit_burst must be a whole number"),
            ({"payment_min_recharge_amount": -1},
             "payment_min_recharge_amount must be a number from 0 to 10^18"),
            ({"registration_email_routing": [{"suffix": "x.example"}]},
             'Registration email routing must be a JSON array of {"suffix", "group_id"}'),
            ({"site_name": None}, "site_name must not be null"),
            ({"site_name": ["a"]}, "site_name must be a string"),
        ]
        before = await self.stored()
        for body, message in cases:
            response = await self.put(token, body)
            assert response.status == 400, (body, response)
            assert response.json()["error"] == message, (body, response)
        assert await self.stored() == before

    async def test_auto_update_bounds_accepted(self) -> None:
        token = await self.admin()
        for hours in (1, 168, "24"):
            response = await self.put(token, {"auto_update_interval_hours": hours})
            assert response.status == 200, response
            assert response.json()["auto_update_interval_hours"] == str(hours)

    async def test_urls_must_be_http(self) -> None:
        token = await self.admin()
        for key in ("base_url", "icon_url", "privacy_policy_url", "terms_url",
                    "home_iframe_url", "payment_yipay_gateway_url", "oidc_issuer",
                    "hcaptcha_verify_url"):
            for bad in ("javascript:alert(1)", "ftp://example.com", "example.com"):
                response = await self.put(token, {key: bad})
                assert response.status == 400, (key, bad, response)
                assert response.json()["field"] == key
        response = await self.put(token, {"base_url": "https://console.example.org/",
                                          "logo_url": "http://cdn.example.org/logo.png"})
        assert response.status == 200, response
        body = response.json()
        assert body["icon_url"] == "http://cdn.example.org/logo.png"
        assert body["payment_openpayment_notify_url"] == \
            "https://console.example.org/api/payment/openpayment/notify"
        assert body["payment_openpayment_return_url"] == \
            "https://console.example.org/api/payment/openpayment/return"
        oauth = await self.put(token, {"oauth_providers": [
            {"key": "x", "token_url": "file:///etc/passwd"}]})
        assert oauth.status == 400

    async def test_boolean_parsing(self) -> None:
        token = await self.admin()
        for given, expected in ((True, True), (False, False), ("yes", True), ("off", False),
                                ("Enabled", True), ("0", False), (1, True), (0, False)):
            response = await self.put(token, {"referral_enabled": given})
            assert response.status == 200, (given, response)
            assert response.json()["referral_enabled"] is expected, given
            assert self.ctx.settings.flag("referral_enabled") is expected
        for bad in ("maybe", 2, [], {"a": 1}):
            response = await self.put(token, {"referral_enabled": bad})
            assert response.status == 400, (bad, response)
            assert response.json()["field"] == "referral_enabled"
        # explicit false is honoured, not replaced by the default (true)
        response = await self.put(token, {"password_registration_enabled": False})
        assert response.json()["password_registration_enabled"] is False
        assert (await self.stored())["password_registration_enabled"] == "false"

    async def test_lenient_read_of_stored_booleans(self) -> None:
        await self.ctx.live_settings.save({"community_enabled": "disabled",
                                           "referral_enabled": "garbage"}, self.ctx.now())
        body = (await self.call("GET", "/api/public/settings")).json()
        assert body["community_enabled"] is False
        assert body["referral_enabled"] is False  # unparsable -> default

    async def test_aliases(self) -> None:
        token = await self.admin()
        response = await self.put(token, {
            "registration_enabled": False, "logo_url": "https://cdn.example.org/l.png",
            "status_page_enabled": True, "site_description": "Models for everyone",
            "check_in_enabled": True, "check_in_daily_reward": "0.5"})
        assert response.status == 200, response
        stored = await self.stored()
        assert stored["password_registration_enabled"] == "false"
        assert stored["icon_url"] == "https://cdn.example.org/l.png"
        assert stored["status_monitor_enabled"] == "true"
        assert stored["site_description"] == "Models for everyone"
        assert stored["checkin_enabled"] == "true"
        assert stored["checkin_daily_reward"] == "0.5"
        for alias in ("registration_enabled", "logo_url", "check_in_enabled"):
            assert alias not in stored
        twice = await self.put(token, {"check_in_enabled": True, "checkin_enabled": False})
        assert twice.status == 400
        unknown = await self.put(token, {"check_in_nonsense": 1})
        assert unknown.status == 400 and unknown.json()["field"] == "check_in_nonsense"

    async def test_json_text_keys_accept_arrays_and_objects(self) -> None:
        token = await self.admin()
        response = await self.put(token, {
            "payment_recharge_presets": ["10", "20", 50],
            "payment_methods": ["alipay", "stripe"],
            "page_layouts": {"dashboard_widgets": ["balance", "usage"]},
            "top_nav_items": [{"label": "Docs", "url": "https://docs.example.org"}],
            "checkin_streak_rewards": '{"3": "1.5"}'})
        assert response.status == 200, response
        body = response.json()
        assert orjson.loads(body["payment_recharge_presets"]) == ["10", "20", 50]
        assert orjson.loads(body["payment_methods"]) == ["alipay", "stripe"]
        assert orjson.loads(body["page_layouts"]) == {"dashboard_widgets": ["balance", "usage"]}
        assert orjson.loads(body["checkin_streak_rewards"]) == {"3": "1.5"}
        public = (await self.call("GET", "/api/public/settings")).json()
        assert public["dashboard_widgets"] == ["balance", "usage"]
        assert public["nav_items"] == [{"label": "Docs", "url": "https://docs.example.org"}]

    async def test_normalised_values(self) -> None:
        token = await self.admin()
        response = await self.put(token, {
            "system_mode": "bogus", "group_multiplier_mode": "HIGHER",
            "payment_official_currency": "usd", "auth_agreement_mode": "",
            "chat_page_mode": "", "payment_gateway_provider": " Stripe "})
        assert response.status == 200, response
        body = response.json()
        assert body["system_mode"] == "operation"
        assert body["group_multiplier_mode"] == "max"
        assert body["payment_official_currency"] == "USD"
        assert body["auth_agreement_mode"] == "notice"
        assert body["chat_page_mode"] == "basic"
        assert body["payment_gateway_provider"] == "stripe"
        response = await self.put(token, {"system_mode": "enterprise", "payment_enabled": True})
        assert response.json()["enterprise_features_enabled"] is True
        assert response.json()["payment_enabled"] is True
        response = await self.put(token, {"system_mode": "personal"})
        assert response.json()["payment_enabled"] is False  # effective value

    async def test_read_only_keys_are_ignored(self) -> None:
        token = await self.admin()
        current = (await self.call("GET", "/api/settings", token=token)).json()
        # an admin UI sends back what it was shown: accepted, derived values unchanged
        current.update({"edition": "community", "enterprise_features_enabled": True,
                        "current_node_name": "evil", "redis_password_set": True,
                        "payment_openpayment_notify_url": "https://evil.example/x",
                        "site_name": "Round Trip"})
        response = await self.put(token, current)
        assert response.status == 200, response
        body = response.json()
        assert body["edition"] == "premium"
        assert body["enterprise_features_enabled"] is False
        assert body["current_node_name"] == ""
        assert body["payment_openpayment_notify_url"] == ""
        assert body["site_name"] == "Round Trip"
        stored = await self.stored()
        for key in ("edition", "current_node_name", "redis_password_set",
                    "payment_openpayment_notify_url"):
            assert key not in stored

    async def test_multi_node_needs_a_node_name(self) -> None:
        token = await self.admin()
        refused = await self.put(token, {"multi_node_enabled": True})
        assert refused.status == 400
        assert refused.json()["field"] == "multi_node_enabled"
        assert "multi_node_enabled" not in await self.stored()
        self.ctx.node_name = "node-a"
        accepted = await self.put(token, {"multi_node_enabled": True})
        assert accepted.status == 200, accepted
        assert accepted.json()["current_node_name"] == "node-a"
        assert accepted.json()["multi_node_enabled"] is True

    async def test_smtp_security_follows_port_until_set(self) -> None:
        token = await self.admin()
        assert (await self.put(token, {"smtp_port": 465})).json()["smtp_security"] == "tls"
        body = (await self.put(token, {"smtp_security": "none"})).json()
        assert body["smtp_security"] == "none"
        assert (await self.put(token, {"smtp_security": "ssl"})).status == 400


class SettingsSecretTests(SettingsTestCase):
    async def set_everything_secret(self, token: str) -> None:
        body: dict[str, Any] = {key: f"{MARK}-{key}" for key in SECRETS}
        body["redis_password"] = f"{MARK}-redis"
        body["sensitive_words"] = f"{MARK}-words"
        body["oauth_providers"] = [
            {"key": "GitHub Corp", "name": "GitHub", "client_id": "cid",
             "client_secret": f"{MARK}-oauth", "auth_url": "https://gh.example/authorize",
             "token_url": "https://gh.example/token"},
            {"key": "off", "name": "Off", "enabled": False, "client_secret": f"{MARK}-off"}]
        body["payment_channels"] = [
            {"id": 7, "name": "Stripe", "config": {"stripe_secret_key": f"{MARK}-stripe",
                                                   "stripe_webhook_secret": f"{MARK}-wh",
                                                   "currency": "usd"}}]
        response = await self.put(token, body)
        assert response.status == 200, response
        assert MARK not in response.body.decode()

    async def test_secrets_never_returned(self) -> None:
        token = await self.admin()
        await self.set_everything_secret(token)
        stored = await self.stored()
        assert stored["hcaptcha_secret"] == f"{MARK}-hcaptcha_secret"
        assert stored["redis_password"] == f"{MARK}-redis"
        admin = await self.call("GET", "/api/settings", token=token)
        public = await self.call("GET", "/api/public/settings")
        for response in (admin, public):
            assert response.status == 200
            assert MARK not in response.body.decode(), response
        body = admin.json()
        for key in [*SECRETS, "redis_password", "sensitive_words"]:
            assert key not in body
        assert body["redis_password_set"] is True
        assert body["hcaptcha_secret_set"] is True
        providers = orjson.loads(body["oauth_providers"])
        assert [p["key"] for p in providers] == ["github-corp", "off"]
        assert all("client_secret" not in p for p in providers)
        channels = orjson.loads(body["payment_channels"])
        assert channels[0]["config"] == {"currency": "usd"}

    async def test_blank_secrets_keep_stored_values(self) -> None:
        token = await self.admin()
        await self.set_everything_secret(token)
        before = await self.stored()
        shown = (await self.call("GET", "/api/settings", token=token)).json()
        body: dict[str, Any] = {key: "" for key in SECRETS}
        body["redis_password"] = ""
        body["oauth_providers"] = shown["oauth_providers"]  # round trip without secrets
        channels = orjson.loads(shown["payment_channels"])
        channels[0]["config"]["stripe_secret_key"] = ""
        channels[0]["config"]["currency"] = "eur"
        body["payment_channels"] = channels
        response = await self.put(token, body)
        assert response.status == 200, response
        after = await self.stored()
        for key in [*SECRETS, "redis_password"]:
            assert after[key] == before[key], key
        providers = {p["key"]: p for p in orjson.loads(after["oauth_providers"])}
        assert providers["github-corp"]["client_secret"] == f"{MARK}-oauth"
        assert providers["off"]["client_secret"] == f"{MARK}-off"
        config = orjson.loads(after["payment_channels"])[0]["config"]
        assert config == {"stripe_secret_key": f"{MARK}-stripe",
                          "stripe_webhook_secret": f"{MARK}-wh", "currency": "eur"}

    async def test_new_secret_replaces_old(self) -> None:
        token = await self.admin()
        await self.set_everything_secret(token)
        await self.put(token, {"smtp_password": "new-pass",
                               "oauth_providers": [{"key": "github-corp",
                                                    "client_secret": "new-oauth"}]})
        after = await self.stored()
        assert after["smtp_password"] == "new-pass"
        providers = orjson.loads(after["oauth_providers"])
        assert [(p["key"], p["client_secret"]) for p in providers] == [
            ("github-corp", "new-oauth")]

    async def test_redis_password_clear(self) -> None:
        token = await self.admin()
        response = await self.put(token, {"redis_password": "pw"})
        assert response.json()["redis_password_set"] is True
        both = await self.put(token, {"redis_password": "pw2", "redis_password_clear": True})
        assert both.status == 400
        assert (await self.stored())["redis_password"] == "pw"
        no = await self.put(token, {"redis_password_clear": False})
        assert no.json()["redis_password_set"] is True
        cleared = await self.put(token, {"redis_password_clear": True})
        assert cleared.status == 200
        assert cleared.json()["redis_password_set"] is False
        assert (await self.stored())["redis_password"] == ""

    async def test_write_only_sensitive_words_can_be_cleared(self) -> None:
        token = await self.admin()
        await self.put(token, {"sensitive_words": "alpha\nbeta"})
        assert (await self.stored())["sensitive_words"] == "alpha\nbeta"
        await self.put(token, {"sensitive_words": ""})
        assert (await self.stored())["sensitive_words"] == ""


class PublicSettingsTests(SettingsTestCase):
    async def test_public_view_fields_and_aliases(self) -> None:
        token = await self.admin()
        response = await self.put(token, {
            "site_name": "Acme", "icon_url": "https://cdn.example.org/i.png",
            "privacy_policy_url": "https://example.org/privacy", "auth_agreement_mode": "checkbox",
            "oidc_enabled": True, "passkey_enabled": False, "status_monitor_enabled": True,
            "base_url": "https://console.example.org", "smtp_host": "mail.example.org",
            "ssrf_allowed_hosts": "internal.example", "redis_address": "10.0.0.1:6379",
            "registration_email_routing": [{"suffix": "corp.example", "group_id": 4}],
            "sms_enabled": False, "sms_login_enabled": True, "payment_channels": [
                {"id": 1, "config": {"currency": "usd"}}],
            "oauth_providers": [
                {"key": "gh", "name": "GitHub", "client_secret": "s"},
                {"key": "own", "name": "Own", "redirect_url": "https://own.example/cb"},
                {"key": "off", "enabled": False}]})
        assert response.status == 200, response
        body = (await self.call("GET", "/api/public/settings")).json()
        assert body["edition"] == "premium"
        assert body["site_name"] == "Acme"
        assert body["logo_url"] == body["favicon_url"] == body["icon_url"] == \
            "https://cdn.example.org/i.png"
        assert body["login_methods"] == ["password", "oidc"]
        assert body["registration_enabled"] is True
        assert body["auth_agreement_required"] is True
        assert body["privacy_url"] == "https://example.org/privacy"
        assert body["nav_items"] == [] and body["dashboard_widgets"] == []
        assert body["status_page_enabled"] is True
        assert body["site_description"] == ""
        assert body["payment_channels"] == ""
        assert body["sms_login_enabled"] is False  # effective: SMS itself is off
        assert orjson.loads(body["oauth_providers"]) == [
            {"key": "gh", "name": "GitHub", "login_url": "/auth/oauth/gh/login",
             "callback_url": "https://console.example.org/auth/oauth/gh/callback"},
            {"key": "own", "name": "Own", "login_url": "/auth/oauth/own/login",
             "callback_url": "https://own.example/cb"}]
        for key in ("theme_light_primary", "sidebar_users_enabled", "checkin_timezone",
                    "log_retention_days", "reliability_recovery_after_seconds",
                    "payment_recharge_presets", "rate_limit_burst", "hcaptcha_site_key",
                    "auto_update_interval_hours", "enterprise_features_enabled",
                    "system_mode", "announcement", "sms_binding_required"):
            assert key in body, key
        for key in ("redis_enabled", "redis_address", "redis_database", "redis_password_set",
                    "multi_node_enabled", "node_address_mode", "node_addresses",
                    "current_node_name", "registration_email_routing", "smtp_host",
                    "ssrf_allowed_hosts", "oidc_issuer", "session_lifetime_hours",
                    "hcaptcha_secret_set", "payment_openpayment_notify_url"):
            assert key not in body, key
        assert "internal.example" not in orjson.dumps(body).decode()

    async def test_public_view_follows_updates_without_restart(self) -> None:
        token = await self.admin()
        await self.put(token, {"password_login_enabled": False,
                               "page_layouts": {"dashboard_widgets": "not a list"},
                               "top_nav_items": ""})
        body = (await self.call("GET", "/api/public/settings")).json()
        assert body["login_methods"] == []
        assert body["password_login_enabled"] is False
        assert body["dashboard_widgets"] == [] and body["nav_items"] == []


class SettingsOnPostgresTests(SettingsUpdateTests):
    backend = "postgresql"


class SettingsAcrossNodesTests(SettingsTestCase):
    async def test_a_put_on_one_node_reaches_another(self) -> None:
        token = await self.admin()
        other = self.open_app(state=self.app.state)
        self.addCleanup(other.close)
        assert other.ctx.settings.text("site_name") == "Lockgate"
        response = await self.put(token, {"site_name": "Everywhere"})
        assert response.status == 200
        # the other node's reload was queued on its (single) database thread before this
        await other.db.transaction(lambda conn: None)
        assert other.ctx.settings.text("site_name") == "Everywhere"
