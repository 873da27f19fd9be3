"""The inviter's commission on an invitee's billed wallet spend (console contract §4.5).

Pure arithmetic shared by settlement (which credits it) and the referral view (which shows the
rate).  ``referral_commission_rate`` above 1 is read as a percentage (``10`` = 0.10); zero or
less, an unreadable value, or ``referral_enabled`` off disables commissions.  Commissions are
rounded down to whole nano-units so the sum credited never exceeds rate x spend.
"""

from __future__ import annotations

from decimal import ROUND_DOWN, Decimal, InvalidOperation

ONE = Decimal(1)
HUNDRED = Decimal(100)


def commission_rate(rate_text: str | None) -> Decimal:
    """The effective rate as a fraction in [0, 1] (0 = no commission)."""
    try:
        rate = Decimal((rate_text or "0").strip() or "0")
    except InvalidOperation:
        return Decimal(0)
    if not rate.is_finite() or rate <= 0:
        return Decimal(0)
    if rate > ONE:
        rate = rate / HUNDRED
    return min(rate, ONE)


def commission_nanos(spent_nanos: int, rate: Decimal) -> int:
    """Commission on ``spent_nanos`` at ``rate`` (whole nano-units, rounded down)."""
    if spent_nanos <= 0 or rate <= 0:
        return 0
    return int((Decimal(spent_nanos) * rate).to_integral_value(rounding=ROUND_DOWN))
