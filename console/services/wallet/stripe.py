"""Stripe Checkout: create a Checkout Session over the REST API, verify webhooks.

Why by hand and not the vendor SDK: the SDK blocks on its own HTTP client; we need the injected
reactor (and its timeout) and only two things -- ``POST /v1/checkout/sessions`` (form-encoded,
``Authorization: Bearer <secret key>``, ``Idempotency-Key`` = order number so a retried create
never opens two sessions) and the ``Stripe-Signature`` check.

Webhook rule (Stripe's public docs): the header is ``t=<unix time>,v1=<hex>[,v1=...]``; the
signature is HMAC-SHA256 of ``"<t>.<raw body>"`` with the endpoint's signing secret; any ``v1``
may match (secrets roll); the timestamp must be within the tolerance (300 s) of our clock so a
captured request cannot be replayed later.  Amounts are integers in the currency's minor unit.
"""

from __future__ import annotations

import hashlib
import hmac
from dataclasses import dataclass
from decimal import Decimal
from typing import Any
from urllib.parse import urlencode

import orjson
from twisted.internet.defer import Deferred
from twisted.web.client import readBody
from twisted.web.http_headers import Headers
from twisted.web.iweb import IBodyProducer, IResponse

from gateway.billing.money import NANOS_PER_UNIT
from gateway.channels.bytes_body import BytesBody
from gateway.channels.safe_connect import guarded_agent

PROVIDER = "stripe"
TOLERANCE_SECONDS = 300
PAID_EVENTS = frozenset({"checkout.session.completed",
                         "checkout.session.async_payment_succeeded"})
#: currencies without a minor unit (Stripe docs, "zero-decimal currencies")
ZERO_DECIMAL = frozenset({"BIF", "CLP", "DJF", "GNF", "JPY", "KMF", "KRW", "MGA", "PYG", "RWF",
                          "UGX", "VND", "VUV", "XAF", "XOF", "XPF"})
#: Stripe accepts a session lifetime between 30 minutes and 24 hours
MIN_SESSION_SECONDS = 30 * 60
MAX_SESSION_SECONDS = 24 * 3600


