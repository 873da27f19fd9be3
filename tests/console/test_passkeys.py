"""Passkeys end to end with a software authenticator: real attestation and assertion responses
verified by the webauthn library, and every replay or substitution refused with nothing changed."""

from __future__ import annotations

from typing import Any

from sqlalchemy import select
from twisted.internet.defer import ensureDeferred, gatherResults

from gateway.store import schema
from tests.support.app import AppTestCase
from tests.support.webauthn_authenticator import SoftAuthenticator

ORIGIN = "https://console.example.org"
RP_ID = "console.example.org"


class PasskeyCase(AppTestCase):
    async def enable(self, **extra: str) -> None:
        rows = {"passkey_enabled": "true", "base_url": ORIGIN}
        rows.update(extra)
        await self.ctx.live_settings.save(rows, self.ctx.now())

    async def passkey_rows(self) -> list[dict[str, Any]]:
        return await self.ctx.db.transaction(lambda conn: [
            dict(row) for row in conn.execute(
                select(schema.passkeys).order_by(schema.passkeys.c.id)).mappings()])

    async def challenge_count(self) -> int:
        return await self.ctx.db.transaction(lambda conn: len(
            conn.execute(select(schema.auth_challenges.c.id)).all()))

    async def enrol(self, token: str, authenticator: SoftAuthenticator,
                    name: str = "Laptop") -> dict[str, Any]:
        options = await self.call("POST", "/api/user/passkeys/register/options", token=token)
        assert options.status == 200, options
        credential = authenticator.create(options.json())
        response = await self.call("POST", "/api/user/passkeys/register",
                                   {"name": name, "credential": credential}, token=token)
        assert response.status == 200, response
        return response.json()

    async def login_options(self, identifier: str | None = None) -> dict[str, Any]:
        body = {"identifier": identifier} if identifier else {}
        response = await self.call("POST", "/auth/passkey/login/options", body)
        assert response.status == 200, response
        return response.json()


class PasskeyFlowTests(PasskeyCase):
    async def test_setup_gate_before_any_admin(self) -> None:
        await self.enable()
        for path in ("/auth/passkey/login/options", "/auth/passkey/login"):
            response = await self.call("POST", path, {"id": "x"})
            assert response.status == 409, response
            assert response.json()["type"] == "setup_required"
        assert await self.challenge_count() == 0

    async def test_disabled_and_unconfigured(self) -> None:
        token = await self.setup_admin()
        response = await self.call("POST", "/auth/passkey/login/options", {})
        assert response.status == 400
        assert response.json()["error"] == "passkey authentication is disabled"
        response = await self.call("POST", "/api/user/passkeys/register/options", token=token)
        assert response.status == 400
        await self.ctx.live_settings.save({"passkey_enabled": "true"}, self.ctx.now())
        response = await self.call("POST", "/api/user/passkeys/register/options", token=token)
        assert response.status == 400
        assert response.json()["error"] == "Passkey relying party is not configured"
        assert await self.challenge_count() == 0

    async def test_register_list_login_delete(self) -> None:
        await self.enable(site_name="Acme")
        token = await self.setup_admin()
        options = await self.call("POST", "/api/user/passkeys/register/options", token=token)
        public_key = options.json()["publicKey"]
        assert public_key["rp"] == {"name": "Acme", "id": RP_ID}
        assert public_key["attestation"] == "none"
        assert public_key["authenticatorSelection"]["userVerification"] == "preferred"
        authenticator = SoftAuthenticator(ORIGIN)
        credential = authenticator.create(options.json())
        created = await self.call("POST", "/api/user/passkeys/register",
                                  {"name": "  Laptop  ", "credential": credential}, token=token)
        assert created.status == 200, created
        view = created.json()
        assert view["name"] == "Laptop" and view["sign_count"] == 0
        assert "last_used_at" not in view
        listed = await self.call("GET", "/api/user/passkeys", token=token)
        assert listed.json() == [view]

        options = await self.login_options("admin")
        assert [c["id"] for c in options["publicKey"]["allowCredentials"]] == [credential["id"]]
        assert options["publicKey"]["rpId"] == RP_ID
        login = await self.call("POST", "/auth/passkey/login", authenticator.get(options))
        assert login.status == 200, login
        assert login.json()["user"]["username"] == "admin"
        me = await self.call("GET", "/api/user/me", token=login.json()["token"])
        assert me.status == 200
        listed = (await self.call("GET", "/api/user/passkeys", token=token)).json()
        assert listed[0]["sign_count"] == 1 and listed[0]["last_used_at"]

        # discoverable flow: no identifier
        options = await self.login_options()
        assert options["publicKey"].get("allowCredentials", []) == []
        login = await self.call("POST", "/auth/passkey/login", authenticator.get(options))
        assert login.status == 200, login

        other = await self.register("bob")
        gone = await self.call("DELETE", f"/api/user/passkeys/{view['id']}",
                               token=other["token"])
        assert gone.status == 404
        gone = await self.call("DELETE", f"/api/user/passkeys/{view['id']}", token=token)
        assert gone.json() == {"message": "Passkey deleted"}
        assert await self.passkey_rows() == []
        options = await self.login_options()
        refused = await self.call("POST", "/auth/passkey/login", authenticator.get(options))
        assert refused.status == 401

    async def test_bare_credential_body_and_default_name(self) -> None:
        await self.enable()
        token = await self.setup_admin()
        options = await self.call("POST", "/api/user/passkeys/register/options", token=token)
        credential = SoftAuthenticator(ORIGIN).create(options.json())
        created = await self.call("POST", "/api/user/passkeys/register", credential, token=token)
        assert created.status == 200, created
        assert created.json()["name"] == "Passkey"

    async def test_user_verification_required_setting(self) -> None:
        await self.enable(passkey_user_verification="required")
        token = await self.setup_admin()
        authenticator = SoftAuthenticator(ORIGIN)
        options = await self.call("POST", "/api/user/passkeys/register/options", token=token)
        refused = await self.call("POST", "/api/user/passkeys/register", {
            "credential": authenticator.create(options.json(), user_verified=False)}, token=token)
        assert refused.status == 400
        assert await self.passkey_rows() == []
        await self.enrol(token, authenticator)
        options = await self.login_options("admin")
        refused = await self.call("POST", "/auth/passkey/login",
                                  authenticator.get(options, user_verified=False))
        assert refused.status == 401
        assert (await self.passkey_rows())[0]["sign_count"] == 0


