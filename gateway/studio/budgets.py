"""Studio budgets at work creation (agents contract §4.11).

Why pure: the routes (``POST /work-items``) and any other creator of estimated work must
apply one rule.  Budgets limit *outstanding reservations* in the current UTC day and month
(Σ reservation + release since the period start; consumption does not count); 0 means no
limit.  ``refusal`` answers the 402 message or None; the sums come from
``gateway.store.studio.control.outstanding_since``.
"""

from __future__ import annotations

OVER_BUDGET = "Work item exceeds the available Personal Company budget"


def refusal(estimated_nanos: int, daily_nanos: int, monthly_nanos: int,
            outstanding_today: int, outstanding_this_month: int) -> str | None:
    """The 402 message when work estimated at ``estimated_nanos`` does not fit, else None."""
    if estimated_nanos <= 0:
        return None
    if daily_nanos > 0 and (estimated_nanos > daily_nanos
                            or outstanding_today + estimated_nanos > daily_nanos):
        return OVER_BUDGET
    if monthly_nanos > 0 and (estimated_nanos > monthly_nanos
                              or outstanding_this_month + estimated_nanos > monthly_nanos):
        return OVER_BUDGET
    return None
