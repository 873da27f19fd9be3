"""OIDC sign-in and binding: ``GET /auth/login``, ``GET /auth/callback`` and
``POST /api/user/oidc/bind-url`` (contract §2.7, §4.11; mounts ``auth/login``,
``auth/callback``, ``api/user/oidc``).

The state is a random value stored server-side (with the nonce, the PKCE verifier and, for a
bind, the signed-in user) and also set in an HttpOnly SameSite=Lax cookie; the callback needs
both to match and consumes the row atomically, so a state works once and only in the browser
that started the flow.  Redirect targets are fixed (``/dashboard#token=…`` with the token in
the fragment only, ``/login#error=…``): no parameter or header can choose where a user lands
(weakness 11).  An identity is linked to an existing account by email only when the provider
says the email is verified (weakness 10), and accounts are created only when registration is
open and the email-suffix rules pass (weakness 7).  Finding, linking and creating the account is
one store transaction (``gateway.store.oidc_accounts``); this module computes the signup policy
from the settings and maps refusals to the login page.
"""

from __future__ import annotations

import hmac
from collections.abc import Coroutine
from dataclasses import dataclass
from datetime import timedelta
from typing import Any
from urllib.parse import quote

from twisted.internet.defer import Deferred, ensureDeferred
from twisted.logger import Logger
from twisted.web.iweb import IRequest

from console.context import ConsoleContext
from console.http import ApiError, bad_request, json_route, make_app, write_json
from console.routes.password_auth import REFERRAL_COOKIE, normalise_referral
from console.services.identity import registration, throttle
from console.services.identity.oidc import (
    OidcClient,
    OidcError,
    Provider,
    provider_from,
    random_token,
)
from gateway.store import auth_challenges
from gateway.store import oidc_accounts as account_store
from gateway.store import users as user_store
from gateway.store.oidc_accounts import (
    IdentityConflict,
    LinkRefused,
    OidcIdentity,
    SignupPolicy,
)

log = Logger()
STATE_COOKIE = b"flai_oidc_state"
STATE_TTL = timedelta(minutes=10)
LOGIN, BIND = "oidc_login", "oidc_bind"
SUCCESS_PATH = "/dashboard#token="
FAILURE_PATH = "/login#error="
TRUE_WORDS = frozenset({"1", "true", "yes", "on", "accepted"})


@dataclass(frozen=True)
class Redirect:
    location: str


def _arg(request: IRequest, name: str) -> str:
    values = (request.args or {}).get(name.encode())
    return values[0].decode("utf-8", "replace") if values else ""


def _secure(ctx: ConsoleContext, request: IRequest) -> bool:
    return bool(request.isSecure()) or ctx.settings.text("base_url").startswith("https://")


def _set_cookie(ctx: ConsoleContext, request: Any, name: bytes, value: str,
                max_age: int) -> None:
    request.addCookie(name, value.encode(), path=b"/auth", max_age=str(max_age).encode(),
                      httpOnly=True, sameSite="lax", secure=_secure(ctx, request))


async def _answer(request: IRequest, work: Coroutine[Any, Any, Redirect]) -> bytes:
    try:
        result = await work
    except ApiError as error:
        for name, value in error.headers.items():
            request.setHeader(name.encode(), value.encode())
        return write_json(request, error.status, error.body())
    except Exception:
        log.failure("unhandled error in {path}", path=request.path)
        return write_json(request, 500, {"error": "Internal server error", "type": "internal"})
    request.setResponseCode(302)
    request.setHeader(b"location", result.location.encode())
    request.setHeader(b"cache-control", b"no-store")
    request.setHeader(b"referrer-policy", b"no-referrer")
    return b""


async def _setup_gate(ctx: ConsoleContext) -> None:
    if not await ctx.db.transaction(user_store.admin_exists):
        raise ApiError(409, "Initial setup is required", type="setup_required")


async def _start(ctx: ConsoleContext, client: OidcClient, request: IRequest, provider: Provider,
                 purpose: str, user_id: int | None) -> str:
    """Store a fresh state (with nonce and PKCE verifier), set the cookie, return the URL."""
    state, nonce, verifier = random_token(), random_token(), random_token()
    try:
        url = await client.authorization_url(provider, state, nonce, verifier)
    except OidcError as exc:
        raise ApiError(502, str(exc), type="oidc_provider_error") from None
    now = ctx.now()
    await ctx.db.transaction(lambda conn: auth_challenges.create(
        conn, key=state, purpose=purpose, user_id=user_id,
        data={"nonce": nonce, "verifier": verifier}, expires_at=now + STATE_TTL, now=now))
    _set_cookie(ctx, request, STATE_COOKIE, state, int(STATE_TTL.total_seconds()))
    return url


def _identity(claims: dict[str, Any]) -> OidcIdentity:
    verified = claims.get("email_verified")
    email = claims.get("email")
    try:
        clean = registration.clean_email(email) if isinstance(email, str) and email else None
    except ApiError:
        clean = None
    name = next((claims[key] for key in ("name", "preferred_username")
                 if isinstance(claims.get(key), str) and claims[key].strip()), "")
    picture = claims.get("picture")
    if len(claims["sub"]) > 255:
        raise LinkRefused("the identity provider's subject is too long")
    return OidcIdentity(
        sub=claims["sub"], email=clean, name=name,
        email_verified=verified is True or verified == "true",
        avatar=picture if isinstance(picture, str) and picture.startswith("https://") else "")


