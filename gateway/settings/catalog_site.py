"""Site identity, layout, theme, sidebar and community settings (console contract §5.4).

These are what the console front end renders with, so nearly all of them are public.
"""

from __future__ import annotations

from gateway.settings.spec import (
    SettingError,
    Spec,
    http_url,
    int_range,
    json_shaped,
    non_negative_decimal,
    normalised_choice,
    one_of,
)

THEME_SUFFIXES = (
    "background", "foreground", "card", "card_foreground", "primary", "primary_foreground",
    "secondary", "secondary_foreground", "accent", "accent_foreground", "muted",
    "muted_foreground", "border",
)
LIGHT_THEME = (
    "#ffffff", "#020817", "#ffffff", "#020817", "#0f172a", "#f8fafc", "#f1f5f9", "#0f172a",
    "#f1f5f9", "#0f172a", "#f1f5f9", "#64748b", "#e2e8f0",
)
DARK_THEME = (
    "#020817", "#f8fafc", "#020817", "#f8fafc", "#f8fafc", "#0f172a", "#1e293b", "#f8fafc",
    "#1e293b", "#f8fafc", "#1e293b", "#94a3b8", "#1e293b",
)
SIDEBAR_ITEMS = (
    "dashboard", "usage", "wallet", "data_board", "api_keys", "chat", "images", "settings",
    "system", "admin_overview", "channels", "models", "users",
)
SYSTEM_MODES = {"operation": "operation", "personal": "personal", "enterprise": "enterprise"}


def _site_name(text: str) -> str:
    if not text:
        raise SettingError("site_name", "Site name is required")
    if len(text) > 80:
        raise SettingError("site_name", "Site name is too long")
    return text


def specs() -> list[Spec]:
    result = [
        Spec("edition", "text", "premium", public=True, readonly=True),
        Spec("system_mode", "text", "operation", public=True,
             check=normalised_choice(SYSTEM_MODES, "operation")),
        Spec("enterprise_features_enabled", "bool", "false", public=True, readonly=True),
        Spec("site_name", "text", "Lockgate", public=True, check=_site_name),
        Spec("site_description", "text", "", public=True),
        Spec("base_url", "text", "", public=True, check=http_url("base_url")),
        Spec("icon_url", "text", "", public=True, check=http_url("icon_url")),
        Spec("footer_text", "text", "", public=True),
        Spec("about_html", "text", "", public=True),
        Spec("home_iframe_url", "text", "", public=True, check=http_url("home_iframe_url")),
        Spec("privacy_policy", "text", "", public=True),
        Spec("terms", "text", "", public=True),
        Spec("privacy_policy_url", "text", "", public=True, check=http_url("privacy_policy_url")),
        Spec("terms_url", "text", "", public=True, check=http_url("terms_url")),
        Spec("announcement", "text", "", public=True),
        Spec("auth_agreement_mode", "text", "notice", public=True,
             check=one_of("auth_agreement_mode", ("notice", "checkbox"),
                          "Invalid auth agreement mode", empty="notice")),
        Spec("top_nav_enabled", "bool", "false", public=True),
        Spec("top_nav_items", "json", "", public=True,
             check=json_shaped("top_nav_items", list,
                               "Top navigation items must be a JSON array")),
        Spec("page_layouts", "json", "{}", public=True,
             check=json_shaped("page_layouts", dict, "Page layouts must be a JSON object")),
        Spec("theme_background_image", "text", "", public=True),
        Spec("theme_custom_css", "text", "", public=True),
        Spec("chat_page_mode", "text", "advanced", public=True,
             check=one_of("chat_page_mode", ("basic", "advanced"), "Invalid chat page mode",
                          empty="basic")),
        Spec("message_channel_enabled", "bool", "false", public=True),
        Spec("referral_enabled", "bool", "false", public=True),
        Spec("referral_commission_rate", "text", "0", public=True,
             check=non_negative_decimal("referral_commission_rate")),
        Spec("group_multiplier_mode", "text", "min", public=True,
             check=normalised_choice({"min": "min", "max": "max", "high": "max",
                                      "higher": "max"}, "min")),
        Spec("pricing_endpoint_enabled", "bool", "false", public=True),
        Spec("status_monitor_enabled", "bool", "false", public=True),
        Spec("community_enabled", "bool", "true", public=True),
        Spec("checkin_enabled", "bool", "false", public=True),
        Spec("checkin_streak_enabled", "bool", "false", public=True),
        Spec("checkin_random_enabled", "bool", "false", public=True),
        Spec("checkin_daily_reward", "text", "0", public=True,
             check=non_negative_decimal("checkin_daily_reward")),
        Spec("checkin_random_min", "text", "0", public=True,
             check=non_negative_decimal("checkin_random_min")),
        Spec("checkin_random_max", "text", "0", public=True,
             check=non_negative_decimal("checkin_random_max")),
        Spec("checkin_timezone", "text", "Asia/Shanghai", public=True),
        Spec("checkin_streak_cycle_days", "text", "7", public=True,
             check=int_range("checkin_streak_cycle_days", 1, 3650)),
        Spec("checkin_streak_rewards", "json", "{}", public=True,
             check=json_shaped("checkin_streak_rewards", dict,
                               "Check-in streak rewards must be a JSON object")),
    ]
    for mode, colours in (("light", LIGHT_THEME), ("dark", DARK_THEME)):
        for suffix, colour in zip(THEME_SUFFIXES, colours, strict=True):
            result.append(Spec(f"theme_{mode}_{suffix}", "text", colour, public=True))
    for item in SIDEBAR_ITEMS:
        result.append(Spec(f"sidebar_{item}_enabled", "bool", "true", public=True))
    return result
