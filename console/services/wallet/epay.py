"""The EPay ("yipay") protocol: a signed redirect URL out, a signed notification back.

Why it is its own module: the signature rule is the whole security of this provider, so it is
kept pure and small.  The merchant signs with MD5 over the parameters (minus ``sign`` and
``sign_type`` and empty values) sorted by key and joined ``k=v&k=v``, with the merchant key
appended -- the same rule for the URL we build and for the notification we check.  A
notification is trusted only when the signature matches (constant-time compare), ``pid`` is our
merchant id and ``trade_status`` says the trade succeeded; the amount is checked against the
order by the state machine.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal
from urllib.parse import urlencode

from gateway.billing.money import AmountError, parse_decimal, to_nanos

SUCCESS_STATUSES = frozenset({"TRADE_SUCCESS", "TRADE_FINISHED"})
PROVIDER = "yipay"
CURRENCY = "CNY"
CENT = Decimal("0.01")


class EpayError(ValueError):
    """A notification that cannot be trusted or used; ``reason`` is for the log only."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass(frozen=True)
class EpayConfig:
    gateway_url: str
    pid: str
    key: str

    @property
    def complete(self) -> bool:
        return bool(self.gateway_url and self.pid and self.key)


def sign(params: Mapping[str, str], key: str) -> str:
    """The lowercase hex MD5 signature of ``params`` under the merchant ``key``."""
    pairs = sorted((k, v) for k, v in params.items()
                   if k not in ("sign", "sign_type") and v != "")
    text = "&".join(f"{k}={v}" for k, v in pairs) + key
    # MD5 is what the EPay protocol specifies; we cannot choose another digest here
    return hashlib.md5(text.encode("utf-8"), usedforsecurity=False).hexdigest()


def submit_url(gateway_url: str) -> str:
    base = gateway_url.strip()
    if base.endswith(".php"):
        return base
    return base.rstrip("/") + "/submit.php"


def money_text(amount: Decimal) -> str:
    return str(amount.quantize(CENT))


def pay_url(config: EpayConfig, *, order_no: str, method: str, money: Decimal, name: str,
            notify_url: str, return_url: str, site_name: str = "") -> str:
    """The redirect URL that opens the gateway's payment page for one order."""
    params = {
        "pid": config.pid,
        "type": method,
        "out_trade_no": order_no,
        "notify_url": notify_url,
        "return_url": return_url,
        "name": name,
        "money": money_text(money),
    }
    if site_name:
        params["sitename"] = site_name
    params["sign"] = sign(params, config.key)
    params["sign_type"] = "MD5"
    return submit_url(config.gateway_url) + "?" + urlencode(params)


@dataclass(frozen=True)
class Notification:
    order_no: str
    trade_no: str
    amount_nanos: int
    paid: bool


def verify(params: Mapping[str, str], config: EpayConfig) -> Notification:
    """Check a notification's signature and merchant; raise EpayError when not genuine."""
    given = params.get("sign", "")
    if not config.complete or not given:
        raise EpayError("unsigned or provider not configured")
    if params.get("sign_type", "MD5").upper() != "MD5":
        raise EpayError("unsupported sign_type")
    expected = sign(params, config.key)
    if not hmac.compare_digest(expected.encode(), given.lower().encode()):
        raise EpayError("bad signature")
    if not hmac.compare_digest(params.get("pid", "").encode(), config.pid.encode()):
        raise EpayError("pid does not match")
    order_no = params.get("out_trade_no", "")
    if not order_no:
        raise EpayError("out_trade_no missing")
    try:
        money = parse_decimal(params.get("money", ""))
    except AmountError:
        raise EpayError("money is not an amount") from None
    return Notification(order_no=order_no, trade_no=params.get("trade_no", ""),
                        amount_nanos=to_nanos(money),
                        paid=params.get("trade_status", "") in SUCCESS_STATUSES)
