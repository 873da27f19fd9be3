"""A captcha provider's site-verify endpoint on loopback, for tests.

Speaks the protocol hCaptcha, Turnstile and reCAPTCHA share: a form POST of ``secret``,
``response`` and ``remoteip``, answered with JSON ``{"success": bool}``.  ``mode`` switches it
into the outages the verifier must refuse on: ``"error"`` (HTTP 500), ``"garbage"`` (not JSON)
and ``"hang"`` (never answers).  Every request is recorded.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import parse_qs

import orjson
from twisted.internet import defer
from twisted.web.resource import Resource
from twisted.web.server import NOT_DONE_YET, Site

SECRET = "0x-test-secret"
GOOD_TOKEN = "good-token"


class CaptchaProvider(Resource):
    isLeaf = True

    def __init__(self, secret: str = SECRET, good_tokens: tuple[str, ...] = (GOOD_TOKEN,)) -> None:
        super().__init__()
        self.secret = secret
        self.good_tokens = set(good_tokens)
        #: ok | error | garbage | hang
        self.mode = "ok"
        self.requests: list[dict[str, str]] = []
        self.hanging: list[Any] = []
        self._arrivals: list[defer.Deferred[None]] = []

    def arrival(self) -> defer.Deferred[None]:
        """Fires when the next verification request has arrived."""
        d: defer.Deferred[None] = defer.Deferred()
        self._arrivals.append(d)
        return d

    def render_POST(self, request: Any) -> Any:
        form = {key: values[0] for key, values in
                parse_qs(request.content.read().decode(), keep_blank_values=True).items()}
        self.requests.append(form)
        arrivals, self._arrivals = self._arrivals, []
        for waiter in arrivals:
            waiter.callback(None)
        if self.mode == "hang":
            self.hanging.append(request)
            return NOT_DONE_YET
        if self.mode == "error":
            request.setResponseCode(500)
            return b"internal error"
        request.setHeader(b"content-type", b"application/json")
        if self.mode == "garbage":
            return b"<html>maintenance</html>"
        success = form.get("secret") == self.secret and form.get("response") in self.good_tokens
        answer: dict[str, Any] = {"success": success}
        if not success:
            answer["error-codes"] = ["invalid-input-response"]
        return orjson.dumps(answer)


class CaptchaServer:
    def __init__(self, reactor: Any) -> None:
        self.reactor = reactor
        self.provider = CaptchaProvider()
        self.port: Any = None

    def start(self) -> str:
        self.port = self.reactor.listenTCP(0, Site(self.provider), interface="127.0.0.1")
        return self.url

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port.getHost().port}/siteverify"

    def stop(self) -> defer.Deferred[Any]:
        for request in self.provider.hanging:
            if request.channel is not None and request.channel.transport is not None:
                request.channel.transport.abortConnection()
        return defer.maybeDeferred(self.port.stopListening)

    def settings(self, **overrides: str) -> dict[str, str]:
        # the fake provider lives on loopback, which the SSRF policy refuses by default
        rows = {"password_hcaptcha_enabled": "true", "hcaptcha_secret": SECRET,
                "hcaptcha_site_key": "site-key", "hcaptcha_verify_url": self.url,
                "ssrf_allow_private_networks": "true"}
        rows.update(overrides)
        return rows
