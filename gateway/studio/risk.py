"""Risk levels and the approval they need ([P-33], agents contract §4.12).

A work item's level is ``r0``..``r4``.  The charter's ``approval_policy`` maps a level to
``auto``, ``owner_required`` or ``forbidden``; a level the policy does not name is ``auto`` when
it is at or below the studio's autonomy level (``r0``..``r2``) and ``owner_required`` above it.
Pure, so the routes and the control loop share exactly one rule.
"""

from __future__ import annotations

from typing import Any

import orjson

LEVELS = ("r0", "r1", "r2", "r3", "r4")
AUTONOMY_LEVELS = ("r0", "r1", "r2")
AUTO = "auto"
OWNER_REQUIRED = "owner_required"
FORBIDDEN = "forbidden"
POLICIES = (AUTO, OWNER_REQUIRED, FORBIDDEN)
DEFAULT_POLICY = '{"r3":"owner_required","r4":"forbidden"}'


def risk_level(value: Any) -> str:
    """A client's risk level; anything that is not ``r0``..``r4`` is ``r0``."""
    text = value.strip().lower() if isinstance(value, str) else ""
    return text if text in LEVELS else "r0"


def autonomy_level(value: Any) -> str:
    """A client's autonomy level; anything that is not ``r0``..``r2`` is ``r0`` (§4.3)."""
    text = value.strip().lower() if isinstance(value, str) else ""
    return text if text in AUTONOMY_LEVELS else "r0"


def rank(level: str) -> int:
    return LEVELS.index(level) if level in LEVELS else 0


def policy_for(level: str, approval_policy: str, autonomy: str) -> str:
    """What the charter says about work of ``level``: auto, owner_required or forbidden."""
    try:
        policy = orjson.loads(approval_policy or "{}")
    except orjson.JSONDecodeError:
        policy = {}
    named = policy.get(level) if isinstance(policy, dict) else None
    if isinstance(named, str) and named in POLICIES:
        return named
    return AUTO if rank(level) <= rank(autonomy_level(autonomy)) else OWNER_REQUIRED


def may_queue(level: str, status: str) -> bool:
    """The queue rule of §4.10: r0-r2 from planned/authorized (and the [P-36] retry states),
    r3 only from authorized, r4 never."""
    if level == "r4":
        return False
    if level == "r3":
        return status == "authorized"
    return status in ("planned", "authorized", "blocked", "dead_letter", "retryable_failure")