def _username_base(identity: OidcIdentity) -> str:
    for raw in (identity.name, (identity.email or "").split("@")[0], identity.sub):
        cleaned = "".join("-" if ch.isspace() else ch for ch in raw.strip()
                          if ch != "@" and ord(ch) >= 32).strip("-")[:90]
        if len(cleaned) >= 3:
            return cleaned
    return "user"


class _Base:
    def __init__(self, ctx: ConsoleContext) -> None:
        self.ctx = ctx
        self.client = OidcClient(ctx.reactor, ctx.clock.seconds, ctx.settings)


class OidcLoginRoutes(_Base):
    """``GET /auth/login``: start the authorization code flow."""

    app = make_app()

    @app.route("/", methods=["GET"])
    def start(self, request: IRequest) -> Deferred[bytes]:
        return ensureDeferred(_answer(request, self._start(request)))

    async def _start(self, request: IRequest) -> Redirect:
        ctx = self.ctx
        await ctx.throttle.check(request, throttle.OIDC_START)
        await _setup_gate(ctx)
        referral = normalise_referral(_arg(request, "ref"))[:32]
        if referral:
            _set_cookie(ctx, request, REFERRAL_COOKIE, referral, 30 * 86400)
        accepted = _arg(request, "agreement_accepted").strip().lower() in TRUE_WORDS
        registration.check_agreement(ctx.settings, accepted)
        provider = provider_from(ctx.settings)
        return Redirect(await _start(ctx, self.client, request, provider, LOGIN, None))


class OidcCallbackRoutes(_Base):
    """``GET /auth/callback``: finish a login or a bind."""

    app = make_app()

    @app.route("/", methods=["GET"])
    def finish(self, request: IRequest) -> Deferred[bytes]:
        return ensureDeferred(_answer(request, self._finish(request)))

    async def _finish(self, request: IRequest) -> Redirect:
        ctx = self.ctx
        cookie = (request.getCookie(STATE_COOKIE) or b"").decode("latin-1")
        _set_cookie(ctx, request, STATE_COOKIE, "", 0)
        state, code = _arg(request, "state"), _arg(request, "code")
        raw_referral = (request.getCookie(REFERRAL_COOKIE) or b"").decode("latin-1")
        if raw_referral:
            _set_cookie(ctx, request, REFERRAL_COOKIE, "", 0)
        if not cookie or not state or not hmac.compare_digest(cookie.encode(), state.encode()):
            raise bad_request("Invalid OIDC state")
        if not code and not _arg(request, "error"):
            raise bad_request("Missing authorization code")
        now = ctx.now()
        row = await ctx.db.transaction(auth_challenges.consume, state, (LOGIN, BIND), now)
        if row is None:
            raise bad_request("Invalid OIDC state")
        if not code:
            return Redirect(FAILURE_PATH + quote("sign-in was cancelled at the provider"))
        if row["purpose"] == LOGIN:
            await _setup_gate(ctx)
        provider = provider_from(ctx.settings)
        try:
            id_token = await self.client.exchange(provider, code, row["data"]["verifier"])
            claims = await self.client.verify_id_token(provider, id_token, row["data"]["nonce"])
            identity = _identity(claims)
            if row["purpose"] == BIND:
                user, _ = await ctx.db.transaction(account_store.bind, row["user_id"],
                                                   identity, now)
            else:
                user, _ = await ctx.db.transaction(
                    account_store.sign_in, identity, self._policy(identity, raw_referral),
                    _username_base(identity), now)
        except (OidcError, LinkRefused) as exc:
            log.info("OIDC sign-in refused: {reason}", reason=str(exc))
            return Redirect(FAILURE_PATH + quote(str(exc), safe=""))
        except IdentityConflict:
            # a concurrent callback claimed the same identity first
            return Redirect(FAILURE_PATH + quote("please try signing in again", safe=""))
        return Redirect(SUCCESS_PATH + quote(ctx.issue_token(user), safe=""))

    def _policy(self, identity: OidcIdentity, referral: str) -> SignupPolicy:
        settings = self.ctx.settings
        email = identity.email or ""
        try:
            registration.check_email_domain(settings, email)
            domain_ok = True
        except ApiError:
            domain_ok = False
        return SignupPolicy(
            open=settings.flag("password_registration_enabled"),
            suffixes=bool(registration.allowed_suffixes(settings)),
            domain_ok=domain_ok,
            group_id=registration.routed_group_id(settings, email) if email else None,
            referral=normalise_referral(referral)[:32],
            referral_enabled=settings.flag("referral_enabled"),
        )


class OidcBindRoutes(_Base):
    """``POST /api/user/oidc/bind-url``: a state tied to the signed-in user."""

    app = make_app()

    @app.route("/bind-url", methods=["POST"])
    @json_route
    async def bind_url(self, request: IRequest) -> dict[str, Any]:
        user = await self.ctx.sessions.user(request)
        try:
            provider = provider_from(self.ctx.settings)
        except ApiError as error:
            raise bad_request(error.message) from None
        url = await _start(self.ctx, self.client, request, provider, BIND, user["id"])
        return {"auth_url": url}
