"""OpenID Connect relying party: discovery, authorization code + PKCE, ID-token checks (§2.7).

The provider is admin-configured (the ``oidc`` entry of ``oauth_providers`` or the legacy
``oidc_*`` settings), so its URLs are fetched directly -- with a connect timeout, an overall
timeout and a body size cap.  ID tokens are verified with the provider's JWKS (fetched with
Twisted, not PyJWT's blocking client), only asymmetric algorithms, and ``iss`` / ``aud`` /
``exp`` / ``nonce`` checked against the server clock.  The ``state``, ``nonce`` and PKCE
verifier never leave the server except as the values the protocol sends.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, urlencode, urlsplit

import jwt
import orjson
from twisted.internet.defer import Deferred
from twisted.internet.protocol import Protocol
from twisted.python.failure import Failure
from twisted.web.client import ResponseDone
from twisted.web.http import PotentialDataLoss
from twisted.web.http_headers import Headers
from twisted.web.iweb import UNKNOWN_LENGTH

from console.http import ApiError
from gateway.channels.bytes_body import BytesBody
from gateway.channels.safe_connect import guarded_agent
from gateway.settings.store import Settings

CONNECT_TIMEOUT = 10
REQUEST_TIMEOUT = 15
MAX_BODY = 512 * 1024
DISCOVERY_TTL = 600
CLOCK_SKEW = 60
ALGORITHMS = frozenset({"RS256", "RS384", "RS512", "PS256", "PS384", "PS512",
                        "ES256", "ES384", "ES512", "EdDSA"})


class OidcError(Exception):
    """The sign-in cannot complete; the message is safe to show the user."""


@dataclass(frozen=True)
class Provider:
    issuer: str
    client_id: str
    client_secret: str
    redirect_uri: str
    scope: str


def random_token() -> str:
    return base64.urlsafe_b64encode(secrets.token_bytes(32)).rstrip(b"=").decode()


def pkce_challenge(verifier: str) -> str:
    digest = hashlib.sha256(verifier.encode("ascii")).digest()
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode()


def provider_from(settings: Settings) -> Provider:
    """The configured provider, or 503 naming what is missing (contract §2.7 step 5)."""
    if not settings.flag("oidc_enabled"):
        raise ApiError(503, "OAuth login is disabled", type="oidc_unavailable")
    entry: dict[str, Any] = {}
    for candidate in settings.json("oauth_providers", []) or []:
        if isinstance(candidate, dict) and candidate.get("key") == "oidc" \
                and candidate.get("enabled", True) is not False and candidate.get("issuer"):
            entry = candidate
    issuer = str(entry.get("issuer") or settings.text("oidc_issuer")).strip()
    client_id = str(entry.get("client_id") or settings.text("oidc_client_id")).strip()
    secret = str(entry.get("client_secret") or settings.text("oidc_client_secret"))
    redirect = str(entry.get("redirect_url") or settings.text("oidc_redirect_url")).strip()
    base_url = settings.text("base_url").strip().rstrip("/")
    if not redirect and base_url:
        redirect = base_url + "/auth/callback"
    scope = str(entry.get("scope") or "openid profile email").strip()
    if "openid" not in scope.split():
        scope = "openid " + scope
    missing = [name for name, value in (("issuer", issuer), ("client id", client_id),
                                         ("redirect URL", redirect)) if not value]
    if missing:
        raise ApiError(503, f"OIDC is not configured: missing {', '.join(missing)}",
                       type="oidc_unavailable")
    return Provider(issuer=issuer.rstrip("/"), client_id=client_id, client_secret=secret,
                    redirect_uri=redirect, scope=scope)


class _Capped(Protocol):
    """Collects a response body; gives up (closing the connection) past ``MAX_BODY``."""

    def __init__(self, done: Deferred[bytes]) -> None:
        self.done = done
        self.parts: list[bytes] = []
        self.size = 0

    def dataReceived(self, data: bytes) -> None:
        if self.done.called:
            return
        self.size += len(data)
        if self.size > MAX_BODY:
            self.done.errback(OidcError("identity provider response is too large"))
            assert self.transport is not None
            self.transport.stopProducing()  # type: ignore[attr-defined]
            return
        self.parts.append(data)

    def connectionLost(self, reason: Failure = ResponseDone()) -> None:  # type: ignore[assignment]
        if self.done.called:
            return
        if reason.check(ResponseDone, PotentialDataLoss):
            self.done.callback(b"".join(self.parts))
        else:
            self.done.errback(OidcError("identity provider connection failed"))


class OidcClient:
    """Talks to one process's configured providers; discovery documents are cached briefly."""

    def __init__(self, reactor: Any, seconds: Callable[[], float], settings: Any = None) -> None:
        self._reactor = reactor
        self._seconds = seconds
        # discovery, JWKS and token calls go through the outbound-safety connector
        self._agent = guarded_agent(reactor, settings, connect_timeout=CONNECT_TIMEOUT)
        self._discovery: dict[str, tuple[float, dict[str, Any]]] = {}
        self._jwks: dict[str, list[dict[str, Any]]] = {}

    async def _fetch(self, method: bytes, url: str, headers: dict[str, str] | None = None,
                     body: bytes | None = None) -> tuple[int, bytes]:
        if urlsplit(url).scheme not in ("http", "https"):
            raise OidcError("identity provider URL is not http(s)")
        raw_headers = Headers({b"accept": [b"application/json"],
                               b"user-agent": [b"Lockgate-OIDC"]})
        for name, value in (headers or {}).items():
            raw_headers.setRawHeaders(name.encode(), [value.encode()])
        try:
            request = self._agent.request(method, url.encode(), raw_headers,
                                          BytesBody(body) if body is not None else None)
            request.addTimeout(REQUEST_TIMEOUT, self._reactor)
            response = await request
            if response.length is not UNKNOWN_LENGTH and response.length > MAX_BODY:
                response.deliverBody(Protocol())
                raise OidcError("identity provider response is too large")
            done: Deferred[bytes] = Deferred()
            response.deliverBody(_Capped(done))
            done.addTimeout(REQUEST_TIMEOUT, self._reactor)
            content = await done
        except OidcError:
            raise
        except Exception:
            raise OidcError("identity provider is unreachable") from None
        return response.code, content

    async def _json(self, method: bytes, url: str, **kwargs: Any) -> dict[str, Any]:
        code, content = await self._fetch(method, url, **kwargs)
        if code != 200:
            raise OidcError(f"identity provider answered HTTP {code}")
        try:
            document = orjson.loads(content)
        except orjson.JSONDecodeError:
            raise OidcError("identity provider sent malformed JSON") from None
        if not isinstance(document, dict):
            raise OidcError("identity provider sent malformed JSON")
        return document

    async def discovery(self, provider: Provider) -> dict[str, Any]:
        cached = self._discovery.get(provider.issuer)
        if cached and cached[0] > self._seconds():
            return cached[1]
        document = await self._json(
            b"GET", provider.issuer + "/.well-known/openid-configuration")
        if str(document.get("issuer", "")).rstrip("/") != provider.issuer:
            raise OidcError("discovery document names another issuer")
        for field in ("authorization_endpoint", "token_endpoint", "jwks_uri"):
            if not isinstance(document.get(field), str) or not document[field]:
                raise OidcError(f"discovery document has no {field}")
        self._discovery[provider.issuer] = (self._seconds() + DISCOVERY_TTL, document)
        return document

    async def authorization_url(self, provider: Provider, state: str, nonce: str,
                                verifier: str) -> str:
        document = await self.discovery(provider)
        query = urlencode({
            "response_type": "code", "client_id": provider.client_id,
            "redirect_uri": provider.redirect_uri, "scope": provider.scope,
            "state": state, "nonce": nonce,
            "code_challenge": pkce_challenge(verifier), "code_challenge_method": "S256",
        })
        endpoint = document["authorization_endpoint"]
        return endpoint + ("&" if "?" in endpoint else "?") + query

    async def exchange(self, provider: Provider, code: str, verifier: str) -> str:
        """Trade the code for tokens; the raw ID token."""
        document = await self.discovery(provider)
        form = {"grant_type": "authorization_code", "code": code,
                "redirect_uri": provider.redirect_uri, "code_verifier": verifier,
                "client_id": provider.client_id}
        headers = {"content-type": "application/x-www-form-urlencoded"}
        methods = document.get("token_endpoint_auth_methods_supported") or \
            ["client_secret_basic"]
        if provider.client_secret:
            if "client_secret_basic" in methods:
                pair = f"{_form(provider.client_id)}:{_form(provider.client_secret)}"
                headers["authorization"] = "Basic " + base64.b64encode(pair.encode()).decode()
            else:
                form["client_secret"] = provider.client_secret
        tokens = await self._json(b"POST", document["token_endpoint"], headers=headers,
                                  body=urlencode(form).encode())
        id_token = tokens.get("id_token")
        if not isinstance(id_token, str) or not id_token:
            raise OidcError("identity provider returned no ID token")
        return id_token

    async def _keys(self, document: dict[str, Any], refresh: bool) -> list[dict[str, Any]]:
        uri = document["jwks_uri"]
        if refresh or uri not in self._jwks:
            keys = (await self._json(b"GET", uri)).get("keys")
            if not isinstance(keys, list):
                raise OidcError("identity provider JWKS is malformed")
            self._jwks[uri] = [key for key in keys if isinstance(key, dict)]
        return self._jwks[uri]

    async def verify_id_token(self, provider: Provider, id_token: str,
                              nonce: str) -> dict[str, Any]:
        """The verified claims; ``OidcError`` for any bad signature, issuer, audience,
        expiry or nonce."""
        document = await self.discovery(provider)
        try:
            header = jwt.get_unverified_header(id_token)
        except jwt.PyJWTError:
            raise OidcError("ID token is malformed") from None
        alg = header.get("alg")
        if alg not in ALGORITHMS:
            raise OidcError("ID token algorithm is not accepted")
        key = _pick_key(await self._keys(document, False), header.get("kid"), alg)
        if key is None:
            key = _pick_key(await self._keys(document, True), header.get("kid"), alg)
        if key is None:
            raise OidcError("no provider key matches the ID token")
        try:
            claims = jwt.decode(
                id_token, key=jwt.PyJWK(key, algorithm=alg).key, algorithms=[alg],
                audience=provider.client_id, issuer=document["issuer"],
                options={"verify_exp": False, "verify_iat": False, "verify_nbf": False,
                         "require": ["iss", "aud", "exp", "sub"]})
        except jwt.PyJWTError as exc:
            raise OidcError(f"ID token is invalid: {exc}") from None
        now = self._seconds()
        exp = claims.get("exp")
        if not isinstance(exp, int | float) or exp + CLOCK_SKEW < now:
            raise OidcError("ID token has expired")
        nbf = claims.get("nbf")
        if isinstance(nbf, int | float) and nbf - CLOCK_SKEW > now:
            raise OidcError("ID token is not valid yet")
        azp = claims.get("azp")
        if isinstance(claims.get("aud"), list) and len(claims["aud"]) > 1 \
                and azp != provider.client_id:
            raise OidcError("ID token was issued to another client")
        got = claims.get("nonce")
        if not isinstance(got, str) or not hmac.compare_digest(got.encode(), nonce.encode()):
            raise OidcError("ID token nonce does not match")
        if not isinstance(claims.get("sub"), str) or not claims["sub"]:
            raise OidcError("ID token has no subject")
        return claims


def _form(value: str) -> str:
    return quote(value, safe="")


def _pick_key(keys: list[dict[str, Any]], kid: Any, alg: str) -> dict[str, Any] | None:
    """The JWK named by ``kid``; without a ``kid``, the only key suitable for ``alg``
    (contract §0)."""
    family = "OKP" if alg == "EdDSA" else {"R": "RSA", "P": "RSA", "E": "EC"}[alg[0]]
    suitable = [key for key in keys
                if key.get("kty") == family and key.get("use", "sig") == "sig"
                and key.get("alg", alg) == alg]
    if kid is not None:
        named = [key for key in suitable if key.get("kid") == kid]
        return named[0] if len(named) == 1 else None
    return suitable[0] if len(suitable) == 1 else None
