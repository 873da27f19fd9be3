"""Where a gateway caller's credential comes from, and keeping it out of the access log.

Sources, in order (gateway contract §3, ours): ``Authorization: Bearer <token>`` (scheme
case-insensitive, exactly two words), ``x-api-key``, ``x-goog-api-key`` (what Google SDKs
send), then the query parameter ``key``.  Unlike the origin, a malformed ``Authorization``
header is ignored rather than refused, so a client that sends some unrelated Authorization
value together with a valid ``x-api-key`` or ``?key=`` still gets through.

The token is only located here; whether it is valid is the authenticator's job.
"""

from __future__ import annotations

from urllib.parse import unquote_to_bytes

from twisted.web.iweb import IRequest

BEARER = "bearer"
X_API_KEY = "x-api-key"
X_GOOG_API_KEY = "x-goog-api-key"
QUERY = "query"

#: query parameters whose values are credentials: never logged, never forwarded
SECRET_QUERY_NAMES = frozenset({b"key", b"api_key", b"access_token"})
REDACTED = b"REDACTED"


def _text(value: bytes | str | None) -> str:
    if value is None:
        return ""
    if isinstance(value, bytes):
        return value.decode("latin-1")
    return value


def bearer_token(authorization: str) -> str | None:
    """The token of ``Bearer <token>`` (any case, any whitespace), else None."""
    parts = authorization.split()
    if len(parts) == 2 and parts[0].lower() == "bearer":
        return parts[1]
    return None


def choose(
    authorization: str = "",
    x_api_key: str = "",
    x_goog_api_key: str = "",
    query_key: str = "",
) -> tuple[str, str] | None:
    """``(token, source)`` from already-read values, in contract order; None when absent."""
    token = bearer_token(authorization)
    if token:
        return token, BEARER
    for value, source in ((x_api_key, X_API_KEY), (x_goog_api_key, X_GOOG_API_KEY),
                          (query_key, QUERY)):
        value = value.strip()
        if value:
            return value, source
    return None


def query_key(uri: bytes) -> str:
    """The first non-empty ``key`` query parameter of a request URI, else ``""``.

    Read from the URI itself, not ``request.args``: twisted.web merges form-encoded and
    multipart *body* fields into ``args``, and a form field named ``key`` (say, on a
    transcription upload) must not become a credential.
    """
    if b"?" not in uri:
        return ""
    query = uri.partition(b"?")[2].partition(b"#")[0]
    for part in query.split(b"&"):
        name, _, value = part.partition(b"=")
        if _unquote_name(name) == b"key":
            token = unquote_to_bytes(value.replace(b"+", b" ")).decode("utf-8", "replace")
            if token.strip():
                return token
    return ""


def extract(request: IRequest) -> tuple[str, str] | None:
    """``(token, source)`` of a ``twisted.web`` request, or None (-> 401 auth_required).

    A bearer token wins (``choose``'s order), so the other sources are read only without one.
    """
    token = bearer_token(_text(request.getHeader(b"authorization")))
    if token:
        return token, BEARER
    return choose(
        "",
        _text(request.getHeader(b"x-api-key")),
        _text(request.getHeader(b"x-goog-api-key")),
        query_key(request.uri or b""),
    )


def is_api_key(token: str) -> bool:
    """API keys start with ``sk-``; any other token is treated as a login JWT."""
    return token.startswith("sk-")


def redact_uri(uri: bytes | str) -> str:
    """``uri`` for the access log, with credential query values replaced by ``REDACTED``.

    Only the values of ``key``/``api_key``/``access_token`` change (names compared
    case-insensitively, percent-encoded names included); everything else stays byte for byte.
    """
    raw = uri.encode("latin-1") if isinstance(uri, str) else uri
    path, sep, query = raw.partition(b"?")
    if not sep:
        return raw.decode("latin-1")
    fragment = b""
    if b"#" in query:
        query, _, fragment = query.partition(b"#")
        fragment = b"#" + fragment
    parts = []
    for part in query.split(b"&"):
        name = part.partition(b"=")[0]
        if _unquote_name(name) in SECRET_QUERY_NAMES:
            part = name + b"=" + REDACTED
        parts.append(part)
    return (path + b"?" + b"&".join(parts) + fragment).decode("latin-1")


def _unquote_name(name: bytes) -> bytes:
    return unquote_to_bytes(name.replace(b"+", b" ")).strip().lower()
