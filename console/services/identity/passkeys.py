"""WebAuthn ceremonies for passkey registration and sign-in (contract §2.5, §2.6, §4.10).

The ``webauthn`` library does the cryptography; this module decides what it is checked
against.  The relying party comes only from settings (``passkey_rp_id`` / ``passkey_origins``,
defaulting to the host and origin of ``base_url``) -- never from request headers, which a
phishing proxy controls.  Each challenge is stored with its purpose, relying party and the
account it is bound to, lives five minutes and is consumed atomically before the response is
verified, so it can never be used twice (weakness 9).  Counters only move forward (a cloned
authenticator is refused), and an unknown identifier gets the same answer as a known one
(weakness 23).
"""

from __future__ import annotations

import base64
import binascii
import re
import secrets
from dataclasses import dataclass
from datetime import timedelta
from typing import Any
from urllib.parse import urlsplit

import orjson
from webauthn import (
    generate_authentication_options,
    generate_registration_options,
    options_to_json,
    verify_authentication_response,
    verify_registration_response,
)
from webauthn.helpers.exceptions import WebAuthnException
from webauthn.helpers.structs import (
    AttestationConveyancePreference,
    AuthenticatorSelectionCriteria,
    PublicKeyCredentialDescriptor,
    ResidentKeyRequirement,
    UserVerificationRequirement,
)

from console.context import ConsoleContext
from console.http import ApiError, bad_request
from console.user_view import timestamp
from gateway.settings.store import Settings
from gateway.store import auth_challenges
from gateway.store import passkeys as passkey_store
from gateway.store import users as user_store

CHALLENGE_TTL = timedelta(minutes=5)
REGISTER = "passkey_register"
LOGIN = "passkey_login"
TIMEOUT_MS = 60000
MAX_NAME = 100


@dataclass(frozen=True)
class RelyingParty:
    rp_id: str
    origins: list[str]
    name: str


def _origin_of(url: str) -> str | None:
    parts = urlsplit(url.strip())
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return None
    return f"{parts.scheme}://{parts.netloc.lower()}"


def relying_party(settings: Settings) -> RelyingParty:
    """The relying party from settings; 400 when neither the passkey settings nor
    ``base_url`` say what it is."""
    base_url = settings.text("base_url").strip()
    base_origin = _origin_of(base_url) if base_url else None
    rp_id = settings.text("passkey_rp_id").strip().lower()
    if not rp_id and base_origin:
        rp_id = urlsplit(base_origin).hostname or ""
    configured = [part for part in re.split(r"[,\s]+", settings.text("passkey_origins")) if part]
    origins = [origin for origin in (_origin_of(part) for part in configured) if origin]
    if not origins and base_origin:
        origins = [base_origin]
    if not rp_id or not origins:
        raise bad_request("Passkey relying party is not configured")
    name = settings.text("site_name").strip() or rp_id
    return RelyingParty(rp_id=rp_id, origins=origins, name=name)