class StripeError(Exception):
    """Session creation failed, or a webhook is not genuine; ``reason`` is for the log."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def minor_units(amount: Decimal, currency: str) -> int:
    """An amount in the smallest unit Stripe counts (cents; whole units for zero-decimal)."""
    scale = 1 if currency.upper() in ZERO_DECIMAL else 100
    return int((amount * scale).to_integral_value())


def nanos_from_minor(value: int, currency: str) -> int:
    scale = 1 if currency.upper() in ZERO_DECIMAL else 100
    return value * NANOS_PER_UNIT // scale


def _status_and_body(response: IResponse) -> Deferred[tuple[int, bytes]]:
    return readBody(response).addCallback(lambda data: (response.code, data))


@dataclass(frozen=True)
class SessionRequest:
    order_no: str
    amount: Decimal
    currency: str
    product_name: str
    success_url: str
    cancel_url: str
    expires_at: int


def session_form(req: SessionRequest) -> dict[str, str]:
    return {
        "mode": "payment",
        "client_reference_id": req.order_no,
        "metadata[order_no]": req.order_no,
        "line_items[0][quantity]": "1",
        "line_items[0][price_data][currency]": req.currency.lower(),
        "line_items[0][price_data][unit_amount]": str(minor_units(req.amount, req.currency)),
        "line_items[0][price_data][product_data][name]": req.product_name,
        "success_url": req.success_url,
        "cancel_url": req.cancel_url,
        "expires_at": str(req.expires_at),
    }


class StripeClient:
    """Talks to ``base_url`` (the ``payment_stripe_base_url`` setting) with one reactor."""

    def __init__(self, reactor: Any, *, timeout: float = 20.0, settings: Any = None) -> None:
        self.reactor = reactor
        self.timeout = timeout
        # through the outbound-safety connector, under the live SSRF policy
        self.agent = guarded_agent(reactor, settings, connect_timeout=timeout)

    async def create_session(self, base_url: str, secret_key: str,
                             req: SessionRequest) -> tuple[str, str]:
        """Open a Checkout Session; returns (session id, hosted payment URL)."""
        if not secret_key:
            raise StripeError("secret key not configured")
        url = base_url.rstrip("/") + "/v1/checkout/sessions"
        body: IBodyProducer = BytesBody(urlencode(session_form(req)).encode())  # type: ignore[assignment]
        headers = Headers({
            b"authorization": [b"Bearer " + secret_key.encode()],
            b"content-type": [b"application/x-www-form-urlencoded"],
            b"idempotency-key": [req.order_no.encode()],
        })
        d: Deferred[tuple[int, bytes]] = self.agent.request(
            b"POST", url.encode(), headers, body).addCallback(_status_and_body)
        d.addTimeout(self.timeout, self.reactor)
        try:
            status, data = await d
        except Exception as exc:
            raise StripeError(f"request failed: {exc.__class__.__name__}") from None
        if status != 200:
            raise StripeError(f"status {status}")
        try:
            session = orjson.loads(data)
            session_id, pay_url = session["id"], session["url"]
        except (orjson.JSONDecodeError, KeyError, TypeError):
            raise StripeError("malformed session") from None
        if not isinstance(session_id, str) or not isinstance(pay_url, str) or not pay_url:
            raise StripeError("malformed session")
        return session_id, pay_url


def signature_header(payload: bytes, secret: str, timestamp: int) -> str:
    """The header Stripe would send (used by tests' fake; the same rule we verify)."""
    mac = hmac.new(secret.encode(), f"{timestamp}.".encode() + payload, hashlib.sha256)
    return f"t={timestamp},v1={mac.hexdigest()}"


def verify_signature(payload: bytes, header: str, secret: str, now: float,
                     tolerance: int = TOLERANCE_SECONDS) -> None:
    """Raise StripeError unless ``header`` signs ``payload`` with ``secret`` recently enough."""
    if not secret:
        raise StripeError("webhook secret not configured")
    timestamp: int | None = None
    candidates: list[str] = []
    for part in header.split(","):
        name, _, value = part.strip().partition("=")
        if name == "t" and value.isdigit():
            timestamp = int(value)
        elif name == "v1" and value:
            candidates.append(value)
    if timestamp is None or not candidates:
        raise StripeError("malformed Stripe-Signature")
    expected = signature_header(payload, secret, timestamp).rsplit("v1=", 1)[1].encode()
    if not any(hmac.compare_digest(expected, c.encode()) for c in candidates):
        raise StripeError("bad signature")
    if abs(now - timestamp) > tolerance:
        raise StripeError("timestamp outside the tolerance window")


@dataclass(frozen=True)
class PaidSession:
    order_no: str
    session_id: str
    currency: str
    amount_nanos: int
    paid: bool


def parse_event(payload: bytes) -> PaidSession | None:
    """The paid Checkout Session an event reports, or None for events we do not act on."""
    try:
        event = orjson.loads(payload)
        kind = event["type"]
        session = event["data"]["object"]
    except (orjson.JSONDecodeError, KeyError, TypeError):
        raise StripeError("malformed event") from None
    if kind not in PAID_EVENTS or not isinstance(session, dict):
        return None
    raw_metadata = session.get("metadata")
    metadata: dict[str, Any] = raw_metadata if isinstance(raw_metadata, dict) else {}
    order_no = session.get("client_reference_id") or metadata.get("order_no")
    if metadata.get("order_no") and order_no != metadata["order_no"]:
        raise StripeError("client_reference_id and metadata disagree")
    currency = session.get("currency")
    amount = session.get("amount_total")
    if not isinstance(order_no, str) or not isinstance(currency, str) \
            or isinstance(amount, bool) or not isinstance(amount, int):
        raise StripeError("session lacks order, currency or amount")
    return PaidSession(order_no=order_no, session_id=str(session.get("id") or ""),
                       currency=currency.upper(),
                       amount_nanos=nanos_from_minor(amount, currency),
                       paid=session.get("payment_status") == "paid")
