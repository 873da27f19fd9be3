"""Captcha on login, registration and email codes against a real loopback provider (§2.1).

A wrong token is refused with 400; a provider that errors, answers garbage or never answers is
refused with 503 -- never let through -- and nothing is created either way.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import func, select
from twisted.internet import reactor
from twisted.internet.defer import Deferred

from console.services.identity.mailer import Mailer
from gateway.store import schema
from tests.support.app import AppTestCase
from tests.support.captcha_server import GOOD_TOKEN, SECRET, CaptchaServer
from tests.support.names import ScriptedNames
from tests.support.smtp_server import SmtpServer

FAILED = "hCaptcha verification failed"


class CaptchaTests(AppTestCase):
    async def start(self, **settings: str) -> CaptchaServer:
        await self.setup_admin()
        server = CaptchaServer(reactor)
        server.start()
        self.addCleanup(server.stop)
        await self.save(**server.settings(**settings))
        return server

    async def save(self, **rows: str) -> None:
        await self.ctx.live_settings.save(rows, self.ctx.now())

    async def user_count(self) -> int:
        return await self.ctx.db.transaction(
            lambda conn: conn.execute(select(func.count()).select_from(schema.users)).scalar_one())

    async def signup(self, username: str = "lin", **extra: Any) -> Any:
        return await self.call("POST", "/auth/password/register", {
            "username": username, "email": f"{username}@example.com",
            "password": "password123", **extra})

    async def login(self, **extra: Any) -> Any:
        return await self.call("POST", "/auth/password/login", {
            "identifier": "admin", "password": "correct horse", **extra})

    async def test_login_requires_a_verified_token(self) -> None:
        server = await self.start()
        missing = await self.login()
        assert missing.status == 400 and missing.json()["error"] == "hCaptcha token is required"
        bad = await self.login(captcha_token="forged")
        assert bad.status == 400 and bad.json()["error"] == FAILED
        assert bad.json()["type"] == "captcha_failed"
        ok = await self.login(captcha_token=GOOD_TOKEN)
        assert ok.status == 200, ok
        # the provider saw the secret, the token and the client's address
        assert server.provider.requests[-1]["secret"] == SECRET
        assert server.provider.requests[-1]["response"] == GOOD_TOKEN
        assert server.provider.requests[-1]["remoteip"].startswith("198.51.")
        assert len(server.provider.requests) == 2  # the missing token never left the server

    async def test_registration_requires_captcha(self) -> None:
        await self.start()
        bad = await self.signup(captcha_token="forged")
        assert bad.status == 400 and bad.json()["error"] == FAILED
        assert await self.user_count() == 1
        ok = await self.signup(captcha_token=GOOD_TOKEN)
        assert ok.status == 200, ok
        assert await self.user_count() == 2

    async def test_a_provider_name_resolving_to_loopback_is_refused_at_connect(self) -> None:
        server = await self.start(ssrf_allow_private_networks="false")
        ScriptedNames({"captcha.evil.example": [["127.0.0.1"]]}).install(self, reactor)
        await self.save(hcaptcha_verify_url=server.url.replace("127.0.0.1",
                                                               "captcha.evil.example"))
        refused = await self.login(captcha_token=GOOD_TOKEN)
        assert refused.status == 503, refused
        assert server.provider.requests == []  # the secret never reached the listener
        await self.save(ssrf_allow_private_networks="true")
        assert (await self.login(captcha_token=GOOD_TOKEN)).status == 200
        assert len(server.provider.requests) == 1

    async def test_captcha_off_means_no_provider_call(self) -> None:
        server = await self.start(password_hcaptcha_enabled="false")
        assert (await self.signup()).status == 200
        assert (await self.login()).status == 200
        assert server.provider.requests == []

    async def test_provider_outage_refuses_clearly(self) -> None:
        server = await self.start()
        for mode in ("error", "garbage"):
            server.provider.mode = mode
            response = await self.signup(captcha_token=GOOD_TOKEN)
            assert response.status == 503, (mode, response)
            assert response.json()["type"] == "captcha_unavailable"
            login = await self.login(captcha_token=GOOD_TOKEN)
            assert login.status == 503, (mode, login)
        assert await self.user_count() == 1

    async def test_provider_unreachable_refuses(self) -> None:
        server = await self.start()
        await server.stop()
        response = await self.login(captcha_token=GOOD_TOKEN)
        assert response.status == 503 and "token" not in response.json()

    async def test_provider_that_never_answers_times_out(self) -> None:
        server = await self.start()
        server.provider.mode = "hang"
        arrived = server.provider.arrival()
        d = Deferred.fromCoroutine(self.login(captcha_token=GOOD_TOKEN))
        await arrived
        assert not d.called
        self.clock.advance(10.5)
        response = await d
        assert response.status == 503, response

    async def test_secret_not_configured(self) -> None:
        await self.start(hcaptcha_secret="")
        response = await self.login(captcha_token=GOOD_TOKEN)
        assert response.status == 400
        assert response.json()["error"] == "hCaptcha is not configured"

    async def test_email_code_requires_captcha_and_registration_inherits_it(self) -> None:
        captcha = await self.start()
        smtp = SmtpServer(reactor)
        smtp.start()
        self.addCleanup(smtp.stop)
        self.ctx.mailer = Mailer(reactor, self.clock)
        await self.save(**smtp.settings(), email_verification_required="true")
        refused = await self.call("POST", "/auth/password/email-code",
                                  {"email": "lin@example.com", "captcha_token": "forged"})
        assert refused.status == 400 and refused.json()["error"] == FAILED
        assert smtp.received == []
        sent = await self.call("POST", "/auth/password/email-code",
                               {"email": "lin@example.com", "captcha_token": GOOD_TOKEN})
        assert sent.status == 200, sent
        calls = len(captcha.provider.requests)
        # the code was issued after a passed captcha: registration needs no second token
        created = await self.signup(email_code=smtp.last_to("lin@example.com").code())
        assert created.status == 200, created
        assert len(captcha.provider.requests) == calls

    async def test_code_issued_without_captcha_does_not_stand_in_for_it(self) -> None:
        await self.setup_admin()
        smtp = SmtpServer(reactor)
        smtp.start()
        self.addCleanup(smtp.stop)
        self.ctx.mailer = Mailer(reactor, self.clock)
        await self.save(**smtp.settings(), email_verification_required="true")
        assert (await self.call("POST", "/auth/password/email-code",
                                {"email": "lin@example.com"})).status == 200
        captcha = CaptchaServer(reactor)
        captcha.start()
        self.addCleanup(captcha.stop)
        await self.save(**captcha.settings())
        code = smtp.last_to("lin@example.com").code()
        refused = await self.signup(email_code=code)
        assert refused.status == 400 and await self.user_count() == 1
        # with a token it is accepted (the code is still good: a captcha miss spent nothing
        # more than one attempt)
        ok = await self.signup(email_code=code, captcha_token=GOOD_TOKEN)
        assert ok.status == 200, ok

