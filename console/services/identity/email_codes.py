"""Issue and check the 6-digit codes mailed for registration and password change (contract §2.4).

Codes come from the CSPRNG and only ``sha256(lower(email)|purpose|code)`` is stored, with an
expiry (``email_code_ttl_seconds``, default 600) and an attempt counter.  ``issue`` stores the
code, mails it, and removes it again if the mail fails, so an undeliverable code never counts.
Checking happens inside the caller's transaction through ``gateway.store.email_codes.consume``
so the code is spent atomically with whatever it authorises.
"""

from __future__ import annotations

import hashlib
import secrets
from datetime import timedelta
from typing import Any

from console.context import ConsoleContext
from gateway.settings.store import Settings
from gateway.store import email_codes as code_store
from gateway.store.connection import Connection

REGISTRATION = "registration"
PASSWORD_CHANGE = "password_change"
DEFAULT_TTL_SECONDS = 600
#: codes are six decimal digits; anything else cannot match and is not even looked up
CODE_LENGTH = 6

_SUBJECTS = {
    REGISTRATION: "Your verification code",
    PASSWORD_CHANGE: "Your password change code",
}
_PURPOSE_TEXT = {
    REGISTRATION: "to finish creating your account",
    PASSWORD_CHANGE: "to change your password",
}


def new_code() -> str:
    return f"{secrets.randbelow(10 ** CODE_LENGTH):0{CODE_LENGTH}d}"


def code_hash(email: str, purpose: str, code: str) -> str:
    return hashlib.sha256(f"{email.lower()}|{purpose}|{code}".encode()).hexdigest()


def ttl_seconds(settings: Settings) -> int:
    seconds = settings.integer("email_code_ttl_seconds", DEFAULT_TTL_SECONDS)
    return seconds if seconds > 0 else DEFAULT_TTL_SECONDS


def clean_code(value: Any) -> str | None:
    """The submitted code if it has the right shape (spaces tolerated), else None."""
    if isinstance(value, int) and not isinstance(value, bool):
        value = f"{value:0{CODE_LENGTH}d}"
    if not isinstance(value, str):
        return None
    code = value.replace(" ", "").strip()
    return code if len(code) == CODE_LENGTH and code.isascii() and code.isdigit() else None


def site_name(settings: Settings) -> str:
    return settings.text("site_name").strip() or "Lockgate"


def code_mail(settings: Settings, purpose: str, code: str) -> tuple[str, str]:
    minutes = max(1, ttl_seconds(settings) // 60)
    site = site_name(settings)
    text = (
        f"Your {site} verification code is {code}.\n\n"
        f"Enter it {_PURPOSE_TEXT[purpose]}. It expires in {minutes} minutes and can be used "
        f"once.\nIf you did not ask for it, you can ignore this message.\n"
    )
    return f"{site}: {_SUBJECTS[purpose]}", text


def already_registered_mail(settings: Settings) -> tuple[str, str]:
    """Sent instead of a code when the address already has an account (no enumeration)."""
    site = site_name(settings)
    text = (
        f"Someone asked to create a {site} account with this email address, but an account "
        "already exists for it.\n\nIf that was you, sign in instead (or reset your password). "
        "If not, you can ignore this message.\n"
    )
    return f"{site}: you already have an account", text


async def issue(ctx: ConsoleContext, email: str, purpose: str, *,
                captcha_verified: bool) -> None:
    """Store a fresh code for ``email`` and mail it; raises ``MailError`` (nothing kept)."""
    settings = ctx.settings
    code = new_code()
    now = ctx.now()
    code_id = await ctx.db.transaction(
        _insert, email, purpose, code_hash(email, purpose, code), captcha_verified, now,
        now + timedelta(seconds=ttl_seconds(settings)))
    subject, text = code_mail(settings, purpose, code)
    try:
        await ctx.mailer.send(settings, email, subject, text)
    except Exception:
        await ctx.db.transaction(code_store.remove, code_id)
        raise


def _insert(conn: Connection, email: str, purpose: str, hashed: str, captcha_verified: bool,
            now: Any, expires_at: Any) -> int:
    return code_store.insert(conn, email=email, purpose=purpose, code_hash=hashed,
                             captcha_verified=captcha_verified, now=now, expires_at=expires_at)


def consume(conn: Connection, email: str, purpose: str, code: str | None, now: Any, *,
            require_captcha: bool = False) -> bool:
    """Spend a matching code inside the caller's transaction; a miss counts as an attempt."""
    hashed = code_hash(email, purpose, code) if code else "-"
    return code_store.consume(conn, email=email.lower(), purpose=purpose, code_hash=hashed,
                              now=now, require_captcha=require_captcha)
