"""A software WebAuthn authenticator: real ``none`` attestations and ES256 assertions.

It does what a browser plus a platform authenticator would: builds ``clientDataJSON`` for a
given origin, authenticator data for an RP id, and signs with its own EC P-256 key, so the
server's WebAuthn library verifies genuine responses.  Knobs let tests forge the things an
attacker controls (origin, counter, user handle).
"""

from __future__ import annotations

import base64
import hashlib
import secrets
import struct
from typing import Any

import cbor2
import orjson
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec

FLAG_UP = 0x01
FLAG_UV = 0x04
FLAG_AT = 0x40


def b64url(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def unb64url(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


class SoftAuthenticator:
    """One credential (one key pair) on one authenticator."""

    def __init__(self, origin: str, rp_id: str | None = None) -> None:
        self.origin = origin
        self.rp_id = rp_id
        self.key = ec.generate_private_key(ec.SECP256R1())
        self.credential_id = secrets.token_bytes(32)
        self.sign_count = 0
        self.user_handle: bytes | None = None

    def _cose_key(self) -> bytes:
        numbers = self.key.public_key().public_numbers()
        return cbor2.dumps({1: 2, 3: -7, -1: 1,
                            -2: numbers.x.to_bytes(32, "big"),
                            -3: numbers.y.to_bytes(32, "big")})

    def _client_data(self, kind: str, challenge: str, origin: str | None) -> bytes:
        return orjson.dumps({"type": kind, "challenge": challenge,
                             "origin": origin or self.origin, "crossOrigin": False})

    def create(self, options: dict[str, Any], *, origin: str | None = None,
               user_verified: bool = True) -> dict[str, Any]:
        """Answer ``navigator.credentials.create()`` for the server's ``publicKey`` options."""
        public_key = options["publicKey"]
        rp_id = self.rp_id or public_key["rp"]["id"]
        self.user_handle = unb64url(public_key["user"]["id"])
        flags = FLAG_UP | FLAG_AT | (FLAG_UV if user_verified else 0)
        attested = (bytes(16) + struct.pack(">H", len(self.credential_id))
                    + self.credential_id + self._cose_key())
        auth_data = (hashlib.sha256(rp_id.encode()).digest() + bytes([flags])
                     + struct.pack(">I", self.sign_count) + attested)
        attestation = cbor2.dumps({"fmt": "none", "attStmt": {}, "authData": auth_data})
        client_data = self._client_data("webauthn.create", public_key["challenge"], origin)
        cid = b64url(self.credential_id)
        return {"id": cid, "rawId": cid, "type": "public-key",
                "response": {"clientDataJSON": b64url(client_data),
                             "attestationObject": b64url(attestation)},
                "clientExtensionResults": {}}

    def get(self, options: dict[str, Any], *, origin: str | None = None,
            sign_count: int | None = None, user_verified: bool = True) -> dict[str, Any]:
        """Answer ``navigator.credentials.get()``; the counter advances unless forced."""
        public_key = options["publicKey"]
        rp_id = self.rp_id or public_key["rpId"]
        if sign_count is None:
            self.sign_count += 1
            sign_count = self.sign_count
        flags = FLAG_UP | (FLAG_UV if user_verified else 0)
        auth_data = (hashlib.sha256(rp_id.encode()).digest() + bytes([flags])
                     + struct.pack(">I", sign_count))
        client_data = self._client_data("webauthn.get", public_key["challenge"], origin)
        signature = self.key.sign(auth_data + hashlib.sha256(client_data).digest(),
                                  ec.ECDSA(hashes.SHA256()))
        cid = b64url(self.credential_id)
        response = {"clientDataJSON": b64url(client_data),
                    "authenticatorData": b64url(auth_data),
                    "signature": b64url(signature)}
        if self.user_handle is not None:
            response["userHandle"] = b64url(self.user_handle)
        return {"id": cid, "rawId": cid, "type": "public-key", "response": response,
                "clientExtensionResults": {}}
