"""Provider callbacks: asynchronous notifications that credit orders, and browser returns.

Paths (console contract §4.7, no auth -- the provider's signature is the authentication):

- ``GET|POST /api/payment/yipay/notify`` (alias ``/api/payment/epay/notify``): EPay notify,
  query string or form body; answers text ``success`` or 400 ``fail``.
- ``GET /api/payment/yipay/return`` (alias ``epay``): the buyer's browser coming back; never
  credits, 302 to ``/dashboard/wallet?payment=<success|pending>&order_no=<no>``.
- ``POST /api/payment/stripe/notify`` (alias ``/api/payment/stripe/webhook``): Stripe webhook
  with ``Stripe-Signature``; ``success`` or 400 ``fail``.
- ``GET /api/payment/stripe/return``: never credits, 302 to the wallet page.

Why one mount per provider: a mount is a leaf, and other providers (openpayment, wechatpay,
...) get their own mounts under ``/api/payment`` later.  Only a notification that verifies and
whose order, provider, channel, currency and amount match credits anything; the state machine
in ``gateway.store.orders`` makes replays no-ops.  Bodies are read once and never echoed back.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any
from urllib.parse import quote, urlencode

from twisted.internet.defer import Deferred, ensureDeferred
from twisted.logger import Logger
from twisted.web.iweb import IRequest

from console.context import ConsoleContext
from console.http import make_app
from console.services.wallet import epay, stripe
from console.services.wallet.payments import PaymentService, accepted, all_channels
from gateway.store import orders

log = Logger()

WALLET_PATH = "/dashboard/wallet"
#: Stripe sends small events; anything far bigger is not one
BODY_LIMIT = 1 << 20


def _text(request: IRequest, status: int, body: str) -> bytes:
    request.setResponseCode(status)
    request.setHeader(b"content-type", b"text/plain; charset=utf-8")
    request.setHeader(b"cache-control", b"no-store")
    return body.encode()


def _redirect(request: IRequest, payment: str, order_no: str) -> bytes:
    target = f"{WALLET_PATH}?payment={quote(payment)}&order_no={quote(order_no[:64])}"
    request.setResponseCode(302)
    request.setHeader(b"location", target.encode())
    request.setHeader(b"cache-control", b"no-store")
    return b""


def _guarded(request: IRequest, work: Callable[[], Awaitable[bytes]]) -> Deferred[bytes]:
    async def run() -> bytes:
        try:
            return await work()
        except Exception:
            log.failure("payment callback failed")
            return _text(request, 500, "fail")

    return ensureDeferred(run())


def _params(request: IRequest) -> dict[str, str]:
    """Query string and form body parameters, first value of each."""
    params: dict[str, str] = {}
    for name, values in (request.args or {}).items():
        if values:
            params.setdefault(name.decode("utf-8", "replace"),
                              values[0].decode("utf-8", "replace"))
    return params


class EpayNotifyRoutes:
    """Mounted at ``/api/payment/yipay`` and ``/api/payment/epay``."""

    app = make_app()

    def __init__(self, ctx: ConsoleContext, service: PaymentService | None = None) -> None:
        self.ctx = ctx
        self.service = service or PaymentService(ctx)

    def _verify(self, params: dict[str, str]) -> tuple[epay.Notification, frozenset[str]] | None:
        """The notification and the ids of the channels whose keys verify it, or None."""
        note: epay.Notification | None = None
        ids: set[str] = set()
        for channel in all_channels(self.ctx.settings):
            if channel.provider != epay.PROVIDER:
                continue
            try:
                note = epay.verify(params, channel.epay_config())
            except epay.EpayError:
                continue
            ids.add(channel.id)
        return None if note is None else (note, frozenset(ids))

    @app.route("/notify", methods=["GET", "POST"])
    def notify(self, request: IRequest) -> Deferred[bytes]:
        async def work() -> bytes:
            params = _params(request)
            verified = self._verify(params)
            if verified is None:
                log.warn("EPay notify refused: signature or merchant does not verify")
                return _text(request, 400, "fail")
            note, channel_ids = verified
            if not note.paid:
                return _text(request, 200, "success")  # genuine, but nothing was paid
            outcome = await self.service.apply(orders.Payment(
                order_no=note.order_no, provider=epay.PROVIDER, channel_ids=channel_ids,
                amount_nanos=note.amount_nanos, currency=epay.CURRENCY,
                provider_ref=note.trade_no, payload=urlencode(sorted(params.items()))))
            return _text(request, 200, "success") if accepted(outcome) \
                else _text(request, 400, "fail")

        return _guarded(request, work)

    @app.route("/return", methods=["GET"])
    def back(self, request: IRequest) -> bytes:
        params = _params(request)
        verified = self._verify(params)
        shown = "success" if verified is not None and verified[0].paid else "pending"
        return _redirect(request, shown, params.get("out_trade_no", ""))


class StripeNotifyRoutes:
    """Mounted at ``/api/payment/stripe``."""

    app = make_app()

    def __init__(self, ctx: ConsoleContext, service: PaymentService | None = None) -> None:
        self.ctx = ctx
        self.service = service or PaymentService(ctx)

    def _signed_by(self, payload: bytes, header: str) -> frozenset[str]:
        """The ids of the Stripe channels whose webhook secret signed ``payload``."""
        now = self.ctx.clock.seconds()
        ids: set[str] = set()
        for channel in all_channels(self.ctx.settings):
            if channel.provider != stripe.PROVIDER:
                continue
            try:
                stripe.verify_signature(payload, header, channel.value("stripe_webhook_secret"),
                                        now)
            except stripe.StripeError:
                continue
            ids.add(channel.id)
        return frozenset(ids)

    def _webhook(self, request: IRequest) -> Deferred[bytes]:
        async def work() -> bytes:
            content: Any = request.content
            content.seek(0)
            payload = content.read(BODY_LIMIT + 1)
            header = (request.getHeader(b"stripe-signature") or b"").decode("ascii", "replace")
            channel_ids = self._signed_by(payload, header) if len(payload) <= BODY_LIMIT \
                else frozenset()
            if not channel_ids:
                log.warn("Stripe webhook refused: signature does not verify")
                return _text(request, 400, "fail")
            try:
                session = stripe.parse_event(payload)
            except stripe.StripeError as exc:
                log.warn("Stripe webhook refused: {reason}", reason=exc.reason)
                return _text(request, 400, "fail")
            if session is None or not session.paid:
                return _text(request, 200, "success")  # an event we do not act on
            outcome = await self.service.apply(orders.Payment(
                order_no=session.order_no, provider=stripe.PROVIDER, channel_ids=channel_ids,
                amount_nanos=session.amount_nanos, currency=session.currency,
                provider_ref=session.session_id, payload=payload.decode("utf-8", "replace")))
            return _text(request, 200, "success") if accepted(outcome) \
                else _text(request, 400, "fail")

        return _guarded(request, work)

    @app.route("/notify", methods=["POST"])
    def notify(self, request: IRequest) -> Deferred[bytes]:
        return self._webhook(request)

    @app.route("/webhook", methods=["POST"])
    def webhook(self, request: IRequest) -> Deferred[bytes]:
        return self._webhook(request)

    @app.route("/return", methods=["GET"])
    def back(self, request: IRequest) -> bytes:
        params = _params(request)
        shown = params.get("payment", "pending")
        if shown not in ("success", "cancel", "failed", "pending"):
            shown = "pending"
        return _redirect(request, shown, params.get("order_no", ""))