def _b64url(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def _unb64url(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def _user_verification(settings: Settings) -> UserVerificationRequirement:
    word = settings.text("passkey_user_verification").strip().lower()
    try:
        return UserVerificationRequirement(word)
    except ValueError:
        return UserVerificationRequirement.PREFERRED


def _credential_of(body: dict[str, Any]) -> dict[str, Any]:
    """The credential object: ``body["credential"]`` or the body itself (contract §4.10)."""
    credential = body.get("credential", body)
    if not isinstance(credential, dict):
        raise bad_request("credential must be an object", field="credential")
    kind = credential.get("type")
    if kind not in (None, "", "public-key"):
        raise bad_request("credential type must be public-key", field="type")
    credential = dict(credential)
    credential["type"] = "public-key"
    if not credential.get("rawId") and isinstance(credential.get("id"), str):
        credential["rawId"] = credential["id"]
    if not credential.get("id") and isinstance(credential.get("rawId"), str):
        credential["id"] = credential["rawId"]
    return credential


def _challenge_of(credential: dict[str, Any], error: ApiError) -> str:
    """The challenge the client signed, read from ``clientDataJSON`` (checked again by the
    library against the stored value)."""
    response = credential.get("response")
    if not isinstance(response, dict) or not isinstance(response.get("clientDataJSON"), str):
        raise error
    try:
        client_data = orjson.loads(_unb64url(response["clientDataJSON"]))
    except (binascii.Error, ValueError):
        raise error from None
    challenge = client_data.get("challenge") if isinstance(client_data, dict) else None
    if not isinstance(challenge, str) or not 16 <= len(challenge) <= 128:
        raise error
    return challenge


def _options_json(options: Any) -> dict[str, Any]:
    return {"publicKey": orjson.loads(options_to_json(options))}


def passkey_view(row: dict[str, Any]) -> dict[str, Any]:
    view: dict[str, Any] = {"id": row["id"], "name": row["name"], "sign_count": row["sign_count"],
                            "created_at": timestamp(row["created_at"])}
    if row["last_used_at"] is not None:
        view["last_used_at"] = timestamp(row["last_used_at"])
    return view


def _login_target(conn: Any, identifier: str | None) -> tuple[int | None, list[str]]:
    if identifier is None:
        return None, []
    user = user_store.find_by_identifier(conn, identifier)
    if user is None or not user["enabled"]:
        return auth_challenges.NO_ACCOUNT, []
    return user["id"], [row["credential_id"]
                        for row in passkey_store.list_for_user(conn, user["id"])]


def _finish_login(conn: Any, challenge: str, credential_id: str,
                  now: Any) -> tuple[dict | None, dict | None]:
    """Consume the challenge and load the credential in one transaction."""
    row = auth_challenges.consume(conn, challenge, (LOGIN,), now)
    if row is None:
        return None, None
    return row, passkey_store.by_credential_id(conn, credential_id)


def _record_use(conn: Any, passkey_id: int, user_id: int, count: int,
                now: Any) -> tuple[dict | None, dict | None]:
    if not passkey_store.advance_counter(conn, passkey_id, count, now):
        return None, None
    user = user_store.get_user(conn, user_id)
    return user, (user_store.user_relations(conn, user) if user else None)


class Passkeys:
    """Options and verification for both ceremonies, bound to one console context."""

    def __init__(self, ctx: ConsoleContext) -> None:
        self.ctx = ctx

    def check_enabled(self) -> None:
        if not self.ctx.settings.flag("passkey_enabled"):
            raise bad_request("passkey authentication is disabled")

    async def _store_challenge(self, challenge: bytes, purpose: str, user_id: int | None,
                               rp: RelyingParty) -> None:
        now = self.ctx.now()
        await self.ctx.db.transaction(
            lambda conn: auth_challenges.create(
                conn, key=_b64url(challenge), purpose=purpose, user_id=user_id,
                data={"rp_id": rp.rp_id, "origins": rp.origins},
                expires_at=now + CHALLENGE_TTL, now=now))

    # --- registration (signed-in user) -------------------------------------------------------

    async def registration_options(self, user: dict[str, Any]) -> dict[str, Any]:
        self.check_enabled()
        rp = relying_party(self.ctx.settings)
        existing = await self.ctx.db.transaction(passkey_store.list_for_user, user["id"])
        challenge = secrets.token_bytes(32)
        options = generate_registration_options(
            rp_id=rp.rp_id, rp_name=rp.name, user_id=str(user["id"]).encode(),
            user_name=user["email"] or user["username"],
            user_display_name=user["username"] or user["email"],
            challenge=challenge, timeout=TIMEOUT_MS,
            attestation=AttestationConveyancePreference.NONE,
            authenticator_selection=AuthenticatorSelectionCriteria(
                resident_key=ResidentKeyRequirement.PREFERRED,
                user_verification=_user_verification(self.ctx.settings)),
            exclude_credentials=[PublicKeyCredentialDescriptor(id=_unb64url(row["credential_id"]))
                                 for row in existing],
        )
        await self._store_challenge(challenge, REGISTER, user["id"], rp)
        return _options_json(options)

    async def register(self, user: dict[str, Any], body: dict[str, Any]) -> dict[str, Any]:
        self.check_enabled()
        name = body.get("name", "")
        if not isinstance(name, str):
            raise bad_request("name must be a string", field="name")
        name = name.strip()[:MAX_NAME] or "Passkey"
        credential = _credential_of(body)
        invalid = bad_request("invalid passkey registration response", field="credential")
        challenge = _challenge_of(credential, invalid)
        now = self.ctx.now()

        stored = await self.ctx.db.transaction(
            lambda conn: auth_challenges.consume(conn, challenge, (REGISTER,), now,
                                                 user_id=user["id"]))
        if stored is None:
            raise bad_request("passkey challenge is invalid or expired", field="credential")
        try:
            verified = verify_registration_response(
                credential=credential, expected_challenge=_unb64url(challenge),
                expected_rp_id=stored["data"]["rp_id"],
                expected_origin=stored["data"]["origins"],
                require_user_verification=self._uv_required())
        except (WebAuthnException, KeyError, TypeError, ValueError) as exc:
            raise bad_request(f"invalid passkey registration response: {exc}",
                              field="credential") from None
        try:
            row = await self.ctx.db.transaction(
                lambda conn: passkey_store.insert(
                    conn, user_id=user["id"], credential_id=_b64url(verified.credential_id),
                    public_key=_b64url(verified.credential_public_key), name=name,
                    sign_count=verified.sign_count, now=now))
        except passkey_store.DuplicateCredential:
            raise ApiError(409, "this passkey is already registered",
                           type="conflict") from None
        return passkey_view(row)

    def _uv_required(self) -> bool:
        return _user_verification(self.ctx.settings) is UserVerificationRequirement.REQUIRED

    # --- sign-in -------------------------------------------------------------------------------

    async def login_options(self, identifier: str | None) -> dict[str, Any]:
        """Options for a sign-in; an unknown identifier or one without passkeys gets the same
        shape (no ``allowCredentials``) and a challenge no credential can satisfy."""
        self.check_enabled()
        rp = relying_party(self.ctx.settings)
        user_id, credential_ids = await self.ctx.db.transaction(_login_target, identifier)
        challenge = secrets.token_bytes(32)
        options = generate_authentication_options(
            rp_id=rp.rp_id, challenge=challenge, timeout=TIMEOUT_MS,
            allow_credentials=[PublicKeyCredentialDescriptor(id=_unb64url(cid))
                               for cid in credential_ids],
            user_verification=_user_verification(self.ctx.settings))
        await self._store_challenge(challenge, LOGIN, user_id, rp)
        return _options_json(options)

    async def login(self, body: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
        """Verify an assertion; the signed-in user and relations, or 401."""
        self.check_enabled()

        def failed(reason: str) -> ApiError:
            return ApiError(401, f"passkey authentication failed: {reason}",
                            type="invalid_credentials")

        credential = _credential_of(body)
        challenge = _challenge_of(credential, failed("malformed assertion"))
        raw_id = credential.get("rawId")
        if not isinstance(raw_id, str) or not raw_id:
            raise failed("malformed assertion")
        try:
            credential_id = _b64url(_unb64url(raw_id))
        except (binascii.Error, ValueError):
            raise failed("malformed assertion") from None
        now = self.ctx.now()
        stored, passkey = await self.ctx.db.transaction(_finish_login, challenge, credential_id,
                                                        now)
        if stored is None:
            raise failed("challenge is invalid or expired")
        if passkey is None:
            raise failed("passkey not found")
        if stored["user_id"] is not None and stored["user_id"] != passkey["user_id"]:
            raise failed("passkey does not belong to this account")
        handle = (credential.get("response") or {}).get("userHandle")
        if handle and handle != _b64url(str(passkey["user_id"]).encode()):
            raise failed("passkey does not belong to this account")
        try:
            verified = verify_authentication_response(
                credential=credential, expected_challenge=_unb64url(challenge),
                expected_rp_id=stored["data"]["rp_id"],
                expected_origin=stored["data"]["origins"],
                credential_public_key=_unb64url(passkey["public_key"]),
                credential_current_sign_count=passkey["sign_count"],
                require_user_verification=self._uv_required())
        except (WebAuthnException, KeyError, TypeError, ValueError) as exc:
            raise failed(str(exc)) from None
        user, relations = await self.ctx.db.transaction(
            _record_use, passkey["id"], passkey["user_id"], verified.new_sign_count, now)
        if user is None or relations is None:
            raise failed("signature counter did not increase")
        if not user["enabled"]:
            raise ApiError(403, "User is disabled", type="user_disabled")
        return user, relations
