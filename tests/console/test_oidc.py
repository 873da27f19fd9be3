"""OIDC sign-in and binding against a real provider process on loopback (the full redirect
dance: our /auth/login -> the provider's /authorize -> our /auth/callback), and every state,
nonce, token and linking attack refused with nothing changed."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

import orjson
import treq
from sqlalchemy import select

from gateway.store import schema
from tests.support.app import AppTestCase, Response

ROOT = Path(__file__).resolve().parents[2]
CLIENT_ID, CLIENT_SECRET = "lockgate", "s3cret"


def cookies_of(response: Response) -> dict[str, str]:
    jar = {}
    for header in response.headers.getRawHeaders("set-cookie") or []:
        name, _, rest = header.partition("=")
        jar[name] = rest.split(";")[0]
    return jar


def set_cookie_header(response: Response, name: str) -> str:
    for header in response.headers.getRawHeaders("set-cookie") or []:
        if header.startswith(name + "="):
            return header
    raise AssertionError(f"no {name} cookie in {response}")


class OidcCase(AppTestCase):
    def setUp(self) -> None:
        super().setUp()
        self.idp = subprocess.Popen(
            [sys.executable, "-m", "tests.support.oidc_provider", "--port", "0",
             "--client-id", CLIENT_ID, "--client-secret", CLIENT_SECRET],
            cwd=ROOT, stdout=subprocess.PIPE, text=True)
        self.addCleanup(self._stop_idp)
        assert self.idp.stdout is not None
        line = self.idp.stdout.readline()
        assert line.startswith("PORT "), line
        self.issuer = f"http://127.0.0.1:{int(line.split()[1])}"

    def _stop_idp(self) -> None:
        self.idp.terminate()
        self.idp.wait(10)
        if self.idp.stdout:
            self.idp.stdout.close()

    async def configure(self, **extra: str) -> None:
        rows = {"oidc_enabled": "true", "oidc_issuer": self.issuer,
                "oidc_client_id": CLIENT_ID, "oidc_client_secret": CLIENT_SECRET,
                "base_url": self.base,
                # the fake provider lives on loopback, which the SSRF policy refuses by default
                "ssrf_allow_private_networks": "true"}
        rows.update(extra)
        await self.ctx.live_settings.save(rows, self.ctx.now())
        await self.knobs(now=int(self.clock.seconds()))

    async def knobs(self, **values: Any) -> None:
        response = await treq.post(f"{self.issuer}/control", data=orjson.dumps(values),
                                   pool=self.pool)
        assert response.code == 200
        await treq.content(response)

    async def get(self, url: str, cookies: dict[str, str] | None = None,
                  headers: dict[str, str] | None = None) -> Response:
        if url.startswith("/"):
            url = self.base + url
        all_headers = {"X-Forwarded-For": self.fresh_ip()}
        if cookies:
            all_headers["Cookie"] = "; ".join(f"{k}={v}" for k, v in cookies.items())
        all_headers.update(headers or {})
        response = await treq.get(url, headers={k: [v] for k, v in all_headers.items()},
                                  allow_redirects=False, pool=self.pool)
        return Response(response.code, response.headers, await treq.content(response))

    async def dance(self, start: str = "/auth/login") -> tuple[Response, Response, Response]:
        """Start, let the provider answer, and return to our callback with the cookies."""
        started = await self.get(start)
        assert started.status == 302, started
        at_idp = await self.get(started.header("location") or "")
        assert at_idp.status == 302, at_idp
        back = await self.get(at_idp.header("location") or "", cookies=cookies_of(started))
        return started, at_idp, back

    async def users(self) -> list[dict[str, Any]]:
        return await self.ctx.db.transaction(lambda conn: [
            dict(row) for row in conn.execute(
                select(schema.users).order_by(schema.users.c.id)).mappings()])

    def assert_refused(self, response: Response, words: str) -> None:
        location = response.header("location") or ""
        assert response.status == 302 and location.startswith("/login#error="), response
        assert words.lower() in unquote(location).lower(), location


class OidcLoginTests(OidcCase):
    async def test_login_creates_then_reuses_account(self) -> None:
        await self.setup_admin()
        await self.configure()
        started, _, back = await self.dance()
        authorize = urlsplit(started.header("location") or "")
        query = {k: v[0] for k, v in parse_qs(authorize.query).items()}
        assert f"{authorize.scheme}://{authorize.netloc}{authorize.path}" == \
            self.issuer + "/authorize"
        assert query["code_challenge_method"] == "S256" and len(query["code_challenge"]) == 43
        assert query["redirect_uri"] == self.base + "/auth/callback"
        assert query["nonce"] and query["scope"] == "openid profile email"
        assert query["state"] == cookies_of(started)["flai_oidc_state"]
        cookie = set_cookie_header(started, "flai_oidc_state")
        for attribute in ("HttpOnly", "SameSite=lax", "Path=/auth", "Max-Age=600"):
            assert attribute.lower() in cookie.lower(), cookie

        location = back.header("location") or ""
        assert back.status == 302 and location.startswith("/dashboard#token="), back
        assert "?" not in location
        token = unquote(location.split("#token=", 1)[1])
        me = await self.call("GET", "/api/user/me", token=token)
        assert me.status == 200, me
        body = me.json()
        assert body["email"] == "ida@example.org" and body["email_verified"] is True
        assert body["oidc_sub"] == "user-1" and body["username"] == "Ida-Example"
        assert cookies_of(back)["flai_oidc_state"] == ""

        _, _, again = await self.dance()
        assert (again.header("location") or "").startswith("/dashboard#token=")
        assert len(await self.users()) == 2

    async def test_token_without_kid_uses_the_only_key(self) -> None:
        await self.setup_admin()
        await self.configure()
        await self.knobs(no_kid=True)
        _, _, back = await self.dance()
        assert (back.header("location") or "").startswith("/dashboard#token="), back

    async def test_setup_gate_disabled_and_unconfigured(self) -> None:
        await self.configure()
        response = await self.get("/auth/login")
        assert response.status == 409 and response.json()["type"] == "setup_required"
        await self.setup_admin()
        await self.ctx.live_settings.save({"oidc_enabled": "false"}, self.ctx.now())
        response = await self.get("/auth/login")
        assert response.status == 503
        assert response.json()["error"] == "OAuth login is disabled"
        await self.ctx.live_settings.save({"oidc_enabled": "true", "oidc_issuer": ""},
                                          self.ctx.now())
        response = await self.get("/auth/login")
        assert response.status == 503 and "issuer" in response.json()["error"]

    async def test_agreement_required(self) -> None:
        await self.setup_admin()
        await self.configure(auth_agreement_mode="checkbox", terms="Be nice.")
        refused = await self.get("/auth/login")
        assert refused.status == 400
        assert refused.json()["error"] == "agreement confirmation is required"
        accepted = await self.get("/auth/login?agreement_accepted=Yes")
        assert accepted.status == 302
        assert (accepted.header("location") or "").startswith(self.issuer)

    async def test_unreachable_provider_is_a_clear_error(self) -> None:
        await self.setup_admin()
        await self.configure(oidc_issuer="http://127.0.0.1:9")
        response = await self.get("/auth/login")
        assert response.status == 502, response
        assert response.json()["error"] == "identity provider is unreachable"

    async def test_referral_cookie_sets_inviter(self) -> None:
        token = await self.setup_admin()
        await self.configure(referral_enabled="true")
        admin = (await self.call("GET", "/api/user/me", token=token)).json()
        code = admin["referral_code"]
        started = await self.get(f"/auth/login?ref={code[:4]}-{code[4:].lower()}")
        assert cookies_of(started)["flai_referral_code"] == code
        at_idp = await self.get(started.header("location") or "")
        back = await self.get(at_idp.header("location") or "", cookies=cookies_of(started))
        assert (back.header("location") or "").startswith("/dashboard#token=")
        assert cookies_of(back)["flai_referral_code"] == ""
        users = await self.users()
        assert users[-1]["referrer_id"] == admin["id"]

    async def test_registration_closed_or_suffix_refused(self) -> None:
        await self.setup_admin()
        await self.configure(password_registration_enabled="false")
        _, _, back = await self.dance()
        self.assert_refused(back, "registration is disabled")
        await self.configure(password_registration_enabled="true",
                             registration_email_suffixes="corp.example")
        _, _, back = await self.dance()
        self.assert_refused(back, "email domain is not allowed")
        await self.knobs(email="ida@corp.example", email_verified=False)
        _, _, back = await self.dance()
        self.assert_refused(back, "not verified")
        assert len(await self.users()) == 1
        await self.knobs(email_verified=True)
        _, _, back = await self.dance()
        assert (back.header("location") or "").startswith("/dashboard#token=")
        assert (await self.users())[-1]["email"] == "ida@corp.example"


class OidcAttackTests(OidcCase):
    async def test_missing_mismatched_forged_and_replayed_state(self) -> None:
        await self.setup_admin()
        await self.configure()
        started = await self.get("/auth/login")
        at_idp = await self.get(started.header("location") or "")
        callback = at_idp.header("location") or ""
        cookies = cookies_of(started)
        missing = await self.get(callback)
        assert missing.status == 400 and missing.json()["error"] == "Invalid OIDC state"
        wrong = await self.get(callback, cookies={"flai_oidc_state": "x" * 43})
        assert wrong.status == 400
        forged = await self.get("/auth/callback?code=abc&state=" + "y" * 43,
                                cookies={"flai_oidc_state": "y" * 43})
        assert forged.status == 400 and forged.json()["error"] == "Invalid OIDC state"
        no_state = await self.get("/auth/callback?code=abc", cookies=cookies)
        assert no_state.status == 400
        assert len(await self.users()) == 1
        ok = await self.get(callback, cookies=cookies)
        assert (ok.header("location") or "").startswith("/dashboard#token=")
        replay = await self.get(callback, cookies=cookies)
        assert replay.status == 400 and replay.json()["error"] == "Invalid OIDC state"
        assert len(await self.users()) == 2

    async def test_expired_state_refused(self) -> None:
        await self.setup_admin()
        await self.configure()
        started = await self.get("/auth/login")
        at_idp = await self.get(started.header("location") or "")
        self.clock.advance(601)
        late = await self.get(at_idp.header("location") or "", cookies=cookies_of(started))
        assert late.status == 400
        assert len(await self.users()) == 1

    async def test_bad_id_tokens_refused(self) -> None:
        await self.setup_admin()
        await self.configure()
        cases = [({"nonce": "not-the-nonce"}, "nonce"),
                 ({"aud": "someone-else"}, "audience"),
                 ({"exp_offset": -300}, "expired"),
                 ({"iss": "http://evil.example"}, "issuer"),
                 ({"foreign_key": True}, "")]
        for knobs, words in cases:
            await self.knobs(nonce=None, aud=CLIENT_ID, exp_offset=300, iss=self.issuer,
                             foreign_key=False)
            await self.knobs(**knobs)
            _, _, back = await self.dance()
            self.assert_refused(back, words)
        assert len(await self.users()) == 1

    async def test_unverified_email_is_not_linked(self) -> None:
        await self.setup_admin()
        await self.configure()
        bob = await self.register("bob")
        await self.knobs(sub="idp-bob", email="bob@example.com", email_verified=False)
        before = await self.users()
        _, _, back = await self.dance()
        self.assert_refused(back, "already exists")
        assert await self.users() == before
        await self.knobs(email_verified=True)
        _, _, back = await self.dance()
        location = back.header("location") or ""
        assert location.startswith("/dashboard#token="), back
        me = await self.call("GET", "/api/user/me", token=unquote(location.split("=", 1)[1]))
        assert me.json()["id"] == bob["user"]["id"]
        assert me.json()["oidc_sub"] == "idp-bob" and me.json()["email_verified"] is True
        assert len(await self.users()) == 2

    async def test_no_parameter_or_header_chooses_a_redirect(self) -> None:
        await self.setup_admin()
        await self.configure()
        evil = "https://evil.example/steal"
        await self.knobs(extra_query={"redirect_uri": evil, "next": evil, "return_to": evil,
                                      "redirect": evil})
        started = await self.get(
            f"/auth/login?redirect_uri={evil}&next={evil}&return_to={evil}&redirect={evil}",
            headers={"Referer": evil, "Origin": "https://evil.example"})
        authorize = urlsplit(started.header("location") or "")
        assert f"{authorize.scheme}://{authorize.netloc}" == self.issuer
        query = parse_qs(authorize.query)
        assert query["redirect_uri"] == [self.base + "/auth/callback"]
        assert "evil" not in (started.header("location") or "")
        assert set(cookies_of(started)) == {"flai_oidc_state"}
        at_idp = await self.get(started.header("location") or "")
        assert "evil" in (at_idp.header("location") or "")
        back = await self.get(at_idp.header("location") or "", cookies=cookies_of(started),
                              headers={"Referer": evil})
        location = back.header("location") or ""
        assert location.startswith("/dashboard#token="), back
        assert "evil" not in location


class OidcBindTests(OidcCase):
    async def test_bind_then_refuse_second_owner(self) -> None:
        await self.setup_admin()
        await self.configure()
        bob = await self.register("bob")
        await self.knobs(sub="corp-bob", email="bob@example.com", email_verified=True)
        bound = await self.call("POST", "/api/user/oidc/bind-url", token=bob["token"])
        assert bound.status == 200, bound
        auth_url = bound.json()["auth_url"]
        assert auth_url.startswith(self.issuer + "/authorize?")
        state = parse_qs(urlsplit(auth_url).query)["state"][0]
        assert cookies_of(bound)["flai_oidc_state"] == state
        at_idp = await self.get(auth_url)
        back = await self.get(at_idp.header("location") or "", cookies=cookies_of(bound))
        assert (back.header("location") or "").startswith("/dashboard#token="), back
        rows = {row["username"]: row for row in await self.users()}
        assert rows["bob"]["oidc_sub"] == "corp-bob" and rows["bob"]["email_verified"]

        carol = await self.register("carol")
        bound = await self.call("POST", "/api/user/oidc/bind-url", token=carol["token"])
        at_idp = await self.get(bound.json()["auth_url"])
        back = await self.get(at_idp.header("location") or "", cookies=cookies_of(bound))
        self.assert_refused(back, "already bound to another user")
        rows = {row["username"]: row for row in await self.users()}
        assert rows["carol"]["oidc_sub"] is None

    async def test_bind_state_needs_the_cookie_and_a_session(self) -> None:
        await self.setup_admin()
        await self.configure()
        assert (await self.call("POST", "/api/user/oidc/bind-url")).status == 401
        bob = await self.register("bob")
        bound = await self.call("POST", "/api/user/oidc/bind-url", token=bob["token"])
        at_idp = await self.get(bound.json()["auth_url"])
        stolen = await self.get(at_idp.header("location") or "")
        assert stolen.status == 400
        rows = {row["username"]: row for row in await self.users()}
        assert rows["bob"]["oidc_sub"] is None

    async def test_bind_url_when_disabled(self) -> None:
        await self.setup_admin()
        bob = await self.register("bob")
        response = await self.call("POST", "/api/user/oidc/bind-url", token=bob["token"])
        assert response.status == 400
        assert response.json()["error"] == "OAuth login is disabled"


class OidcPostgresTests(OidcAttackTests):
    backend = "postgresql"
