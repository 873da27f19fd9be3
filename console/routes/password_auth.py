"""``POST /auth/password/register`` and ``POST /auth/password/login`` (contract §2.2, §2.3).

Checks run in the contract's order; wrong identifier and wrong password answer the same 401
(D17) after the same amount of hashing work, so neither reveals whether an account exists.
"""

from __future__ import annotations

from typing import Any

from twisted.logger import Logger

from console.context import ConsoleContext
from console.http import ApiError, bad_request, json_route, make_app, read_object
from console.routes.email_code import send_registration_code
from console.services.identity import email_codes, registration, throttle
from console.services.identity.captcha import captcha_enabled
from console.user_view import user_view
from gateway.store import users as user_store

log = Logger()
REFERRAL_COOKIE = b"flai_referral_code"


def normalise_referral(code: str) -> str:
    return code.upper().replace(" ", "").replace("-", "")


def _register(conn: Any, fields: dict[str, Any], now: Any) -> tuple[dict, dict] | None:
    """Create the user, spending the email code in the same transaction (None: bad code).

    A bad code returns (so the attempt it counted is committed); a clash after the code was
    spent raises, which rolls the spending back.
    """
    if fields["code_required"] and not email_codes.consume(
        conn, fields["email"], email_codes.REGISTRATION, fields["email_code"], now,
        require_captcha=fields["code_carries_captcha"],
    ):
        return None
    referrer_id = None
    if fields["referral_code"] and fields["referral_enabled"]:
        referrer = user_store.find_by_referral_code(conn, fields["referral_code"])
        referrer_id = referrer["id"] if referrer else None
    user_id = user_store.create_user(
        conn, username=fields["username"], email=fields["email"],
        password_hash=fields["password_hash"], now=now, is_admin=False,
        email_verified=fields["code_required"], group_id=fields["group_id"],
        referrer_id=referrer_id,
    )
    user = user_store.get_user(conn, user_id)
    assert user is not None
    return user, user_store.user_relations(conn, user)


def _login_lookup(conn: Any, identifier: str) -> tuple[dict | None, dict | None]:
    user = user_store.find_by_identifier(conn, identifier)
    return user, (user_store.user_relations(conn, user) if user else None)


class PasswordAuthRoutes:
    app = make_app()

    def __init__(self, ctx: ConsoleContext) -> None:
        self.ctx = ctx

    async def _setup_gate(self) -> None:
        if not await self.ctx.db.transaction(user_store.admin_exists):
            raise ApiError(409, "Initial setup is required", type="setup_required")

    @app.route("/register", methods=["POST"])
    @json_route
    async def register(self, request: Any) -> dict[str, Any]:
        body = read_object(request)
        settings = self.ctx.settings
        identity = body.get("email") if isinstance(body.get("email"), str) else None
        await self.ctx.throttle.check(request, throttle.REGISTER, identity)
        registration.check_agreement(settings, body.get("agreement_accepted"))
        referral = body.get("referral_code")
        if referral is not None and not isinstance(referral, str):
            raise bad_request("referral_code must be a string", field="referral_code")
        if not referral:
            cookie = request.getCookie(REFERRAL_COOKIE)
            referral = cookie.decode("latin-1") if cookie else ""
        await self._setup_gate()
        if not settings.flag("password_registration_enabled"):
            raise bad_request("password registration is disabled")
        username = registration.clean_username(body.get("username"))
        email = registration.clean_email(body.get("email"))
        password = registration.clean_password(body.get("password"))
        code_required = settings.flag("email_verification_required")
        code = email_codes.clean_code(body.get("email_code"))
        if code_required and body.get("email_code") in (None, ""):
            raise bad_request("email verification code is required", field="email_code")
        # a code issued after a passed captcha stands in for the captcha (contract §2.1)
        token = body.get("captcha_token")
        code_carries_captcha = (captcha_enabled(settings) and code_required
                                and not (isinstance(token, str) and token.strip()))
        if not code_carries_captcha:
            await self.ctx.captcha.require(settings, token, self.ctx.addresses.of(request))
        registration.check_email_domain(settings, email)
        fields = {
            "username": username,
            "email": email,
            "password_hash": await self.ctx.passwords.hash(password),
            "group_id": registration.routed_group_id(settings, email),
            "referral_code": normalise_referral(referral),
            "referral_enabled": settings.flag("referral_enabled"),
            "code_required": code_required,
            "email_code": code,
            "code_carries_captcha": code_carries_captcha,
        }
        try:
            created = await self.ctx.db.transaction(_register, fields, self.ctx.now())
        except user_store.UniqueViolation as exc:
            raise bad_request(f"{exc.field} already exists", field=exc.field) from None
        if created is None:
            raise bad_request("invalid or expired email verification code", field="email_code")
        user, relations = created
        request.addCookie(REFERRAL_COOKIE, b"", path=b"/auth", max_age=b"0", httpOnly=True,
                          sameSite="lax")
        return {"token": self.ctx.issue_token(user), "user": user_view(user, relations)}

    @app.route("/email-code", methods=["POST"])
    @json_route
    async def email_code(self, request: Any) -> dict[str, Any]:
        return await send_registration_code(self.ctx, request, read_object(request))

    @app.route("/login", methods=["POST"])
    @json_route
    async def login(self, request: Any) -> dict[str, Any]:
        body = read_object(request)
        settings = self.ctx.settings
        raw_identifier = body.get("identifier")
        identity = raw_identifier if isinstance(raw_identifier, str) else None
        await self.ctx.throttle.check(request, throttle.LOGIN, identity)
        registration.check_agreement(settings, body.get("agreement_accepted"))
        await self._setup_gate()
        if not settings.flag("password_login_enabled"):
            raise bad_request("password login is disabled")
        await self.ctx.captcha.require(settings, body.get("captcha_token"),
                                       self.ctx.addresses.of(request))
        password = body.get("password")
        if not isinstance(raw_identifier, str) or not raw_identifier.strip():
            # the contract's text, and the field a client must send (a newcomer tries
            # "username" or "email" first)
            raise bad_request("username/email and password are required", field="identifier")
        if not isinstance(password, str) or not password:
            raise bad_request("username/email and password are required", field="password")
        if len(password) > 1024:
            raise ApiError(401, "invalid username/email or password", type="invalid_credentials")
        user, relations = await self.ctx.db.transaction(_login_lookup, raw_identifier.strip())
        ok = await self.ctx.passwords.verify(user["password_hash"] if user else None, password)
        if not ok or user is None or relations is None:
            log.info("login failed for {identifier} from {ip}",
                     identifier=raw_identifier.strip()[:100], ip=self.ctx.addresses.of(request))
            raise ApiError(401, "invalid username/email or password", type="invalid_credentials")
        if not user["enabled"]:
            raise ApiError(403, "User is disabled", type="user_disabled")
        return {"token": self.ctx.issue_token(user), "user": user_view(user, relations)}
