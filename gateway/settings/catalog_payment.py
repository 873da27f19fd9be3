"""Payment settings: display, presets, providers and their credentials (console contract §5.4).

Provider keys and certificates are secrets; ``payment_channels`` holds per-channel configs whose
secret members ``catalog_secrets`` strips on read and keeps on a blank write.
"""

from __future__ import annotations

from gateway.settings.spec import (
    Check,
    Spec,
    http_url,
    int_range,
    non_negative_decimal,
    string_array,
)

ALIPAY_GATEWAY_URL = "https://openapi.alipay.com/gateway.do"
PAYPAL_SANDBOX_URL = "https://api-m.sandbox.paypal.com"
STRIPE_API_URL = "https://api.stripe.com"


def _lower(text: str) -> str:
    return text.lower()


def _upper(text: str) -> str:
    return text.upper()


def _text(key: str, default: str = "", check: Check | None = None) -> Spec:
    return Spec(key, "text", default, check=check)


def _secret(key: str) -> Spec:
    return Spec(key, "text", "", secret=True)


def _url(key: str, default: str = "") -> Spec:
    return Spec(key, "text", default, check=http_url(key))


def specs() -> list[Spec]:
    return [
        # effective value (false in personal mode) is computed by the views
        Spec("payment_enabled", "bool", "false", public=True),
        Spec("payment_currency_display_name", "text", "$", public=True),
        Spec("payment_usd_to_rmb_rate", "text", "7.20", public=True,
             check=non_negative_decimal("payment_usd_to_rmb_rate")),
        Spec("payment_min_recharge_amount", "text", "1", public=True,
             check=non_negative_decimal("payment_min_recharge_amount")),
        Spec("payment_recharge_presets", "json", '["5","10","20","50","100"]', public=True,
             check=string_array("payment_recharge_presets",
                                "Recharge presets must be a JSON array of amounts")),
        Spec("payment_methods", "json", '["alipay","wxpay"]', public=True,
             check=string_array("payment_methods",
                                "Payment methods must be a JSON array of names")),
        Spec("payment_gateway_provider", "text", "yipay", public=True, check=_lower),
        # validated and merged (secret config members kept) by catalog_secrets
        Spec("payment_channels", "json", "[]", public=True),
        Spec("payment_order_ttl_minutes", "text", "120",
             check=int_range("payment_order_ttl_minutes", 1, 7 * 24 * 60)),
        _url("payment_yipay_gateway_url"),
        _text("payment_yipay_pid"),
        _url("payment_yipay_notify_url"),
        _url("payment_yipay_return_url"),
        _secret("payment_yipay_key"),
        _url("payment_openpayment_base_url"),
        _url("payment_openpayment_config_url"),
        _text("payment_openpayment_merchant_id"),
        _secret("payment_openpayment_key"),
        Spec("payment_openpayment_notify_url", "text", "", readonly=True),
        Spec("payment_openpayment_return_url", "text", "", readonly=True),
        _text("payment_official_currency", "CNY", check=_upper),
        _text("payment_wechat_mch_id"),
        _text("payment_wechat_app_id"),
        _text("payment_wechat_serial_no"),
        _secret("payment_wechat_private_key"),
        _secret("payment_wechat_platform_certificate"),
        _secret("payment_wechat_api_v3_key"),
        _text("payment_alipay_app_id"),
        _secret("payment_alipay_private_key"),
        _secret("payment_alipay_public_key"),
        _url("payment_alipay_gateway_url", ALIPAY_GATEWAY_URL),
        _text("payment_paypal_client_id"),
        _text("payment_paypal_webhook_id"),
        _secret("payment_paypal_client_secret"),
        _url("payment_paypal_base_url", PAYPAL_SANDBOX_URL),
        _url("payment_stripe_base_url", STRIPE_API_URL),
        _secret("payment_stripe_secret_key"),
        _secret("payment_stripe_webhook_secret"),
    ]
