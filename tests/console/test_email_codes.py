"""Registration codes mailed over real SMTP (contract §2.3, §2.4; weaknesses 7, 8, 23).

The SMTP server is a real Twisted ESMTP server on loopback; codes are read from the mail it
received.  Attack cases (reuse, expiry, brute force, concurrent use) must be refused with
nothing changed.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from sqlalchemy import func, select
from twisted.internet import reactor
from twisted.internet.defer import Deferred, gatherResults
from twisted.internet.protocol import Protocol, ServerFactory

from console.services.identity import email_codes
from console.services.identity.mailer import Mailer, MailError
from gateway.store import email_codes as store
from gateway.store import schema
from tests.support.app import AppTestCase
from tests.support.names import ScriptedNames
from tests.support.smtp_server import SmtpServer

INVALID_CODE = "invalid or expired email verification code"


class EmailCodeCase(AppTestCase):
    smtp_security = "starttls"
    smtp_users: dict[str, str] | None = {"mailer": "mail-secret"}

    async def start_smtp(self) -> SmtpServer:
        server = SmtpServer(reactor, security=self.smtp_security, users=self.smtp_users)
        server.start()
        self.addCleanup(server.stop)
        # the real mailer, trusting the test server's throwaway certificate
        self.ctx.mailer = Mailer(reactor, self.clock, trust_root=server.trust_root)
        return server

    async def save(self, **rows: str) -> None:
        await self.ctx.live_settings.save(rows, self.ctx.now())

    async def prepared(self, **settings: str) -> SmtpServer:
        await self.setup_admin()
        server = await self.start_smtp()
        await self.save(**server.settings(), email_verification_required="true", **settings)
        return server

    async def ask_code(self, email: str, **extra: Any) -> Any:
        return await self.call("POST", "/auth/password/email-code", {"email": email, **extra})

    async def register(self, username: str, password: str = "password123",  # type: ignore[override]
                       email: str | None = None, **extra: Any) -> Any:
        return await self.call("POST", "/auth/password/register", {
            "username": username, "email": email or f"{username}@example.com",
            "password": password, **extra})

    async def count(self, table: Any) -> int:
        return await self.ctx.db.transaction(
            lambda conn: conn.execute(select(func.count()).select_from(table)).scalar_one())

    async def user_count(self) -> int:
        return await self.count(schema.users)


class EmailCodeTests(EmailCodeCase):
    async def test_code_delivered_over_starttls_with_auth_then_registration(self) -> None:
        server = await self.prepared()
        response = await self.ask_code("Lin@Example.org")
        assert response.status == 200, response
        assert response.json() == {"message": "Verification code sent"}
        mail = server.last_to("lin@example.org")
        assert mail.secure and mail.user == "mailer"
        assert mail.mail_from == "no-reply@example.com"
        code = mail.code()
        stored = await self.ctx.db.transaction(
            lambda conn: [dict(r) for r in conn.execute(
                select(schema.email_codes)).mappings()])
        assert len(stored) == 1 and code not in str(stored)
        assert stored[0]["code_hash"] == email_codes.code_hash(
            "lin@example.org", "registration", code)
        created = await self.register("lin", email="lin@example.org", email_code=code)
        assert created.status == 200, created
        assert created.json()["user"]["email_verified"] is True

    async def test_registration_without_a_code_is_refused(self) -> None:
        await self.prepared()
        for extra in ({}, {"email_code": ""}, {"email_code": "12345x"}):
            response = await self.register("lin", **extra)
            assert response.status == 400, (extra, response)
            assert response.json()["field"] == "email_code"
        assert await self.user_count() == 1

    async def test_reused_code_is_refused(self) -> None:
        server = await self.prepared()
        await self.ask_code("lin@example.com")
        code = server.last_to("lin@example.com").code()
        assert (await self.register("lin", email_code=code)).status == 200
        # the same address again (another username) cannot spend the code twice
        again = await self.register("lin2", email="lin@example.com", email_code=code)
        assert again.status == 400 and again.json()["error"] == INVALID_CODE
        assert await self.user_count() == 2

    async def test_failed_registration_does_not_spend_the_code(self) -> None:
        server = await self.prepared()
        await self.ask_code("lin@example.com")
        code = server.last_to("lin@example.com").code()
        await self.save(email_verification_required="false")
        assert (await self.register("taken", email="t@example.com")).status == 200
        await self.save(email_verification_required="true")
        clash = await self.register("taken", email="lin@example.com", email_code=code)
        assert clash.status == 400 and clash.json()["error"] == "username already exists"
        # the username clash rolled the spending back: the code still works
        assert (await self.register("lin", email_code=code)).status == 200

    async def test_expired_code_is_refused(self) -> None:
        server = await self.prepared(email_code_ttl_seconds="120")
        await self.ask_code("lin@example.com")
        code = server.last_to("lin@example.com").code()
        self.clock.advance(121)
        response = await self.register("lin", email_code=code)
        assert response.status == 400 and response.json()["error"] == INVALID_CODE
        assert await self.user_count() == 1

    async def test_code_still_valid_before_expiry(self) -> None:
        server = await self.prepared(email_code_ttl_seconds="120")
        await self.ask_code("lin@example.com")
        self.clock.advance(119)
        response = await self.register("lin", email_code=server.last_to("lin@example.com").code())
        assert response.status == 200, response

    async def guess(self, code: str) -> Any:
        """One registration attempt a minute later (past the per-address throttle)."""
        self.clock.advance(61)
        return await self.register("lin", email_code=code)

    def wrong(self, code: str) -> str:
        return f"{(int(code) + 1) % 1_000_000:06d}"

    async def test_five_wrong_attempts_kill_the_code(self) -> None:
        server = await self.prepared()
        await self.ask_code("lin@example.com")
        code = server.last_to("lin@example.com").code()
        for _ in range(5):
            response = await self.guess(self.wrong(code))
            assert response.status == 400 and response.json()["error"] == INVALID_CODE
        # the right code after that is refused too: the code is dead
        dead = await self.guess(code)
        assert dead.status == 400 and dead.json()["error"] == INVALID_CODE
        assert await self.user_count() == 1

    async def test_four_wrong_attempts_leave_the_code_usable(self) -> None:
        server = await self.prepared()
        await self.ask_code("lin@example.com")
        code = server.last_to("lin@example.com").code()
        for _ in range(4):
            assert (await self.guess(self.wrong(code))).status == 400
        assert (await self.guess(code)).status == 200

    async def test_wrong_attempts_count_on_every_live_code(self) -> None:
        server = await self.prepared()
        await self.ask_code("lin@example.com")
        first = server.last_to("lin@example.com").code()
        await self.ask_code("lin@example.com")
        second = server.last_to("lin@example.com").code()
        wrong = next(f"{n:06d}" for n in range(10) if f"{n:06d}" not in (first, second))
        for _ in range(5):
            assert (await self.guess(wrong)).status == 400
        for code in (first, second):
            assert (await self.guess(code)).status == 400
        assert await self.user_count() == 1

    async def test_concurrent_registrations_with_one_code_make_one_account(self) -> None:
        server = await self.prepared()
        await self.ask_code("lin@example.com")
        code = server.last_to("lin@example.com").code()
        responses = await gatherResults([
            Deferred.fromCoroutine(
                self.register(f"lin{i}", email="lin@example.com", email_code=code))
            for i in range(3)])  # registration allows 3/min per address
        assert sorted(r.status for r in responses) == [200, 400, 400], responses
        assert await self.user_count() == 2

    async def test_registered_address_gets_a_notice_not_a_code(self) -> None:
        server = await self.prepared()
        await self.save(email_verification_required="false")
        assert (await self.register("lin")).status == 200
        await self.save(email_verification_required="true")
        known = await self.ask_code("LIN@example.com")
        unknown = await self.ask_code("new@example.com")
        assert known.status == unknown.status == 200
        assert known.json() == unknown.json() == {"message": "Verification code sent"}
        notice = server.last_to("lin@example.com")
        assert "already exists" in notice.text
        assert not any(ch.isdigit() for ch in notice.text)
        assert await self.count(schema.email_codes) == 1

    async def test_rate_limited_per_address_and_per_ip(self) -> None:
        server = await self.prepared()
        for _ in range(3):
            assert (await self.ask_code("lin@example.com")).status == 200
        limited = await self.ask_code("lin@example.com")
        assert limited.status == 429 and limited.header("Retry-After")
        assert len(server.received) == 3
        ip = self.fresh_ip()
        statuses = [(await self.call("POST", "/auth/password/email-code",
                                     {"email": f"u{i}@example.com"}, ip=ip)).status
                    for i in range(4)]
        assert statuses == [200, 200, 200, 429]

    async def test_bad_input_and_disabled_states(self) -> None:
        server = await self.prepared(registration_email_suffixes="example.com")
        for body, field in (({}, "email"), ({"email": "nope"}, "email"),
                            ({"email": "a@other.org"}, "email")):
            response = await self.call("POST", "/auth/password/email-code", body)
            assert response.status == 400 and response.json()["field"] == field, response
        await self.save(password_registration_enabled="false")
        closed = await self.ask_code("lin@example.com")
        assert closed.status == 400
        assert closed.json()["error"] == "password registration is disabled"
        await self.save(password_registration_enabled="true", smtp_host="")
        unconfigured = await self.ask_code("lin@example.com")
        assert unconfigured.status == 400
        assert unconfigured.json()["error"] == "SMTP is not configured"
        assert server.received == [] and await self.count(schema.email_codes) == 0

    async def test_setup_gate(self) -> None:
        response = await self.ask_code("lin@example.com")
        assert response.status == 409

    async def test_smtp_refusal_is_a_clear_400_and_keeps_no_code(self) -> None:
        server = await self.prepared()
        server.refuse.add("lin@example.com")
        response = await self.ask_code("lin@example.com")
        assert response.status == 400 and response.json()["type"] == "mail_failed"
        assert await self.count(schema.email_codes) == 0

    async def test_smtp_wrong_credentials_fail(self) -> None:
        server = await self.prepared()
        await self.save(smtp_password="wrong")
        response = await self.ask_code("lin@example.com")
        assert response.status == 400 and response.json()["type"] == "mail_failed"
        assert server.received == []


class MailerTransportTests(EmailCodeCase):
    """The transports ``smtp_security`` selects, against the matching real server."""

    async def send_with(self, security: str, users: dict[str, str] | None,
                        **overrides: str) -> SmtpServer:
        server = SmtpServer(reactor, security=security, users=users)
        server.start()
        self.addCleanup(server.stop)
        await self.save(**server.settings(**overrides))
        mailer = Mailer(reactor, self.clock, trust_root=server.trust_root)
        await mailer.send(self.ctx.settings, "to@example.com", "Subject", "body 123456\n")
        return server

    async def test_a_server_name_resolving_to_loopback_is_refused_at_connect(self) -> None:
        ScriptedNames({"mail.evil.example": [["127.0.0.1"]]}).install(self, reactor)
        server = SmtpServer(reactor, security="none", users=None)
        server.start()
        self.addCleanup(server.stop)
        await self.save(**server.settings(smtp_host="mail.evil.example",
                                          ssrf_allow_private_networks="false"))
        mailer = Mailer(reactor, self.clock)
        with self.assertRaises(MailError) as refused:
            await mailer.send(self.ctx.settings, "to@example.com", "Subject", "body 123456\n")
        assert "SSRF" in str(refused.exception) and "127.0.0.1" in str(refused.exception)
        assert server.received == []
        await self.save(ssrf_allow_private_networks="true")
        await mailer.send(self.ctx.settings, "to@example.com", "Subject", "body 123456\n")
        assert server.last_to("to@example.com").code() == "123456"

    async def test_implicit_tls(self) -> None:
        server = await self.send_with("tls", {"u": "p"})
        mail = server.last_to("to@example.com")
        assert mail.secure and mail.user == "u" and mail.code() == "123456"
        assert mail.message["Subject"] == "Subject"

    async def test_plain_without_auth(self) -> None:
        server = await self.send_with("none", None)
        mail = server.last_to("to@example.com")
        assert not mail.secure and mail.user is None

    async def test_starttls_is_required_not_optional(self) -> None:
        # a server that does not offer STARTTLS must not get the mail in the clear
        with self.assertRaises(MailError):
            await self.send_with("none", {"u": "p"}, smtp_security="starttls")

    async def test_untrusted_certificate_is_refused(self) -> None:
        server = SmtpServer(reactor, security="tls", users=None)
        server.start()
        self.addCleanup(server.stop)
        await self.save(**server.settings())
        other = SmtpServer(reactor, security="none")
        with self.assertRaises(MailError):
            await Mailer(reactor, self.clock, trust_root=other.trust_root).send(
                self.ctx.settings, "to@example.com", "s", "t")
        assert server.received == []

    async def test_timeout_on_the_clock(self) -> None:
        # a listener that accepts and never speaks: the clock's timeout drops the connection
        factory: Any = ServerFactory.forProtocol(Protocol)
        silent: Any = reactor.listenTCP(0, factory, interface="127.0.0.1")
        self.addCleanup(silent.stopListening)
        await self.save(smtp_host="127.0.0.1", smtp_port=str(silent.getHost().port),
                        smtp_security="none", smtp_from="a@example.com",
                        ssrf_allow_private_networks="true")
        sending = Mailer(reactor, self.clock, timeout=5).send(
            self.ctx.settings, "to@example.com", "s", "t")
        d = Deferred.fromCoroutine(sending)
        self.clock.advance(6)
        with self.assertRaises(MailError):
            await d


class PostgresEmailCodeTests(EmailCodeCase):
    backend = "postgresql"

    async def test_concurrent_consumption_spends_a_code_once(self) -> None:
        now = self.ctx.now()
        hashed = email_codes.code_hash("a@example.com", "registration", "123456")
        await self.ctx.db.transaction(
            lambda conn: store.insert(conn, email="a@example.com", purpose="registration",
                                      code_hash=hashed, captcha_verified=False, now=now,
                                      expires_at=now + timedelta(minutes=10)))
        results = await gatherResults([
            self.ctx.db.transaction(email_codes.consume, "a@example.com", "registration",
                                    "123456", now)
            for _ in range(8)])
        assert sorted(results) == [False] * 7 + [True]

    async def test_concurrent_registrations_with_one_code(self) -> None:
        server = await self.prepared()
        await self.ask_code("lin@example.com")
        code = server.last_to("lin@example.com").code()
        responses = await gatherResults([
            Deferred.fromCoroutine(
                self.register(f"lin{i}", email="lin@example.com", email_code=code))
            for i in range(3)])  # registration allows 3/min per address
        assert sorted(r.status for r in responses) == [200, 400, 400], responses
        assert await self.user_count() == 2