class PasskeyAttackTests(PasskeyCase):
    async def test_replayed_login_challenge_refused(self) -> None:
        await self.enable()
        token = await self.setup_admin()
        authenticator = SoftAuthenticator(ORIGIN)
        await self.enrol(token, authenticator)
        options = await self.login_options("admin")
        assertion = authenticator.get(options)
        assert (await self.call("POST", "/auth/passkey/login", assertion)).status == 200
        replay = await self.call("POST", "/auth/passkey/login", assertion)
        assert replay.status == 401
        assert "challenge" in replay.json()["error"]
        # a fresh signature over the used challenge with a higher counter is refused too
        again = await self.call("POST", "/auth/passkey/login", authenticator.get(options))
        assert again.status == 401
        assert (await self.passkey_rows())[0]["sign_count"] == 1

    async def test_concurrent_replays_sign_in_once(self) -> None:
        await self.enable()
        token = await self.setup_admin()
        authenticator = SoftAuthenticator(ORIGIN)
        await self.enrol(token, authenticator)
        options = await self.login_options("admin")
        assertion = authenticator.get(options)
        results = await gatherResults([
            ensureDeferred(self.call("POST", "/auth/passkey/login", assertion))
            for _ in range(8)])
        assert sorted(r.status for r in results) == [200] + [401] * 7

    async def test_expired_challenge_refused(self) -> None:
        await self.enable()
        token = await self.setup_admin()
        authenticator = SoftAuthenticator(ORIGIN)
        await self.enrol(token, authenticator)
        options = await self.login_options("admin")
        self.clock.advance(5 * 60 + 1)
        refused = await self.call("POST", "/auth/passkey/login", authenticator.get(options))
        assert refused.status == 401
        assert (await self.passkey_rows())[0]["last_used_at"] is None

    async def test_counter_regression_refused(self) -> None:
        await self.enable()
        token = await self.setup_admin()
        authenticator = SoftAuthenticator(ORIGIN)
        await self.enrol(token, authenticator)
        for _ in range(3):
            options = await self.login_options("admin")
            ok = await self.call("POST", "/auth/passkey/login", authenticator.get(options))
            assert ok.status == 200
        before = await self.passkey_rows()
        assert before[0]["sign_count"] == 3
        for count in (3, 2):
            options = await self.login_options("admin")
            cloned = await self.call("POST", "/auth/passkey/login",
                                     authenticator.get(options, sign_count=count))
            assert cloned.status == 401, cloned
        assert await self.passkey_rows() == before

    async def test_passkey_of_a_used_for_b_refused(self) -> None:
        await self.enable()
        admin_token = await self.setup_admin()
        bob = await self.register("bob")
        alice_key = SoftAuthenticator(ORIGIN)
        await self.enrol(admin_token, alice_key)
        bob_key = SoftAuthenticator(ORIGIN)
        await self.enrol(bob["token"], bob_key)
        options = await self.login_options("bob")
        refused = await self.call("POST", "/auth/passkey/login", alice_key.get(options))
        assert refused.status == 401
        assert "token" not in refused.json()
        # same shape for an unknown account (no enumeration), and nothing can satisfy it
        unknown = await self.login_options("nobody")
        assert set(unknown["publicKey"]) == set(options["publicKey"])
        assert unknown["publicKey"]["allowCredentials"] == []
        refused = await self.call("POST", "/auth/passkey/login", alice_key.get(unknown))
        assert refused.status == 401
        rows = await self.passkey_rows()
        assert [row["last_used_at"] for row in rows] == [None, None]

    async def test_wrong_origin_refused(self) -> None:
        await self.enable()
        token = await self.setup_admin()
        authenticator = SoftAuthenticator(ORIGIN)
        options = await self.call("POST", "/api/user/passkeys/register/options", token=token)
        refused = await self.call("POST", "/api/user/passkeys/register", {
            "credential": authenticator.create(options.json(), origin="https://evil.example")},
            token=token)
        assert refused.status == 400
        assert await self.passkey_rows() == []
        await self.enrol(token, authenticator)
        options = await self.login_options("admin")
        refused = await self.call("POST", "/auth/passkey/login",
                                  authenticator.get(options, origin="https://evil.example"))
        assert refused.status == 401

    async def test_credential_registered_twice_conflicts(self) -> None:
        await self.enable()
        admin_token = await self.setup_admin()
        bob = await self.register("bob")
        authenticator = SoftAuthenticator(ORIGIN)
        await self.enrol(admin_token, authenticator)
        for token in (admin_token, bob["token"]):
            options = await self.call("POST", "/api/user/passkeys/register/options",
                                      token=token)
            again = await self.call("POST", "/api/user/passkeys/register",
                                    {"credential": authenticator.create(options.json())},
                                    token=token)
            assert again.status == 409, again
        rows = await self.passkey_rows()
        assert len(rows) == 1

    async def test_registration_challenge_bound_to_its_user_and_single_use(self) -> None:
        await self.enable()
        admin_token = await self.setup_admin()
        bob = await self.register("bob")
        options = await self.call("POST", "/api/user/passkeys/register/options",
                                  token=admin_token)
        credential = SoftAuthenticator(ORIGIN).create(options.json())
        stolen = await self.call("POST", "/api/user/passkeys/register",
                                 {"credential": credential}, token=bob["token"])
        assert stolen.status == 400
        assert await self.passkey_rows() == []
        ok = await self.call("POST", "/api/user/passkeys/register",
                             {"credential": credential}, token=admin_token)
        assert ok.status == 200
        replay = await self.call("POST", "/api/user/passkeys/register",
                                 {"credential": credential}, token=admin_token)
        assert replay.status == 400
        assert len(await self.passkey_rows()) == 1

    async def test_malformed_bodies_are_clear_errors(self) -> None:
        await self.enable()
        token = await self.setup_admin()
        for body in ({}, {"credential": "x"}, {"credential": {"response": {}}},
                     {"credential": {"type": "password"}}):
            response = await self.call("POST", "/api/user/passkeys/register", body, token=token)
            assert response.status == 400, (body, response)
        for body in ({}, {"response": {"clientDataJSON": "!!"}}, {"type": "x"}):
            response = await self.call("POST", "/auth/passkey/login", body)
            assert response.status in (400, 401), (body, response)
        assert await self.passkey_rows() == []

    async def test_requires_session(self) -> None:
        await self.enable()
        await self.setup_admin()
        assert (await self.call("GET", "/api/user/passkeys")).status == 401
        assert (await self.call("POST", "/api/user/passkeys/register/options")).status == 401


class PasskeyPostgresTests(PasskeyAttackTests):
    backend = "postgresql"
