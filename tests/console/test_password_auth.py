"""``POST /auth/password/register`` and ``/login`` over real HTTP (contract §2.1 to §2.3, §1.5)."""

from __future__ import annotations

from sqlalchemy import func, select, update

from gateway.store import schema
from tests.support.app import AppTestCase

BAD_CREDENTIALS = {"error": "invalid username/email or password", "type": "invalid_credentials"}


class PasswordAuthTests(AppTestCase):
    async def count_users(self) -> int:
        return await self.ctx.db.transaction(
            lambda conn: conn.execute(select(func.count()).select_from(schema.users)).scalar_one())

    async def save(self, **rows: str) -> None:
        await self.ctx.live_settings.save(rows, self.ctx.now())

    async def login(self, identifier: str, password: str, **extra: object) -> object:
        return await self.call("POST", "/auth/password/login",
                               {"identifier": identifier, "password": password, **extra})

    async def test_register_then_login_by_username_and_email(self) -> None:
        await self.setup_admin()
        response = await self.call("POST", "/auth/password/register", {
            "username": "  Lin  ", "email": " Lin@Example.ORG ", "password": "password123"})
        assert response.status == 200, response
        body = response.json()
        assert body["user"]["username"] == "Lin"
        assert body["user"]["email"] == "lin@example.org"
        assert body["user"]["is_admin"] is False
        assert body["user"]["balance"] == "0"
        assert body["user"]["group"]["name"] == "user"
        assert "password_hash" not in body["user"] and "token_version" not in body["user"]
        me = await self.call("GET", "/api/user/me", token=body["token"])
        assert me.status == 200 and me.json()["id"] == body["user"]["id"]
        for identifier in ("Lin", "lin@example.org", "LIN@EXAMPLE.ORG", "  Lin "):
            login = await self.login(identifier, "password123")
            assert login.status == 200, (identifier, login)
            assert login.json()["user"]["id"] == body["user"]["id"]
            me = await self.call("GET", "/api/user/me", token=login.json()["token"])
            assert me.status == 200

    async def test_wrong_password_and_unknown_user_answer_the_same(self) -> None:
        await self.setup_admin()
        await self.register("alice")
        wrong = await self.login("alice", "password124")
        unknown = await self.login("nobody", "password123")
        unknown_email = await self.login("nobody@example.com", "password123")
        for response in (wrong, unknown, unknown_email):
            assert response.status == 401, response
            assert response.json() == BAD_CREDENTIALS
            assert "token" not in response.json()

    async def test_missing_fields_are_400(self) -> None:
        await self.setup_admin()
        for body in ({"identifier": "alice"}, {"password": "x"}, {"identifier": "  ",
                                                                 "password": "x"},
                     {"identifier": 5, "password": "password123"}):
            response = await self.call("POST", "/auth/password/login", body)
            assert response.status == 400, (body, response)
            assert response.json()["error"] == "username/email and password are required"

    async def test_missing_identifier_is_named(self) -> None:
        await self.setup_admin()
        for body, field in (({"username": "admin", "password": "correct horse"}, "identifier"),
                            ({"email": "admin@example.com", "password": "x"}, "identifier"),
                            ({"identifier": "admin"}, "password")):
            response = await self.call("POST", "/auth/password/login", body)
            assert response.status == 400, (body, response)
            assert response.json()["field"] == field, response

    async def test_registration_disabled(self) -> None:
        await self.setup_admin()
        await self.save(password_registration_enabled="false")
        response = await self.call("POST", "/auth/password/register", {
            "username": "alice", "email": "alice@example.com", "password": "password123"})
        assert response.status == 400
        assert response.json()["error"] == "password registration is disabled"
        assert await self.count_users() == 1

    async def test_password_login_disabled(self) -> None:
        await self.setup_admin()
        await self.register("alice")
        await self.save(password_login_enabled="off")
        response = await self.login("alice", "password123")
        assert response.status == 400
        assert response.json()["error"] == "password login is disabled"
        await self.save(password_login_enabled="on")
        assert (await self.login("alice", "password123")).status == 200

    async def test_agreement_required_on_login_and_register(self) -> None:
        await self.setup_admin()
        await self.register("alice")
        await self.save(auth_agreement_mode="checkbox", terms="Be nice.")
        register_body = {"username": "bob", "email": "bob@example.com",
                         "password": "password123"}
        for path, body in (("/auth/password/login",
                            {"identifier": "alice", "password": "password123"}),
                           ("/auth/password/register", register_body)):
            for accepted in (None, False, "true"):
                payload = dict(body)
                if accepted is not None:
                    payload["agreement_accepted"] = accepted
                response = await self.call("POST", path, payload)
                assert response.status == 400, (path, accepted, response)
                assert response.json()["error"] == "agreement confirmation is required"
                assert response.json()["field"] == "agreement_accepted"
        assert await self.count_users() == 2
        self.clock.advance(61)  # the refusals above used up bob's per-email allowance
        ok = await self.call("POST", "/auth/password/register",
                             {**register_body, "agreement_accepted": True})
        assert ok.status == 200, ok
        ok = await self.login("alice", "password123", agreement_accepted=True)
        assert ok.status == 200, ok

    async def test_checkbox_mode_without_any_terms_does_not_require_agreement(self) -> None:
        await self.setup_admin()
        await self.register("alice")
        await self.save(auth_agreement_mode="checkbox", terms="   ")
        assert (await self.login("alice", "password123")).status == 200

    async def test_username_and_email_taken(self) -> None:
        await self.setup_admin()
        await self.register("alice")
        taken_name = await self.call("POST", "/auth/password/register", {
            "username": "alice", "email": "other@example.com", "password": "password123"})
        assert taken_name.status == 400
        assert taken_name.json()["error"] == "username already exists"
        assert taken_name.json()["field"] == "username"
        taken_email = await self.call("POST", "/auth/password/register", {
            "username": "alice2", "email": "ALICE@example.com", "password": "password123"})
        assert taken_email.status == 400
        assert taken_email.json()["error"] == "email already exists"
        assert taken_email.json()["field"] == "email"
        assert await self.count_users() == 2

    async def test_registration_field_rules(self) -> None:
        await self.setup_admin()
        cases = [
            ({"email": "a@example.com", "password": "password123"}, "username is required"),
            ({"username": "ab", "email": "a@example.com", "password": "password123"},
             "username is too short"),
            ({"username": "abc", "email": "nope", "password": "password123"},
             "valid email is required"),
            ({"username": "abc", "email": "a@example.com", "password": "short"},
             "password must be at least 8 characters"),
        ]
        for body, message in cases:
            response = await self.call("POST", "/auth/password/register", body)
            assert response.status == 400, (body, response)
            assert response.json()["error"] == message
        assert await self.count_users() == 1

    async def test_email_suffix_rule_on_register(self) -> None:
        await self.setup_admin()
        await self.save(registration_email_suffixes="@corp.example, partner.example")
        refused = await self.call("POST", "/auth/password/register", {
            "username": "eve", "email": "eve@gmail.example", "password": "password123"})
        assert refused.status == 400
        assert refused.json()["error"] == "email domain is not allowed for registration"
        assert refused.json()["field"] == "email"
        lookalike = await self.call("POST", "/auth/password/register", {
            "username": "eve", "email": "eve@evilcorp.example", "password": "password123"})
        assert lookalike.status == 400
        assert await self.count_users() == 1
        for name, domain in (("ann", "corp.example"), ("ben", "eu.partner.example")):
            ok = await self.call("POST", "/auth/password/register", {
                "username": name, "email": f"{name}@{domain}", "password": "password123"})
            assert ok.status == 200, ok
        assert await self.count_users() == 3

    async def test_login_throttled_per_identity_across_ips(self) -> None:
        await self.setup_admin()
        await self.register("alice")
        statuses = []
        for _ in range(5):
            statuses.append((await self.login("Alice", "wrong-password")).status)
        assert statuses == [401] * 5
        blocked = await self.login("alice", "password123")  # a 6th IP; right password
        assert blocked.status == 429, blocked
        body = blocked.json()
        assert body["error"] == "Too many requests. Please try again later."
        retry = int(blocked.header("Retry-After"))
        assert 1 <= retry <= 60 and body["retry_after"] == retry
        # another identity from yet another IP is unaffected
        assert (await self.login("admin", "correct horse")).status == 200
        self.clock.advance(61)
        assert (await self.login("alice", "password123")).status == 200

    async def test_register_throttled_per_ip(self) -> None:
        await self.setup_admin()
        statuses = []
        for i in range(4):
            response = await self.call("POST", "/auth/password/register", {
                "username": f"user{i}", "email": f"user{i}@example.com",
                "password": "password123"}, ip="203.0.113.50")
            statuses.append(response.status)
        assert statuses == [200, 200, 200, 429]
        assert await self.count_users() == 4

    async def test_disabled_user_cannot_log_in_or_use_token(self) -> None:
        await self.setup_admin()
        alice = await self.register("alice")
        await self.ctx.db.transaction(lambda conn: conn.execute(
            update(schema.users).where(schema.users.c.id == alice["user"]["id"])
            .values(enabled=False)))
        me = await self.call("GET", "/api/user/me", token=alice["token"])
        assert me.status == 403
        assert me.json()["error"] == "User is disabled"
        login = await self.login("alice", "password123")
        assert login.status == 403
        assert "token" not in login.json()
        # the wrong password still answers 401, so a disabled account is not confirmed
        assert (await self.login("alice", "nope-nope")).status == 401

    async def test_setup_gate(self) -> None:
        register = await self.call("POST", "/auth/password/register", {
            "username": "early", "email": "early@example.com", "password": "password123"})
        login = await self.login("early", "password123")
        for response in (register, login):
            assert response.status == 409, response
            assert response.json()["error"] == "Initial setup is required"
        assert await self.count_users() == 0
        await self.setup_admin()
        assert (await self.login("admin", "correct horse")).status == 200

    async def test_referral_code_links_inviter_when_enabled(self) -> None:
        await self.setup_admin()
        await self.save(referral_enabled="true")
        inviter = await self.register("inviter")
        code = inviter["user"]["referral_code"]
        spaced = "-".join(code[i:i + 4] for i in range(0, len(code), 4)).lower()
        invited = await self.call("POST", "/auth/password/register", {
            "username": "invited", "email": "invited@example.com", "password": "password123",
            "referral_code": spaced})
        assert invited.status == 200, invited
        assert invited.json()["user"]["referrer_id"] == inviter["user"]["id"]
        bad = await self.call("POST", "/auth/password/register", {
            "username": "x" * 3, "email": "x@example.com", "password": "password123",
            "referral_code": 12})
        assert bad.status == 400


class PasswordAuthOnPostgresTests(PasswordAuthTests):
    backend = "postgresql"
