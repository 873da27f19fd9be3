"""``POST /auth/password/email-code``: mail a registration code (console contract §2.4).

The route lives in ``PasswordAuthRoutes`` (``auth/password`` is one mount); this module holds
its logic.  It answers the same whether or not the address already has an account (contract
weakness 23): an unknown address gets a code, a known one gets an "you already have an account"
notice, and both answer ``Verification code sent``.  Limited per IP and per address.
"""

from __future__ import annotations

from typing import Any

from twisted.logger import Logger
from twisted.web.iweb import IRequest

from console.context import ConsoleContext
from console.http import ApiError, bad_request
from console.services.identity import email_codes, registration, throttle
from console.services.identity.captcha import captcha_enabled
from console.services.identity.mailer import MailError, smtp_configured
from gateway.store import users as user_store
from gateway.store.user_lookup import email_registered

log = Logger()
SENT = {"message": "Verification code sent"}


def mail_failed(exc: MailError) -> ApiError:
    log.warn("verification mail failed: {error}", error=str(exc))
    return ApiError(400, "could not send the verification email; please try again later",
                    type="mail_failed")


async def send_registration_code(ctx: ConsoleContext, request: IRequest,
                                 body: dict[str, Any]) -> dict[str, str]:
    settings = ctx.settings
    raw_email = body.get("email")
    await ctx.throttle.check(request, throttle.EMAIL_CODE,
                             raw_email if isinstance(raw_email, str) else None)
    if not await ctx.db.transaction(user_store.admin_exists):
        raise ApiError(409, "Initial setup is required", type="setup_required")
    if not settings.flag("password_registration_enabled"):
        raise bad_request("password registration is disabled")
    await ctx.captcha.require(settings, body.get("captcha_token"), ctx.addresses.of(request))
    email = registration.clean_email(raw_email)
    registration.check_email_domain(settings, email)
    if not smtp_configured(settings):
        raise bad_request("SMTP is not configured")
    try:
        if await ctx.db.transaction(email_registered, email):
            subject, text = email_codes.already_registered_mail(settings)
            await ctx.mailer.send(settings, email, subject, text)
        else:
            await email_codes.issue(ctx, email, email_codes.REGISTRATION,
                                    captcha_verified=captcha_enabled(settings))
    except MailError as exc:
        raise mail_failed(exc) from None
    return SENT
