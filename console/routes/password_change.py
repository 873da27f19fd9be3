"""``/api/user/password/*``: how to change the password, the emailed code, and the change (§4.8).

With SMTP configured the change needs a code mailed to the account's own address (so it also
works for accounts that never had a password, e.g. OIDC-only); without SMTP it needs the current
password.  The code is spent, the password replaced and the token version bumped in one
transaction, so every token issued before the change stops working (contract weakness 12) and
a code cannot be used twice.  The change is announced on the USERS channel so every node's
gateway user cache drops the old token version at once (issue 15: the old JWT kept working on
/v1).  The caller gets a fresh token.  Both POST routes are rate limited
per user and per IP (the origin limited neither).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from console.context import ConsoleContext
from console.http import ApiError, bad_request, json_route, make_app, read_object
from console.routes.email_code import mail_failed
from console.services.identity import email_codes, registration, throttle
from console.services.identity.mailer import MailError, smtp_configured
from gateway.invalidation import USERS
from gateway.store import users as user_store
from gateway.store.connection import Connection
from gateway.store.passwords import replace_password

#: wrong current passwords / codes a signed-in session may try per minute
CHANGE_LIMIT = throttle.Limit("password_change", 10, 5)


def _set_password(conn: Connection, user_id: int, password_hash: str, now: datetime,
                  verified_email: bool) -> dict[str, Any]:
    replace_password(conn, user_id, password_hash, now, verified_email=verified_email)
    user = user_store.get_user(conn, user_id)
    assert user is not None
    return user


def _change_with_code(conn: Connection, user: dict[str, Any], code: str | None,
                      password_hash: str, now: datetime) -> dict[str, Any] | None:
    if not email_codes.consume(conn, user["email"], email_codes.PASSWORD_CHANGE, code, now):
        return None
    return _set_password(conn, user["id"], password_hash, now, verified_email=True)


class PasswordChangeRoutes:
    app = make_app()

    def __init__(self, ctx: ConsoleContext) -> None:
        self.ctx = ctx

    @app.route("/method", methods=["GET"])
    @json_route
    async def method(self, request: Any) -> dict[str, Any]:
        user = await self.ctx.sessions.user_row(request)
        by_code = smtp_configured(self.ctx.settings)
        return {
            "method": "email_code" if by_code else "current_password",
            "email": user["email"],
            "password_set": bool(user["password_hash"]),
        }

    @app.route("/email-code", methods=["POST"])
    @json_route
    async def email_code(self, request: Any) -> dict[str, Any]:
        user = await self.ctx.sessions.user_row(request)
        read_object(request, optional=True)
        # the code always goes to the account's own address, whatever the body says
        await self.ctx.throttle.check(request, throttle.EMAIL_CODE, user["email"])
        if not smtp_configured(self.ctx.settings):
            raise bad_request("SMTP is not configured")
        try:
            await email_codes.issue(self.ctx, user["email"], email_codes.PASSWORD_CHANGE,
                                    captcha_verified=False)
        except MailError as exc:
            raise mail_failed(exc) from None
        return {"message": "Verification code sent"}

    @app.route("/change", methods=["POST"])
    @json_route
    async def change(self, request: Any) -> dict[str, Any]:
        user = await self.ctx.sessions.user_row(request)
        body = read_object(request)
        await self.ctx.throttle.check(request, CHANGE_LIMIT, f"user:{user['id']}")
        new_password = registration.clean_password(body.get("new_password"), "new_password")
        now = self.ctx.now()
        if smtp_configured(self.ctx.settings):
            if body.get("email_code") in (None, ""):
                raise bad_request("email verification code is required", field="email_code")
            code = email_codes.clean_code(body.get("email_code"))
            password_hash = await self.ctx.passwords.hash(new_password)
            changed = await self.ctx.db.transaction(
                _change_with_code, user, code, password_hash, now)
            if changed is None:
                raise bad_request("invalid or expired email verification code",
                                  field="email_code")
        else:
            changed = await self._change_with_current(user, body, new_password, now)
        await self.ctx.invalidation.announce(USERS, str(user["id"]).encode())
        return {"message": "Password updated", "token": self.ctx.issue_token(changed)}

    async def _change_with_current(self, user: dict[str, Any], body: dict[str, Any],
                                   new_password: str, now: datetime) -> dict[str, Any]:
        if not user["password_hash"]:
            raise bad_request("password login is not enabled for this account")
        current = body.get("current_password")
        if not isinstance(current, str) or not current:
            raise bad_request("current password is required", field="current_password")
        if len(current) > 1024 or not await self.ctx.passwords.verify(
                user["password_hash"], current):
            raise ApiError(400, "current password is incorrect", type="invalid_request",
                           field="current_password")
        password_hash = await self.ctx.passwords.hash(new_password)
        changed: dict[str, Any] = await self.ctx.db.transaction(
            _set_password, user["id"], password_hash, now, False)
        return changed
