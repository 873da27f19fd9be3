"""Serving the web console from the API's own Site (web console contract W1-W6).

``ConsolePage`` answers every GET outside the API prefixes with ``index.html`` (client-side
routing on plain paths), ``Cache-Control: no-cache`` and the strict CSP; other methods keep the
JSON 404 those paths had before the console.  ``AssetDirectory`` serves ``/assets/<hashed
name>`` as immutable, and a missing asset is a plain 404, never ``index.html`` (a stale
``index.html`` must not receive HTML where it expects a script).  Both send the gzip form to
clients that accept it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from twisted.web.resource import Resource

from console.static import JsonNotFound
from console.web.build import BuiltFile, ConsoleBuild
from gateway.settings.store import Settings

CAPTCHA_HOSTS = "https://hcaptcha.com https://*.hcaptcha.com"
BASE_CSP = {
    "default-src": "'self'",
    "script-src": "'self'",
    "style-src": "'self'",
    "img-src": "'self' data: https:",
    "font-src": "'self'",
    "connect-src": "'self'",
    "object-src": "'none'",
    "base-uri": "'self'",
    "form-action": "'self'",
    "frame-ancestors": "'none'",
}
IMMUTABLE = b"public, max-age=31536000, immutable"


def content_security_policy(captcha: bool) -> str:
    """W6's policy; the hCaptcha host joins ``script-src``/``frame-src`` only while enabled."""
    policy = dict(BASE_CSP)
    if captcha:
        policy["script-src"] += " " + CAPTCHA_HOSTS
        policy["frame-src"] = CAPTCHA_HOSTS
    return "; ".join(f"{name} {value}" for name, value in policy.items())


def accepts_gzip(request: Any) -> bool:
    header = request.getHeader(b"accept-encoding")
    if not header:
        return False
    for part in header.decode("latin-1").lower().split(","):
        coding, _, params = part.strip().partition(";")
        if coding.strip() not in ("gzip", "x-gzip", "*"):
            continue
        name, _, value = params.replace(" ", "").partition("=")
        if name != "q":
            return True
        try:
            return float(value) > 0
        except ValueError:
            return False
    return False


def write_file(request: Any, built: BuiltFile, cache_control: bytes) -> bytes:
    request.setHeader(b"content-type", built.content_type.encode())
    request.setHeader(b"cache-control", cache_control)
    request.setHeader(b"x-content-type-options", b"nosniff")
    request.setHeader(b"referrer-policy", b"same-origin")
    body = built.body
    if built.gzipped is not None:
        request.setHeader(b"vary", b"Accept-Encoding")
        if accepts_gzip(request):
            request.setHeader(b"content-encoding", b"gzip")
            body = built.gzipped
    request.setHeader(b"content-length", str(len(body)).encode())
    if request.method == b"HEAD":
        return b""
    return body


class PlainNotFound(Resource):
    isLeaf = True

    def render(self, request: Any) -> bytes:
        request.setResponseCode(404)
        request.setHeader(b"content-type", b"text/plain; charset=utf-8")
        request.setHeader(b"x-content-type-options", b"nosniff")
        request.setHeader(b"cache-control", b"no-cache")
        return b"Not found\n"


class ConsolePage(Resource):
    """``index.html`` for any console path (W2, W5, W6)."""

    isLeaf = True

    def __init__(self, build: ConsoleBuild, settings: Callable[[], Settings]) -> None:
        super().__init__()
        self._build = build
        self._settings = settings

    def render(self, request: Any) -> bytes:
        if request.method not in (b"GET", b"HEAD"):
            return JsonNotFound().render(request)
        captcha = self._settings().flag("password_hcaptcha_enabled")
        request.setHeader(b"content-security-policy", content_security_policy(captcha).encode())
        request.setHeader(b"x-frame-options", b"DENY")
        return write_file(request, self._build.index, b"no-cache")


class AssetFile(Resource):
    isLeaf = True

    def __init__(self, built: BuiltFile) -> None:
        super().__init__()
        self._built = built

    def render(self, request: Any) -> bytes:
        if request.method not in (b"GET", b"HEAD"):
            return PlainNotFound().render(request)
        if request.postpath and request.postpath != [b""]:
            return PlainNotFound().render(request)
        return write_file(request, self._built, IMMUTABLE)


class AssetDirectory(Resource):
    """``/assets/<name>``: exactly the built files, nothing else."""

    def __init__(self, build: ConsoleBuild) -> None:
        super().__init__()
        self._build = build

    def getChild(self, path: bytes, request: Any) -> Resource:
        built = self._build.assets.get(path.decode("latin-1"))
        return AssetFile(built) if built is not None else PlainNotFound()

    def render(self, request: Any) -> bytes:
        return PlainNotFound().render(request)
