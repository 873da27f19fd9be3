"""A fake Stripe API (Checkout Sessions + webhooks) on a real loopback port.

It answers ``POST /v1/checkout/sessions`` the way Stripe documents it (form-encoded body,
``Authorization: Bearer <secret key>``, ``Idempotency-Key`` replays the first answer, errors as
``{"error": {...}}``) and can deliver a ``checkout.session.completed`` event to a webhook URL
signed with its own HMAC code (``Stripe-Signature: t=...,v1=...``)::

    api = FakeStripeApi.start(secret_key="sk_test_x", webhook_secret="whsec_x")
    self.addCleanup(api.stop)
    # settings: payment_stripe_base_url = api.base_url, secret key, webhook secret
    status, text = await api.complete(session_id, webhook_url, timestamp=now)

``fail_next`` makes the next session creation answer that HTTP status.
"""

from __future__ import annotations

import hashlib
import hmac
import itertools
from typing import Any
from urllib.parse import parse_qsl

import orjson
import treq
from twisted.internet import reactor as default_reactor
from twisted.web.client import HTTPConnectionPool
from twisted.web.resource import Resource
from twisted.web.server import Site

_ids = itertools.count(1)


def stripe_signature(payload: bytes, secret: str, timestamp: int) -> str:
    digest = hmac.new(secret.encode(), str(timestamp).encode() + b"." + payload,
                      hashlib.sha256).hexdigest()
    return f"t={timestamp},v1={digest}"


class _Sessions(Resource):
    isLeaf = True

    def __init__(self, api: FakeStripeApi) -> None:
        super().__init__()
        self.api = api

    def _error(self, request: Any, status: int, message: str) -> bytes:
        request.setResponseCode(status)
        request.setHeader(b"content-type", b"application/json")
        return orjson.dumps({"error": {"type": "invalid_request_error", "message": message}})

    def render_POST(self, request: Any) -> bytes:
        auth = request.getHeader(b"authorization") or b""
        self.api.requests.append({"authorization": auth.decode(),
                                  "idempotency_key": (request.getHeader(b"idempotency-key")
                                                      or b"").decode()})
        if auth != b"Bearer " + self.api.secret_key.encode():
            return self._error(request, 401, "Invalid API Key provided")
        if self.api.fail_next:
            status, self.api.fail_next = self.api.fail_next, 0
            return self._error(request, status, "simulated failure")
        form = dict(parse_qsl(request.content.read().decode(), keep_blank_values=True))
        self.api.forms.append(form)
        key = request.getHeader(b"idempotency-key")
        if key and key in self.api.by_idempotency:
            session = self.api.by_idempotency[key]
        else:
            session_id = f"cs_test_{next(_ids):06d}"
            session = {
                "id": session_id, "object": "checkout.session", "mode": form.get("mode"),
                "url": f"{self.api.base_url}/c/pay/{session_id}",
                "client_reference_id": form.get("client_reference_id"),
                "metadata": {"order_no": form.get("metadata[order_no]")},
                "currency": form.get("line_items[0][price_data][currency]"),
                "amount_total": int(form.get("line_items[0][price_data][unit_amount]", "0"))
                * int(form.get("line_items[0][quantity]", "1")),
                "payment_status": "unpaid", "status": "open",
                "success_url": form.get("success_url"), "cancel_url": form.get("cancel_url"),
                "expires_at": int(form["expires_at"]) if "expires_at" in form else None,
            }
            self.api.sessions[session_id] = session
            if key:
                self.api.by_idempotency[key] = session
        request.setHeader(b"content-type", b"application/json")
        return orjson.dumps(session)


class FakeStripeApi:
    def __init__(self, secret_key: str, webhook_secret: str) -> None:
        self.secret_key = secret_key
        self.webhook_secret = webhook_secret
        self.sessions: dict[str, dict[str, Any]] = {}
        self.by_idempotency: dict[bytes, dict[str, Any]] = {}
        self.forms: list[dict[str, str]] = []
        self.requests: list[dict[str, str]] = []
        self.fail_next = 0
        self.port: Any = None
        self.pool = HTTPConnectionPool(default_reactor, persistent=False)

    @classmethod
    def start(cls, secret_key: str = "sk_test_fake",
              webhook_secret: str = "whsec_fake") -> FakeStripeApi:
        api = cls(secret_key, webhook_secret)
        v1 = Resource()
        checkout = Resource()
        v1.putChild(b"checkout", checkout)
        checkout.putChild(b"sessions", _Sessions(api))
        root = Resource()
        root.putChild(b"v1", v1)
        api.port = default_reactor.listenTCP(0, Site(root), interface="127.0.0.1")
        return api

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port.getHost().port}"

    async def stop(self) -> None:
        await self.pool.closeCachedConnections()
        await self.port.stopListening()

    def completed_event(self, session_id: str, *, amount_total: int | None = None,
                        currency: str | None = None, payment_status: str = "paid",
                        event_type: str = "checkout.session.completed") -> bytes:
        session = dict(self.sessions[session_id], payment_status=payment_status,
                       status="complete")
        if amount_total is not None:
            session["amount_total"] = amount_total
        if currency is not None:
            session["currency"] = currency
        return orjson.dumps({"id": f"evt_{next(_ids):06d}", "object": "event",
                             "type": event_type, "data": {"object": session}})

    async def deliver(self, url: str, payload: bytes, signature: str) -> tuple[int, str]:
        response = await treq.post(url, data=payload, pool=self.pool, headers={
            b"content-type": [b"application/json"],
            b"stripe-signature": [signature.encode()]})
        return int(response.code), (await treq.content(response)).decode()

    async def complete(self, session_id: str, url: str, *, timestamp: int,
                       secret: str | None = None, **event: Any) -> tuple[int, str]:
        """Mark a session paid and POST the signed webhook event to ``url``."""
        payload = self.completed_event(session_id, **event)
        signature = stripe_signature(payload, secret or self.webhook_secret, timestamp)
        return await self.deliver(url, payload, signature)
