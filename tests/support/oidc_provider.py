"""A small OpenID Connect provider for the tests, run as its own process.

``python -m tests.support.oidc_provider --port 0 --client-id ID --client-secret SECRET``
prints ``PORT <n>`` once listening.  It serves discovery, ``/authorize`` (redirects straight
back with a code, no login page), ``/token`` (checks client credentials, the redirect URI and
the PKCE verifier; codes are single use) returning an RS256 ID token, and ``/jwks``.
``POST /control`` with a JSON object sets the identity (``sub``, ``email``,
``email_verified``, ``name``) and the attack knobs: ``nonce`` (override), ``aud``, ``iss``,
``now`` (token issue time), ``exp_offset``, ``no_kid``, ``foreign_key`` (sign with a key that
is not in the JWKS).  ``GET /log`` lists the requests it received.
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import hashlib
import json
import secrets
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

import jwt
from cryptography.hazmat.primitives.asymmetric import rsa


class Provider:
    def __init__(self, client_id: str, client_secret: str) -> None:
        self.client_id = client_id
        self.client_secret = client_secret
        self.key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        self.foreign = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        self.kid = secrets.token_hex(8)
        self.issuer = ""
        self.knobs: dict[str, Any] = {"sub": "user-1", "email": "ida@example.org",
                                      "email_verified": True, "name": "Ida Example"}
        self.codes: dict[str, dict[str, Any]] = {}
        self.log: list[str] = []
        self.lock = threading.Lock()

    def jwks(self) -> dict[str, Any]:
        jwk = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(self.key.public_key()))
        jwk.update({"kid": self.kid, "use": "sig", "alg": "RS256"})
        return {"keys": [jwk]}

    def id_token(self, grant: dict[str, Any]) -> str:
        knobs = grant["knobs"]
        now = int(knobs.get("now") or time.time())
        claims: dict[str, Any] = {
            "iss": knobs.get("iss") or self.issuer, "aud": knobs.get("aud") or self.client_id,
            "sub": knobs["sub"], "iat": now, "exp": now + int(knobs.get("exp_offset", 300)),
            "nonce": knobs.get("nonce") or grant["nonce"],
        }
        for name in ("email", "email_verified", "name", "picture"):
            if knobs.get(name) is not None:
                claims[name] = knobs[name]
        headers = {} if knobs.get("no_kid") else {"kid": self.kid}
        key = self.foreign if knobs.get("foreign_key") else self.key
        return jwt.encode(claims, key, algorithm="RS256", headers=headers)


def make_handler(provider: Provider) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:
            pass

        def _send(self, status: int, body: Any = None, headers: dict[str, str] | None = None,
                  ) -> None:
            raw = json.dumps(body).encode() if body is not None else b""
            self.send_response(status)
            for name, value in (headers or {}).items():
                self.send_header(name, value)
            if body is not None:
                self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(raw)))
            self.end_headers()
            self.wfile.write(raw)

        def _body(self) -> bytes:
            return self.rfile.read(int(self.headers.get("Content-Length") or 0))

        def do_GET(self) -> None:
            parts = urlsplit(self.path)
            query = {k: v[0] for k, v in parse_qs(parts.query).items()}
            with provider.lock:
                provider.log.append(self.path)
            if parts.path == "/.well-known/openid-configuration":
                base = provider.issuer
                self._send(200, {
                    "issuer": base, "authorization_endpoint": base + "/authorize",
                    "token_endpoint": base + "/token", "jwks_uri": base + "/jwks",
                    "response_types_supported": ["code"],
                    "subject_types_supported": ["public"],
                    "id_token_signing_alg_values_supported": ["RS256"],
                    "code_challenge_methods_supported": ["S256"],
                    "token_endpoint_auth_methods_supported": ["client_secret_basic",
                                                              "client_secret_post"],
                })
            elif parts.path == "/jwks":
                self._send(200, provider.jwks())
            elif parts.path == "/log":
                with provider.lock:
                    self._send(200, provider.log)
            elif parts.path == "/authorize":
                if query.get("client_id") != provider.client_id or \
                        query.get("code_challenge_method") != "S256" or \
                        query.get("response_type") != "code":
                    self._send(400, {"error": "invalid_request"})
                    return
                code = secrets.token_urlsafe(16)
                with provider.lock:
                    provider.codes[code] = {
                        "redirect_uri": query["redirect_uri"], "nonce": query.get("nonce"),
                        "challenge": query["code_challenge"], "knobs": dict(provider.knobs)}
                extra = provider.knobs.get("extra_query") or {}
                target = query["redirect_uri"] + "?" + urlencode(
                    {"code": code, "state": query.get("state", ""), **extra})
                self._send(302, headers={"Location": target})
            else:
                self._send(404, {"error": "not_found"})

        def do_POST(self) -> None:
            parts = urlsplit(self.path)
            with provider.lock:
                provider.log.append(self.path)
            if parts.path == "/control":
                with provider.lock:
                    provider.knobs.update(json.loads(self._body()))
                self._send(200, provider.knobs)
                return
            if parts.path != "/token":
                self._send(404, {"error": "not_found"})
                return
            form = {k: v[0] for k, v in parse_qs(self._body().decode()).items()}
            client_id, secret = form.get("client_id"), form.get("client_secret")
            auth = self.headers.get("Authorization", "")
            if auth.startswith("Basic "):
                client_id, _, secret = base64.b64decode(auth[6:]).decode().partition(":")
            if client_id != provider.client_id or secret != provider.client_secret:
                self._send(401, {"error": "invalid_client"})
                return
            with provider.lock:
                grant = provider.codes.pop(form.get("code", ""), None)
            verifier = form.get("code_verifier", "").encode()
            challenge = base64.urlsafe_b64encode(
                hashlib.sha256(verifier).digest()).rstrip(b"=").decode()
            if grant is None or grant["redirect_uri"] != form.get("redirect_uri") \
                    or grant["challenge"] != challenge:
                self._send(400, {"error": "invalid_grant"})
                return
            self._send(200, {"access_token": secrets.token_urlsafe(16), "token_type": "Bearer",
                             "expires_in": 300, "id_token": provider.id_token(grant)})

    return Handler


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--client-id", default="lockgate")
    parser.add_argument("--client-secret", default="s3cret")
    options = parser.parse_args(argv)
    provider = Provider(options.client_id, options.client_secret)
    server = ThreadingHTTPServer(("127.0.0.1", options.port), make_handler(provider))
    port = server.server_address[1]
    provider.issuer = f"http://127.0.0.1:{port}"
    print(f"PORT {port}", flush=True)
    with contextlib.suppress(KeyboardInterrupt):
        server.serve_forever()
    sys.exit(0)


if __name__ == "__main__":
    main()
