"""Top-up payments: which channels are usable, creating orders, applying notifications.

Why here and not in the routes: the order rules (amount checks, exchange rate, which provider
amount and currency a notification must report) are shared by the user routes and the
provider callbacks, and none of it is HTTP.

Channels (console contract §4.7): the ``payment_channels`` setting lists them; when it has none,
one ``legacy`` channel is built from the flat ``payment_*`` keys.  Each channel config key falls
back to its flat setting.  Implemented providers: ``yipay`` (EPay protocol, alias ``epay``) and
``stripe`` (Checkout); channels of other providers are not offered.

An order may buy a subscription plan (``subscription_plan_id``): its amount is the plan's price
(a given ``amount`` must equal it) and, once paid, the plan is granted instead of a wallet
credit (``gateway.store.plan_purchase``).

An order is stored only once its pay URL exists (contract §7 weakness 21): when the provider
cannot open a payment, the order is stored as ``failed`` with the reason and the caller gets a
502, so no orphan ``pending`` order is ever left behind.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from decimal import ROUND_HALF_UP, Decimal, InvalidOperation
from typing import Any

from twisted.logger import Logger

from console.http import ApiError, bad_request
from console.services.identity.sessions import SessionUser
from console.services.wallet import epay, stripe
from console.user_view import timestamp
from console.validation import MISSING, Body
from gateway.billing.money import (
    AmountError,
    format_decimal,
    format_nanos,
    parse_decimal,
    to_nanos,
)
from gateway.invalidation import USERS
from gateway.settings.catalog_derived import derived
from gateway.settings.catalog_payment import STRIPE_API_URL
from gateway.settings.store import Settings
from gateway.store import orders, plan_purchase

log = Logger()

PROVIDER_ALIASES = {"epay": "yipay", "stripe_checkout": "stripe"}
SUPPORTED = frozenset({epay.PROVIDER, stripe.PROVIDER})
OFFICIAL = frozenset({"stripe", "paypal", "alipay", "wechatpay"})
#: channel config key -> flat setting it falls back to
FLAT_KEYS = {
    "gateway_url": "payment_yipay_gateway_url",
    "pid": "payment_yipay_pid",
    "key": "payment_yipay_key",
    "notify_url": "payment_yipay_notify_url",
    "return_url": "payment_yipay_return_url",
    "stripe_secret_key": "payment_stripe_secret_key",
    "stripe_webhook_secret": "payment_stripe_webhook_secret",
    "stripe_base_url": "payment_stripe_base_url",
}
NOTIFY_PATHS = {"yipay": "/api/payment/yipay/notify", "stripe": "/api/payment/stripe/notify"}
RETURN_PATHS = {"yipay": "/api/payment/yipay/return", "stripe": "/api/payment/stripe/return"}
CENT = Decimal("0.01")
PREMIUM_REQUIRED = "Payment requires premium edition"
NOT_ENABLED = "Payment channel is not enabled"


def normalise_provider(name: str) -> str:
    name = name.strip().lower()
    return PROVIDER_ALIASES.get(name, name)


@dataclass(frozen=True)
class Channel:
    id: str
    name: str
    provider: str
    methods: tuple[str, ...]
    currency: str
    enabled: bool
    config: dict[str, Any] = field(default_factory=dict)
    settings: Settings | None = None

    def value(self, key: str) -> str:
        value = self.config.get(key)
        if isinstance(value, str) and value.strip():
            return value.strip()
        flat = FLAT_KEYS.get(key)
        return self.settings.text(flat).strip() if flat and self.settings else ""

    @property
    def usable(self) -> bool:
        return self.enabled and self.provider in SUPPORTED and bool(self.methods)

    def epay_config(self) -> epay.EpayConfig:
        return epay.EpayConfig(self.value("gateway_url"), self.value("pid"), self.value("key"))


def _methods(value: Any) -> tuple[str, ...]:
    if not isinstance(value, list):
        return ()
    seen: dict[str, str] = {}
    for item in value:
        if isinstance(item, str) and item.strip():
            seen.setdefault(item.strip().lower(), item.strip())
    return tuple(seen.values())


def _currency(provider: str, configured: Any, settings: Settings) -> str:
    if provider not in OFFICIAL:
        return "CNY"
    if isinstance(configured, str) and configured.strip():
        return configured.strip().upper()
    return settings.text("payment_official_currency").strip().upper() or "CNY"


def payments_enabled(settings: Settings, node_name: str = "") -> bool:
    return bool(derived(settings.text, settings.flag, node_name=node_name)["payment_enabled"])


def personal_mode(settings: Settings) -> bool:
    return settings.text("system_mode") == "personal"


def all_channels(settings: Settings) -> list[Channel]:
    """Every configured channel (usable or not), from ``payment_channels`` or the flat keys."""
    on = payments_enabled(settings)
    raw = settings.json("payment_channels", [])
    listed: list[Channel] = []
    if isinstance(raw, list):
        for item in raw:
            if not isinstance(item, dict) or item.get("id") in (None, "") \
                    or isinstance(item.get("id"), bool):
                continue
            provider = normalise_provider(str(item.get("provider") or ""))
            if not provider:
                continue
            methods = (provider,) if provider in OFFICIAL else _methods(item.get("methods"))
            raw_config = item.get("config")
            config: dict[str, Any] = raw_config if isinstance(raw_config, dict) else {}
            listed.append(Channel(
                id=str(item["id"]), name=str(item.get("name") or item["id"]), provider=provider,
                methods=methods, currency=_currency(provider, item.get("currency"), settings),
                enabled=on and item.get("enabled", True) is not False, config=config,
                settings=settings))
    if listed:
        return listed
    provider = normalise_provider(settings.text("payment_gateway_provider") or "yipay")
    methods = (provider,) if provider in OFFICIAL else _methods(settings.json("payment_methods"))
    return [Channel(id="legacy", name="Default payment channel", provider=provider,
                    methods=methods, currency=_currency(provider, None, settings), enabled=on,
                    settings=settings)]


def usable_channels(settings: Settings) -> list[Channel]:
    return [c for c in all_channels(settings) if c.usable]


def _presets(settings: Settings, minimum: Decimal) -> list[str]:
    raw = settings.json("payment_recharge_presets", [])
    result: list[str] = []
    for item in raw if isinstance(raw, list) else []:
        try:
            value = parse_decimal(item)
        except AmountError:
            continue
        if value > 0 and value >= minimum and format_decimal(value) not in result:
            result.append(format_decimal(value))
    return result


def config_view(settings: Settings) -> dict[str, Any]:
    """``GET /api/user/payment/config``."""
    channels = usable_channels(settings)
    minimum = settings.decimal("payment_min_recharge_amount", Decimal(1))
    methods: dict[str, str] = {}
    for channel in channels:
        for method in channel.methods:
            methods.setdefault(method.lower(), method)
    enabled = bool(channels)
    return {
        "enabled": enabled,
        "currency_display_name": settings.text("payment_currency_display_name"),
        "usd_to_rmb_rate": format_decimal(settings.decimal("payment_usd_to_rmb_rate")),
        "min_recharge_amount": format_decimal(minimum),
        "recharge_presets": _presets(settings, minimum) if enabled else [],
        "methods": list(methods.values()) if enabled else [],
        "channels": [{"id": c.id, "name": c.name, "provider": c.provider,
                      "methods": list(c.methods)} for c in channels],
    }


def order_view(row: dict[str, Any], *, with_url: bool) -> dict[str, Any]:
    view: dict[str, Any] = {
        "order_no": row["order_no"],
        "amount": format_nanos(row["amount_nanos"]),
        "rmb_amount": str(Decimal(format_nanos(row["local_amount_nanos"])).quantize(CENT)),
        "method": row["method"],
        "provider": row["provider"],
        "channel_id": row["channel_id"],
        "currency": row["currency"],
        "status": row["status"],
        "created_at": timestamp(row["created_at"]),
        "expires_at": timestamp(row["expires_at"]),
        "paid_at": timestamp(row["paid_at"]),
        "subscription_plan_id": row.get("subscription_plan_id"),
    }
    if with_url:
        view["payment_url"] = row["payment_url"]
    return view


def new_order_no(now: datetime) -> str:
    return "PAY" + now.strftime("%Y%m%d%H%M%S") + secrets.token_hex(4).upper()


def gateway_amount(channel: Channel, amount: Decimal, rmb: Decimal) -> Decimal:
    """What the provider is asked to charge, in ``channel.currency``."""
    if channel.currency == "CNY":
        return rmb
    if channel.currency in stripe.ZERO_DECIMAL:
        return amount.quantize(Decimal(1), rounding=ROUND_HALF_UP)
    return amount.quantize(CENT, rounding=ROUND_HALF_UP)


class PaymentService:
    """Order creation and notification handling over one ``ConsoleContext``."""

    def __init__(self, ctx: Any, stripe_client: stripe.StripeClient | None = None) -> None:
        self.ctx = ctx
        self.stripe = stripe_client or stripe.StripeClient(ctx.reactor, settings=ctx.settings)

    def _choose(self, body: Body, method: str) -> Channel:
        channels = usable_channels(self.ctx.settings)
        channel_id = body.string("channel_id")
        if channel_id:
            for channel in channels:
                if channel.id == channel_id:
                    return channel
            raise bad_request(NOT_ENABLED, field="channel_id")
        if len(channels) == 1:
            return channels[0]
        offering = [c for c in channels if method.lower() in (m.lower() for m in c.methods)]
        if len(offering) == 1:
            return offering[0]
        if not channels:
            raise bad_request(NOT_ENABLED, field="channel_id")
        raise bad_request("channel_id is required", field="channel_id")

    def _amounts(self, body: Body) -> Decimal:
        settings = self.ctx.settings
        try:
            amount = parse_decimal(body.data.get("amount"))
        except AmountError:
            raise bad_request("Invalid recharge amount", field="amount") from None
        if amount <= 0:
            raise bad_request("Invalid recharge amount", field="amount")
        if amount < settings.decimal("payment_min_recharge_amount", Decimal(1)):
            raise bad_request("Recharge amount is below the minimum", field="amount")
        return amount

    async def _plan_price(self, user: SessionUser, body: Body, plan_id: int) -> Decimal:
        """A plan order costs the plan's price; a given ``amount`` must equal it."""
        try:
            plan = await self.ctx.db.transaction(
                plan_purchase.plan_for_order, user["id"], plan_id, self.ctx.now())
        except plan_purchase.PurchaseRefused as refused:
            field = "subscription_plan_id" if refused.field else None
            raise ApiError(refused.status, refused.message, field=field) from None
        price = Decimal(format_nanos(plan["price_nanos"]))
        if body.data.get("amount") not in (None, ""):
            try:
                given = parse_decimal(body.data.get("amount"))
            except AmountError:
                raise bad_request("Invalid recharge amount", field="amount") from None
            if given != price:
                raise bad_request("Amount does not match the plan price", field="amount")
        return price

    def _rate(self) -> Decimal:
        try:
            rate = Decimal(self.ctx.settings.text("payment_usd_to_rmb_rate"))
        except (InvalidOperation, ValueError):
            rate = Decimal(0)
        if not rate.is_finite() or rate <= 0:
            raise bad_request("Invalid payment exchange rate")
        return rate

    async def create_order(self, user: SessionUser, data: dict[str, Any],
                           site_base: str) -> dict[str, Any]:
        if personal_mode(self.ctx.settings):
            raise ApiError(403, PREMIUM_REQUIRED)
        body = Body(data)
        method = body.string("method", required=True, max_length=32)
        channel = self._choose(body, method)
        if channel.provider == epay.PROVIDER and not channel.epay_config().complete:
            raise bad_request("Payment provider is not configured: gateway URL, pid and key "
                              "are required")
        if channel.provider == stripe.PROVIDER and not channel.value("stripe_secret_key"):
            raise bad_request("Payment provider is not configured: secret key is required")
        plan_id = body.integer("subscription_plan_id")
        plan_id = None if plan_id is MISSING else int(plan_id)
        amount = self._amounts(body) if plan_id is None else await self._plan_price(
            user, body, plan_id)
        matched = [m for m in channel.methods if m.lower() == method.lower()]
        if not matched:
            raise bad_request("Payment method is not enabled", field="method")
        rmb = (amount * self._rate()).quantize(CENT, rounding=ROUND_HALF_UP)
        charge = gateway_amount(channel, amount, rmb)
        if charge <= 0:
            raise bad_request("Invalid recharge amount", field="amount")
        now = self.ctx.now()
        ttl = max(1, self.ctx.settings.integer("payment_order_ttl_minutes", 120))
        row: dict[str, Any] = {
            "order_no": new_order_no(now), "user_id": user["id"],
            "amount_nanos": to_nanos(amount), "local_amount_nanos": to_nanos(rmb),
            "gateway_amount_nanos": to_nanos(charge), "currency": channel.currency,
            "method": matched[0], "provider": channel.provider, "channel_id": channel.id,
            "status": orders.PENDING, "expires_at": now + timedelta(minutes=ttl),
            "subscription_plan_id": plan_id,
            "created_at": now, "updated_at": now,
        }
        base = (self.ctx.settings.text("base_url").strip() or site_base).rstrip("/")
        try:
            row["payment_url"], row["provider_ref"] = await self._pay_url(
                channel, row, charge, base, ttl)
        except stripe.StripeError as exc:
            log.warn("payment order {order_no}: provider refused: {reason}",
                     order_no=row["order_no"], reason=exc.reason)
            row.update(status=orders.FAILED, failure_reason=exc.reason[:500])
            await self.ctx.db.transaction(orders.insert, row)
            raise ApiError(502, "Failed to build payment URL") from None
        stored = await self.ctx.db.transaction(orders.insert, row)
        return order_view(stored, with_url=True)

    async def _pay_url(self, channel: Channel, row: dict[str, Any], charge: Decimal,
                       base: str, ttl: int) -> tuple[str, str | None]:
        order_no = row["order_no"]
        site = self.ctx.settings.text("site_name")
        if channel.provider == epay.PROVIDER:
            url = epay.pay_url(
                channel.epay_config(), order_no=order_no, method=row["method"], money=charge,
                name=f"{site or 'Balance'} top-up {order_no}",
                notify_url=channel.value("notify_url") or base + NOTIFY_PATHS["yipay"],
                return_url=channel.value("return_url") or base + RETURN_PATHS["yipay"],
                site_name=site)
            return url, None
        seconds = min(max(ttl * 60, stripe.MIN_SESSION_SECONDS), stripe.MAX_SESSION_SECONDS)
        back = f"{base}{RETURN_PATHS['stripe']}?order_no={order_no}&payment="
        session_id, url = await self.stripe.create_session(
            channel.value("stripe_base_url") or STRIPE_API_URL,
            channel.value("stripe_secret_key"),
            stripe.SessionRequest(
                order_no=order_no, amount=charge, currency=channel.currency,
                product_name=f"{site or 'Balance'} top-up", success_url=back + "success",
                cancel_url=back + "cancel",
                expires_at=int(self.ctx.clock.seconds()) + seconds))
        return url, session_id

    async def apply(self, payment: orders.Payment) -> orders.Outcome:
        """Apply a verified notification; refresh wallet caches after a credit."""
        outcome: orders.Outcome = await self.ctx.db.transaction(
            orders.apply_payment, payment, self.ctx.now())
        if outcome.result == orders.CREDITED and outcome.user_id is not None:
            wallets = getattr(self.ctx, "wallets", None)
            if wallets is not None:
                wallets.forget_user(outcome.user_id)
            await self.ctx.invalidation.announce(USERS, str(outcome.user_id).encode())
        elif outcome.result not in (orders.ALREADY_PAID,):
            log.warn("payment notification for {order_no} refused: {result} {reason}",
                     order_no=payment.order_no, result=outcome.result, reason=outcome.reason)
        return outcome


def accepted(outcome: orders.Outcome) -> bool:
    return outcome.result in (orders.CREDITED, orders.ALREADY_PAID)
