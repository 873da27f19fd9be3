"""``/api/user/password/*`` (contract §4.8, weaknesses 8 and 12) over real HTTP and real SMTP.

Every token issued before a password change must stop working; codes are the account's own,
single-use, and a failed change alters nothing.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import select
from twisted.internet import reactor

from console.services.identity.mailer import Mailer
from gateway.store import schema
from tests.support.app import AppTestCase
from tests.support.smtp_server import SmtpServer


class PasswordChangeCase(AppTestCase):
    async def save(self, **rows: str) -> None:
        await self.ctx.live_settings.save(rows, self.ctx.now())

    async def start_smtp(self) -> SmtpServer:
        server = SmtpServer(reactor, users={"mailer": "secret"})
        server.start()
        self.addCleanup(server.stop)
        self.ctx.mailer = Mailer(reactor, self.clock)
        await self.save(**server.settings())
        return server

    async def change(self, token: str, **body: Any) -> Any:
        return await self.call("POST", "/api/user/password/change", body, token=token)

    async def login(self, identifier: str, password: str) -> Any:
        return await self.call("POST", "/auth/password/login",
                               {"identifier": identifier, "password": password})

    async def password_hash(self, user_id: int) -> str:
        return await self.ctx.db.transaction(lambda conn: conn.execute(
            select(schema.users.c.password_hash).where(schema.users.c.id == user_id)
        ).scalar_one())


class CurrentPasswordTests(PasswordChangeCase):
    async def test_method_without_smtp(self) -> None:
        await self.setup_admin()
        lin = await self.register("lin")
        response = await self.call("GET", "/api/user/password/method", token=lin["token"])
        assert response.status == 200
        assert response.json() == {"method": "current_password", "email": "lin@example.com",
                                   "password_set": True}
        assert (await self.call("GET", "/api/user/password/method")).status == 401

    async def test_change_revokes_older_tokens(self) -> None:
        await self.setup_admin()
        lin = await self.register("lin")
        second = (await self.login("lin", "password123")).json()["token"]
        response = await self.change(lin["token"], current_password="password123",
                                     new_password="new-password-1")
        assert response.status == 200, response
        assert response.json()["message"] == "Password updated"
        for old in (lin["token"], second):
            me = await self.call("GET", "/api/user/me", token=old)
            assert me.status == 401, me
        fresh = response.json()["token"]
        assert (await self.call("GET", "/api/user/me", token=fresh)).status == 200
        assert (await self.login("lin", "password123")).status == 401
        assert (await self.login("lin", "new-password-1")).status == 200
        # an old token cannot be used to change the password again either
        again = await self.change(lin["token"], current_password="new-password-1",
                                  new_password="new-password-2")
        assert again.status == 401

    async def test_wrong_or_missing_current_password_changes_nothing(self) -> None:
        await self.setup_admin()
        lin = await self.register("lin")
        before = await self.password_hash(lin["user"]["id"])
        cases = [
            ({"new_password": "new-password-1"}, "current password is required"),
            ({"current_password": "wrong-one", "new_password": "new-password-1"},
             "current password is incorrect"),
            ({"current_password": "password123", "new_password": "short"},
             "new_password must be at least 8 characters"),
            ({"current_password": "password123"}, "new_password is required"),
        ]
        for body, message in cases:
            response = await self.change(lin["token"], **body)
            assert response.status == 400, (body, response)
            assert response.json()["error"] == message
        assert await self.password_hash(lin["user"]["id"]) == before
        assert (await self.call("GET", "/api/user/me", token=lin["token"])).status == 200

    async def test_account_without_password(self) -> None:
        await self.setup_admin()
        lin = await self.register("lin")
        await self.ctx.db.transaction(lambda conn: conn.execute(
            schema.users.update().where(schema.users.c.id == lin["user"]["id"])
            .values(password_hash=None)))
        method = await self.call("GET", "/api/user/password/method", token=lin["token"])
        assert method.json()["password_set"] is False
        response = await self.change(lin["token"], current_password="password123",
                                     new_password="new-password-1")
        assert response.status == 400
        assert response.json()["error"] == "password login is not enabled for this account"

    async def test_email_code_needs_smtp(self) -> None:
        await self.setup_admin()
        lin = await self.register("lin")
        response = await self.call("POST", "/api/user/password/email-code", {},
                                   token=lin["token"])
        assert response.status == 400 and response.json()["error"] == "SMTP is not configured"


class EmailCodeChangeTests(PasswordChangeCase):
    async def code_for(self, server: SmtpServer, token: str, to: str, **body: Any) -> str:
        response = await self.call("POST", "/api/user/password/email-code", body, token=token)
        assert response.status == 200, response
        assert response.json() == {"message": "Verification code sent"}
        return server.last_to(to).code()

    async def test_method_with_smtp(self) -> None:
        await self.setup_admin()
        lin = await self.register("lin")
        await self.start_smtp()
        response = await self.call("GET", "/api/user/password/method", token=lin["token"])
        assert response.json()["method"] == "email_code"

    async def test_change_with_mailed_code(self) -> None:
        await self.setup_admin()
        lin = await self.register("lin")
        server = await self.start_smtp()
        code = await self.code_for(server, lin["token"], "lin@example.com")
        response = await self.change(lin["token"], email_code=code,
                                     current_password="ignored", new_password="new-password-1")
        assert response.status == 200, response
        assert (await self.call("GET", "/api/user/me", token=lin["token"])).status == 401
        me = await self.call("GET", "/api/user/me", token=response.json()["token"])
        assert me.json()["email_verified"] is True
        assert (await self.login("lin", "new-password-1")).status == 200
        # the code is spent
        again = await self.change(response.json()["token"], email_code=code,
                                  new_password="new-password-2")
        assert again.status == 400
        assert again.json()["error"] == "invalid or expired email verification code"

    async def test_code_goes_to_own_address_only(self) -> None:
        await self.setup_admin()
        lin = await self.register("lin")
        await self.register("eve")
        server = await self.start_smtp()
        await self.code_for(server, lin["token"], "lin@example.com", email="eve@example.com")
        assert all(item.rcpt_to == ["lin@example.com"] for item in server.received)

    async def test_code_of_another_user_is_refused(self) -> None:
        await self.setup_admin()
        lin = await self.register("lin")
        eve = await self.register("eve")
        server = await self.start_smtp()
        eve_code = await self.code_for(server, eve["token"], "eve@example.com")
        before = await self.password_hash(lin["user"]["id"])
        response = await self.change(lin["token"], email_code=eve_code,
                                     new_password="new-password-1")
        assert response.status == 400
        assert await self.password_hash(lin["user"]["id"]) == before
        # and eve's code is still hers
        assert (await self.change(eve["token"], email_code=eve_code,
                                  new_password="new-password-1")).status == 200

    async def test_missing_and_expired_codes(self) -> None:
        await self.setup_admin()
        lin = await self.register("lin")
        server = await self.start_smtp()
        missing = await self.change(lin["token"], current_password="password123",
                                    new_password="new-password-1")
        assert missing.status == 400 and missing.json()["field"] == "email_code"
        code = await self.code_for(server, lin["token"], "lin@example.com")
        self.clock.advance(601)
        expired = await self.change(lin["token"], email_code=code, new_password="new-password-1")
        assert expired.status == 400
        assert (await self.login("lin", "password123")).status == 200

    async def test_email_code_route_is_rate_limited_per_user(self) -> None:
        await self.setup_admin()
        lin = await self.register("lin")
        server = await self.start_smtp()
        statuses = [(await self.call("POST", "/api/user/password/email-code", {},
                                     token=lin["token"])).status for _ in range(4)]
        assert statuses == [200, 200, 200, 429]
        assert len(server.received) == 3
