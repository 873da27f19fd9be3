"""The JSON form of a user (console contract §2.1 success body, §4.1)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from gateway.billing.money import format_nanos


def timestamp(value: datetime | None) -> str | None:
    """RFC 3339 with a ``Z`` (contract §1.2); ``None`` stays null."""
    if value is None:
        return None
    return value.isoformat().replace("+00:00", "Z")


def group_view(group: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": group["id"],
        "name": group["name"],
        "multiplier": format_nanos(group["multiplier_nanos"]),
        "created_at": timestamp(group["created_at"]),
        "updated_at": timestamp(group["updated_at"]),
    }


def user_view(user: dict[str, Any], relations: dict[str, Any]) -> dict[str, Any]:
    """Never includes the password hash or token version."""
    view: dict[str, Any] = {
        "id": user["id"],
        "username": user["username"],
        "email": user["email"],
        "email_verified": bool(user["email_verified"]),
        "avatar_url": user["avatar_url"] or "",
        "balance": format_nanos(user["balance_nanos"]),
        "group_id": user["group_id"],
        "group": group_view(relations["group"]) if relations.get("group") else None,
        "groups": [
            {
                "id": m["id"],
                "user_id": m["user_id"],
                "group_id": m["group_id"],
                "group": {
                    "id": m["group_id"],
                    "name": m["group_name"],
                    "multiplier": format_nanos(m["group_multiplier"]),
                    "created_at": timestamp(m["group_created_at"]),
                    "updated_at": timestamp(m["group_updated_at"]),
                },
                "expires_at": timestamp(m["expires_at"]),
                "created_at": timestamp(m["created_at"]),
                "updated_at": timestamp(m["updated_at"]),
            }
            for m in relations.get("memberships", [])
        ],
        "referral_code": user["referral_code"],
        "referrer_id": user["referrer_id"],
        "is_admin": bool(user["is_admin"]),
        "enabled": bool(user["enabled"]),
        "created_at": timestamp(user["created_at"]),
        "updated_at": timestamp(user["updated_at"]),
    }
    if user.get("phone"):
        view["phone"] = user["phone"]
    if user.get("oidc_sub"):
        view["oidc_sub"] = user["oidc_sub"]
    if relations.get("referrer"):
        view["referrer"] = {"id": relations["referrer"]["id"],
                            "username": relations["referrer"]["username"]}
    return view
