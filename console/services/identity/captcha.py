"""Server-side captcha verification for login, registration and email codes (contract §2.1).

hCaptcha, Cloudflare Turnstile and Google reCAPTCHA share one verification protocol: a form POST
of ``secret``, ``response`` (the widget token) and optionally ``remoteip`` to the provider's
site-verify URL, answered with JSON ``{"success": true|false, ...}``.  So one verifier serves all
three; the ``hcaptcha_verify_url`` setting chooses the provider.  Anything but a clear
``success: true`` refuses: a wrong token is a 400, and an unreachable, slow or garbled provider is
a 503 -- never a silent pass.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

import orjson
from twisted.internet.defer import Deferred
from twisted.logger import Logger
from twisted.web.client import readBody
from twisted.web.http_headers import Headers
from twisted.web.iweb import IResponse

from console.http import ApiError, bad_request
from gateway.channels.bytes_body import BytesBody
from gateway.channels.safe_connect import guarded_agent
from gateway.settings.store import Settings

log = Logger()
DEFAULT_TIMEOUT = 10.0
#: widget tokens are a few kilobytes at most; a longer one is refused unsent
MAX_TOKEN_LENGTH = 8192
#: a verification answer is tiny; refuse to buffer more than this
MAX_ANSWER_BYTES = 64 * 1024


def captcha_enabled(settings: Settings) -> bool:
    return settings.flag("password_hcaptcha_enabled")


class Captcha:
    def __init__(self, reactor: Any, clock: Any, *, timeout: float = DEFAULT_TIMEOUT,
                 agent: Any = None, settings: Settings | None = None) -> None:
        self._clock = clock
        self._timeout = timeout
        # through the outbound-safety connector, under the live SSRF policy
        self._agent = agent or guarded_agent(reactor, settings, connect_timeout=timeout,
                                             clock=clock)

    async def require(self, settings: Settings, token: Any, remote_ip: str) -> None:
        """Raise unless captcha is off or ``token`` verifies with the configured provider."""
        if not captcha_enabled(settings):
            return
        await self.verify(settings, token, remote_ip)

    async def verify(self, settings: Settings, token: Any, remote_ip: str) -> None:
        secret = settings.text("hcaptcha_secret").strip()
        url = settings.text("hcaptcha_verify_url").strip()
        if not secret or not url:
            raise bad_request("hCaptcha is not configured")
        if not isinstance(token, str) or not token.strip():
            raise bad_request("hCaptcha token is required", field="captcha_token")
        if len(token) > MAX_TOKEN_LENGTH:
            raise self._failed()
        form = {"secret": secret, "response": token.strip()}
        if remote_ip:
            form["remoteip"] = remote_ip
        try:
            status, data = await self._post(url, urlencode(form).encode())
        except Exception as exc:
            log.warn("captcha provider unreachable: {error}", error=type(exc).__name__)
            raise self._unavailable() from None
        if status >= 500 or status == 429:
            log.warn("captcha provider answered {status}", status=status)
            raise self._unavailable()
        try:
            answer = orjson.loads(data)
        except orjson.JSONDecodeError:
            answer = None
        if not isinstance(answer, dict) or not isinstance(answer.get("success"), bool):
            log.warn("captcha provider answered {status} without a verdict", status=status)
            raise self._unavailable()
        if answer["success"] is not True:
            raise self._failed()

    def _post(self, url: str, form: bytes) -> Deferred[tuple[int, bytes]]:
        d = Deferred.fromCoroutine(self._exchange(url, form))
        d.addTimeout(self._timeout, self._clock)
        return d

    async def _exchange(self, url: str, form: bytes) -> tuple[int, bytes]:
        headers = Headers({b"content-type": [b"application/x-www-form-urlencoded"],
                           b"accept": [b"application/json"]})
        response: IResponse = await self._agent.request(b"POST", url.encode(), headers,
                                                        BytesBody(form))
        length = response.length
        if isinstance(length, int) and length > MAX_ANSWER_BYTES:
            raise ValueError("captcha answer too large")
        data = await readBody(response)
        return response.code, data

    @staticmethod
    def _failed() -> ApiError:
        return ApiError(400, "hCaptcha verification failed", type="captcha_failed",
                        field="captcha_token")

    @staticmethod
    def _unavailable() -> ApiError:
        return ApiError(503, "captcha verification is unavailable; please try again later",
                        type="captcha_unavailable")
