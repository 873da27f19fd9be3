"""Sign-in, registration, OIDC/OAuth, captcha, mail and SMS settings (console contract §5.4).

The public ones drive the login page; the rest (issuers, SMTP, SMS credentials) are admin only,
and every credential is a secret.
"""

from __future__ import annotations

import orjson

from gateway.settings.spec import (
    SettingError,
    Spec,
    http_url,
    int_range,
    one_of,
)

HCAPTCHA_VERIFY_URL = "https://api.hcaptcha.com/siteverify"


def _email_routing(text: str) -> str:
    message = 'Registration email routing must be a JSON array of {"suffix", "group_id"}'
    if not text:
        return "[]"
    try:
        rules = orjson.loads(text)
    except orjson.JSONDecodeError:
        raise SettingError("registration_email_routing", message) from None
    if not isinstance(rules, list):
        raise SettingError("registration_email_routing", message)
    for rule in rules:
        if not isinstance(rule, dict) or not isinstance(rule.get("suffix"), str) \
                or not rule["suffix"].strip().lstrip("@"):
            raise SettingError("registration_email_routing", message)
        group_id = rule.get("group_id")
        if isinstance(group_id, bool) or not isinstance(group_id, int) or group_id <= 0:
            raise SettingError("registration_email_routing", message)
    return orjson.dumps(rules).decode()


def specs() -> list[Spec]:
    return [
        Spec("session_lifetime_hours", "text", "168",
             check=int_range("session_lifetime_hours", 1, 8760)),
        Spec("password_login_enabled", "bool", "true", public=True),
        Spec("password_registration_enabled", "bool", "true", public=True),
        Spec("token_api_enabled", "bool", "true", public=True),
        Spec("email_verification_required", "bool", "false", public=True),
        Spec("email_code_ttl_seconds", "text", "600",
             check=int_range("email_code_ttl_seconds", 60, 86400)),
        Spec("password_hcaptcha_enabled", "bool", "false", public=True),
        Spec("hcaptcha_site_key", "text", "", public=True),
        Spec("hcaptcha_secret", "text", "", secret=True),
        Spec("hcaptcha_verify_url", "text", HCAPTCHA_VERIFY_URL,
             check=http_url("hcaptcha_verify_url")),
        Spec("registration_email_suffixes", "text", "", public=True),
        Spec("registration_email_routing", "json", "[]", check=_email_routing),
        Spec("oidc_enabled", "bool", "false", public=True),
        Spec("oidc_issuer", "text", "", check=http_url("oidc_issuer")),
        Spec("oidc_client_id", "text", ""),
        Spec("oidc_client_secret", "text", "", secret=True),
        Spec("oidc_redirect_url", "text", "", check=http_url("oidc_redirect_url")),
        # validated and merged (client_secret kept) by catalog_secrets
        Spec("oauth_providers", "json", "[]", public=True),
        Spec("passkey_enabled", "bool", "false", public=True),
        Spec("passkey_rp_id", "text", ""),
        Spec("passkey_origins", "text", ""),
        Spec("passkey_user_verification", "text", "preferred",
             check=one_of("passkey_user_verification", ("required", "preferred", "discouraged"),
                          "passkey_user_verification must be required, preferred or discouraged",
                          empty="preferred")),
        Spec("smtp_host", "text", ""),
        Spec("smtp_port", "text", "587", check=int_range("smtp_port", 1, 65535)),
        Spec("smtp_username", "text", ""),
        Spec("smtp_password", "text", "", secret=True),
        Spec("smtp_from", "text", ""),
        # default: tls when smtp_port is 465, else starttls (see catalog_update.derived)
        Spec("smtp_security", "text", "",
             check=one_of("smtp_security", ("starttls", "tls", "none"),
                          "smtp_security must be starttls, tls or none", empty="")),
        Spec("sms_enabled", "bool", "false", public=True),
        Spec("sms_login_enabled", "bool", "false", public=True),
        Spec("sms_binding_required", "bool", "false", public=True),
        Spec("sms_provider", "text", "aliyun",
             check=one_of("sms_provider", ("aliyun", "tencent"),
                          "sms_provider must be aliyun or tencent", empty="aliyun")),
        Spec("sms_aliyun_access_key_id", "text", ""),
        Spec("sms_aliyun_access_key_secret", "text", "", secret=True),
        Spec("sms_aliyun_sign_name", "text", ""),
        Spec("sms_aliyun_template_code", "text", ""),
        Spec("sms_tencent_secret_id", "text", ""),
        Spec("sms_tencent_secret_key", "text", "", secret=True),
        Spec("sms_tencent_sdk_app_id", "text", ""),
        Spec("sms_tencent_sign_name", "text", ""),
        Spec("sms_tencent_template_id", "text", ""),
        Spec("sms_tencent_region", "text", "ap-guangzhou"),
        # written by setup itself
        Spec("setup_completed_at", "text", "", internal=True),
    ]
