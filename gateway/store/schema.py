"""Every table, in SQLAlchemy Core.  Money and multipliers are integer nano-units (1e-9).

The Alembic migrations under ``migrations/versions`` create exactly this schema; a test compares
the two so they cannot drift.  Column names ending in ``_nanos`` hold nano-units.
"""

from __future__ import annotations

from sqlalchemy import (
    BigInteger,
    Boolean,
    Column,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    UniqueConstraint,
    text,
)

from gateway.store.types import JSONText, UTCDateTime

NAMING = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}
metadata = MetaData(naming_convention=NAMING)

FALSE = text("false")
TRUE = text("true")
ZERO = text("0")


def _timestamps() -> list[Column]:
    return [
        Column("created_at", UTCDateTime, nullable=False),
        Column("updated_at", UTCDateTime, nullable=False),
    ]


def _id() -> Column:
    return Column("id", Integer, primary_key=True, autoincrement=True)


# --- identity -------------------------------------------------------------------------------

groups = Table(
    "groups", metadata,
    _id(),
    Column("name", String(50), nullable=False, unique=True),
    Column("multiplier_nanos", BigInteger, nullable=False, server_default=text("1000000000")),
    *_timestamps(),
)

users = Table(
    "users", metadata,
    _id(),
    Column("username", String(100), nullable=False, unique=True),
    Column("email", String(254), nullable=False, unique=True),
    Column("password_hash", Text, nullable=True),
    Column("email_verified", Boolean, nullable=False, server_default=FALSE),
    Column("avatar_url", Text, nullable=False, server_default=""),
    Column("phone", String(32), nullable=True, unique=True),
    Column("oidc_sub", String(255), nullable=True, unique=True),
    Column("balance_nanos", BigInteger, nullable=False, server_default=ZERO),
    Column("group_id", Integer, ForeignKey("groups.id"), nullable=False),
    Column("referral_code", String(32), nullable=False, unique=True),
    Column("referrer_id", Integer, ForeignKey("users.id", ondelete="SET NULL"), nullable=True),
    Column("is_admin", Boolean, nullable=False, server_default=FALSE),
    Column("enabled", Boolean, nullable=False, server_default=TRUE),
    Column("token_version", Integer, nullable=False, server_default=ZERO),
    *_timestamps(),
)

group_memberships = Table(
    "group_memberships", metadata,
    _id(),
    Column("user_id", Integer, ForeignKey("users.id", ondelete="CASCADE"), nullable=False),
    Column("group_id", Integer, ForeignKey("groups.id", ondelete="CASCADE"), nullable=False),
    Column("expires_at", UTCDateTime, nullable=True),
    *_timestamps(),
    UniqueConstraint("user_id", "group_id", name="uq_group_memberships_user_group"),
)

#: one-time email codes; only sha256(lower(email)|purpose|code) is kept (console contract §2.4)
email_codes = Table(
    "email_codes", metadata,
    _id(),
    Column("email", String(254), nullable=False),
    # registration | password_change
    Column("purpose", String(32), nullable=False),
    Column("code_hash", String(64), nullable=False),
    Column("captcha_verified", Boolean, nullable=False, server_default=FALSE),
    Column("attempts", Integer, nullable=False, server_default=ZERO),
    Column("expires_at", UTCDateTime, nullable=False),
    Column("used_at", UTCDateTime, nullable=True),
    Column("created_at", UTCDateTime, nullable=False),
)
Index("ix_email_codes_email_purpose", email_codes.c.email, email_codes.c.purpose)
Index("ix_email_codes_expires_at", email_codes.c.expires_at)

settings = Table(
    "settings", metadata,
    Column("key", String(100), primary_key=True),
    Column("value", Text, nullable=False),
    *_timestamps(),
)

# --- catalog --------------------------------------------------------------------------------

user_channels = Table(
    "user_channels", metadata,
    _id(),
    Column("name", String(100), nullable=False, unique=True),
    Column("description", Text, nullable=False, server_default=""),
    Column("multiplier_nanos", BigInteger, nullable=False, server_default=text("1000000000")),
    Column("routing_algorithm", String(32), nullable=False, server_default="priority"),
    Column("enabled", Boolean, nullable=False, server_default=TRUE),
    Column("rate_limit_enabled", Boolean, nullable=False, server_default=FALSE),
    Column("rate_limit_requests_per_minute", Integer, nullable=False, server_default=ZERO),
    Column("rate_limit_burst", Integer, nullable=False, server_default=ZERO),
    *_timestamps(),
)

user_channel_access = Table(
    "user_channel_access", metadata,
    _id(),
    Column("user_channel_id", Integer, ForeignKey("user_channels.id", ondelete="CASCADE"),
           nullable=False),
    Column("group_id", Integer, ForeignKey("groups.id", ondelete="CASCADE"), nullable=True),
    Column("user_id", Integer, ForeignKey("users.id", ondelete="CASCADE"), nullable=True),
    Column("created_at", UTCDateTime, nullable=False),
)

channels = Table(
    "channels", metadata,
    _id(),
    Column("user_channel_id", Integer, ForeignKey("user_channels.id", ondelete="SET NULL"),
           nullable=True),
    Column("name", String(100), nullable=False),
    Column("type", String(64), nullable=False),
    Column("base_url", Text, nullable=False),
    Column("api_key", Text, nullable=False, server_default=""),
    Column("plugin_config", Text, nullable=False, server_default=""),
    Column("multiplier_nanos", BigInteger, nullable=False, server_default=text("1000000000")),
    Column("priority", Integer, nullable=False, server_default=text("1")),
    Column("weight", Integer, nullable=False, server_default=text("1")),
    Column("enabled", Boolean, nullable=False, server_default=TRUE),
    Column("price_sync_enabled", Boolean, nullable=False, server_default=FALSE),
    Column("price_sync_cron", String(100), nullable=False, server_default=""),
    Column("price_sync_last_at", UTCDateTime, nullable=True),
    Column("consecutive_failures", Integer, nullable=False, server_default=ZERO),
    Column("last_failure_at", UTCDateTime, nullable=True),
    Column("last_failure_reason", Text, nullable=False, server_default=""),
    Column("auto_disabled_at", UTCDateTime, nullable=True),
    Column("auto_disabled_reason", Text, nullable=False, server_default=""),
    Column("last_health_checked_at", UTCDateTime, nullable=True),
    Column("last_health_status", String(16), nullable=False, server_default="pending"),
    *_timestamps(),
)

channel_group_multipliers = Table(
    "channel_group_multipliers", metadata,
    _id(),
    Column("channel_id", Integer, ForeignKey("channels.id", ondelete="CASCADE"), nullable=False),
    Column("group_id", Integer, ForeignKey("groups.id", ondelete="CASCADE"), nullable=False),
    Column("multiplier_nanos", BigInteger, nullable=False),
    *_timestamps(),
    UniqueConstraint("channel_id", "group_id", name="uq_channel_group_multipliers_pair"),
)

PRICE_NAMES = (
    "input_price", "output_price", "cached_input_price", "cache_write_input_price",
    "cache_write_1h_input_price", "image_input_price", "image_output_price",
    "audio_input_price", "audio_output_price",
)
#: prices a channel-model config may override (contract §5.8)
OVERRIDE_PRICE_NAMES = (
    "input_price", "output_price", "cached_input_price", "image_input_price", "image_output_price",
)

models = Table(
    "models", metadata,
    _id(),
    Column("model_name", String(100), nullable=False, unique=True),
    Column("display_name", String(200), nullable=False, server_default=""),
    Column("provider", String(100), nullable=False, server_default="custom"),
    Column("provider_icon_url", Text, nullable=False, server_default=""),
    Column("quota_type", Integer, nullable=False, server_default=ZERO),
    *[Column(f"{name}_nanos", BigInteger, nullable=False, server_default=ZERO)
      for name in PRICE_NAMES],
    *[Column(f"{name}_tiers", JSONText, nullable=True) for name in PRICE_NAMES],
    Column("video_billing_config", JSONText, nullable=True),
    Column("enabled", Boolean, nullable=False, server_default=TRUE),
    *_timestamps(),
)

channel_models = Table(
    "channel_models", metadata,
    _id(),
    Column("channel_id", Integer, ForeignKey("channels.id", ondelete="CASCADE"), nullable=False),
    Column("model_id", Integer, ForeignKey("models.id", ondelete="CASCADE"), nullable=False),
    Column("upstream_model_name", String(200), nullable=False),
    *[Column(f"{name}_nanos", BigInteger, nullable=True) for name in OVERRIDE_PRICE_NAMES],
    Column("enabled", Boolean, nullable=False, server_default=TRUE),
    *_timestamps(),
    UniqueConstraint("channel_id", "model_id", "upstream_model_name",
                     name="uq_channel_models_triple"),
)

channel_model_group_multipliers = Table(
    "channel_model_group_multipliers", metadata,
    _id(),
    Column("channel_model_id", Integer, ForeignKey("channel_models.id", ondelete="CASCADE"),
           nullable=False),
    Column("group_id", Integer, ForeignKey("groups.id", ondelete="CASCADE"), nullable=False),
    Column("multiplier_nanos", BigInteger, nullable=False),
    *_timestamps(),
    UniqueConstraint("channel_model_id", "group_id", name="uq_cm_group_multipliers_pair"),
)

# --- keys and money -------------------------------------------------------------------------

api_keys = Table(
    "api_keys", metadata,
    _id(),
    Column("user_id", Integer, ForeignKey("users.id", ondelete="CASCADE"), nullable=False),
    Column("name", String(100), nullable=False),
    Column("key_hash", String(64), nullable=False, unique=True),
    Column("key_prefix", String(32), nullable=False),
    Column("allowed_models", JSONText, nullable=True),
    Column("allowed_user_channels", JSONText, nullable=True),
    Column("allowed_ips", JSONText, nullable=True),
    Column("quota_limit_nanos", BigInteger, nullable=False, server_default=ZERO),
    # spent since usage_reset_at; updated in the settlement transaction (never from logs)
    Column("spent_nanos", BigInteger, nullable=False, server_default=ZERO),
    Column("request_count", BigInteger, nullable=False, server_default=ZERO),
    Column("input_tokens", BigInteger, nullable=False, server_default=ZERO),
    Column("output_tokens", BigInteger, nullable=False, server_default=ZERO),
    Column("cached_input_tokens", BigInteger, nullable=False, server_default=ZERO),
    Column("enabled", Boolean, nullable=False, server_default=TRUE),
    Column("last_used_at", UTCDateTime, nullable=True),
    Column("usage_reset_at", UTCDateTime, nullable=True),
    *_timestamps(),
)
Index("ix_api_keys_user", api_keys.c.user_id, api_keys.c.id)

ledger = Table(
    "ledger", metadata,
    _id(),
    Column("user_id", Integer, ForeignKey("users.id", ondelete="CASCADE"), nullable=False),
    # charge | refund | admin_adjust | topup | checkin | redeem | referral | ...
    Column("kind", String(32), nullable=False),
    Column("amount_nanos", BigInteger, nullable=False),
    Column("balance_after_nanos", BigInteger, nullable=False),
    Column("actor_user_id", Integer, nullable=True),
    # idempotency key: one ledger row per (kind, ref)
    Column("ref", String(128), nullable=True),
    Column("memo", Text, nullable=False, server_default=""),
    Column("created_at", UTCDateTime, nullable=False),
    UniqueConstraint("kind", "ref", name="uq_ledger_kind_ref"),
)
Index("ix_ledger_user_time", ledger.c.user_id, ledger.c.created_at)

reservations = Table(
    "reservations", metadata,
    Column("request_id", String(64), primary_key=True),
    Column("user_id", Integer, nullable=False),
    Column("api_key_id", Integer, nullable=True),
    Column("amount_nanos", BigInteger, nullable=False),
    Column("node", String(64), nullable=False, server_default=""),
    Column("created_at", UTCDateTime, nullable=False),
)

USAGE_TOKEN_FIELDS = (
    "input_tokens", "output_tokens", "cached_input_tokens", "cache_write_input_tokens",
    "cache_write_1h_input_tokens", "image_input_tokens", "image_output_tokens",
    "audio_input_tokens", "audio_output_tokens",
)

usage_logs = Table(
    "usage_logs", metadata,
    Column("id", BigInteger().with_variant(Integer, "sqlite"), primary_key=True,
           autoincrement=True),
    Column("request_id", String(64), nullable=False, unique=True),
    Column("user_id", Integer, nullable=False),
    Column("api_key_id", Integer, nullable=True),
    Column("user_channel_id", Integer, nullable=True),
    Column("channel_id", Integer, nullable=True),
    Column("model_config_id", Integer, nullable=True),
    Column("model_name", String(200), nullable=False, server_default=""),
    Column("endpoint", String(100), nullable=False, server_default=""),
    Column("is_stream", Boolean, nullable=False, server_default=FALSE),
    *[Column(name, BigInteger, nullable=False, server_default=ZERO) for name in USAGE_TOKEN_FIELDS],
    Column("response_time_ms", Integer, nullable=False, server_default=ZERO),
    Column("first_response_time_ms", Integer, nullable=False, server_default=ZERO),
    Column("base_cost_nanos", BigInteger, nullable=False, server_default=ZERO),
    Column("group_multiplier_nanos", BigInteger, nullable=False, server_default=text("1000000000")),
    Column("user_channel_multiplier_nanos", BigInteger, nullable=False,
           server_default=text("1000000000")),
    Column("prices", JSONText, nullable=True),
    Column("cost_nanos", BigInteger, nullable=False, server_default=ZERO),
    Column("subscription_cost_nanos", BigInteger, nullable=False, server_default=ZERO),
    Column("pricing_formula", Text, nullable=False, server_default=""),
    Column("status", Integer, nullable=False, server_default=ZERO),
    Column("error_message", Text, nullable=False, server_default=""),
    # what the upstream answered and why the channel failed (admin's view only, issue 14)
    Column("upstream_status", Integer, nullable=True),
    Column("failure_reason", Text, nullable=False, server_default=""),
    # the meta model the client named when a program chose the model (issue 17)
    Column("meta_model_name", String(100), nullable=False, server_default=""),
    Column("ip", String(64), nullable=False, server_default=""),
    Column("user_agent", Text, nullable=False, server_default=""),
    Column("created_at", UTCDateTime, nullable=False),
)
Index("ix_usage_logs_time", usage_logs.c.created_at)
Index("ix_usage_logs_user_time", usage_logs.c.user_id, usage_logs.c.created_at)
Index("ix_usage_logs_key_time", usage_logs.c.api_key_id, usage_logs.c.created_at)
Index("ix_usage_logs_model_time", usage_logs.c.model_name, usage_logs.c.created_at)
Index("ix_usage_logs_channel_time", usage_logs.c.channel_id, usage_logs.c.created_at)
Index("ix_usage_logs_uc_time", usage_logs.c.user_channel_id, usage_logs.c.created_at)

orders = Table(
    "orders", metadata,
    _id(),
    Column("order_no", String(64), nullable=False, unique=True),
    Column("user_id", Integer, ForeignKey("users.id", ondelete="CASCADE"), nullable=False),
    Column("amount_nanos", BigInteger, nullable=False),
    Column("local_amount_nanos", BigInteger, nullable=False),
    Column("currency", String(8), nullable=False, server_default="CNY"),
    Column("method", String(32), nullable=False),
    Column("provider", String(32), nullable=False),
    # pending | paid | expired | failed
    Column("status", String(16), nullable=False, server_default="pending"),
    Column("payment_url", Text, nullable=False, server_default=""),
    Column("provider_ref", String(255), nullable=True),
    Column("subscription_plan_id", Integer, nullable=True),
    Column("expires_at", UTCDateTime, nullable=False),
    Column("paid_at", UTCDateTime, nullable=True),
    # payment channel id ("legacy" for the flat payment_* settings)
    Column("channel_id", String(64), nullable=False, server_default="legacy"),
    # what the provider must report: local_amount (CNY) or amount, in ``currency``
    Column("gateway_amount_nanos", BigInteger, nullable=False, server_default=ZERO),
    # raw verified notification (also kept, uncredited, when it arrives after expiry)
    Column("notify_payload", Text, nullable=True),
    Column("notified_at", UTCDateTime, nullable=True),
    Column("failure_reason", Text, nullable=False, server_default=""),
    *_timestamps(),
)
Index("ix_orders_user_time", orders.c.user_id, orders.c.created_at)
Index("ix_orders_status_expiry", orders.c.status, orders.c.expires_at)


# --- wallet extras: check-in, plans and subscriptions, redeem codes, referral ---------------

check_ins = Table(
    "check_ins", metadata,
    _id(),
    Column("user_id", Integer, ForeignKey("users.id", ondelete="CASCADE"), nullable=False),
    # the calendar date in ``checkin_timezone`` (YYYY-MM-DD): one reward per user per local day
    Column("check_in_date", String(10), nullable=False),
    Column("reward_amount_nanos", BigInteger, nullable=False),
    Column("streak_days", Integer, nullable=False),
    Column("reward_kind", String(32), nullable=False),
    Column("created_at", UTCDateTime, nullable=False),
    UniqueConstraint("user_id", "check_in_date", name="uq_check_ins_user_date"),
)

subscription_plans = Table(
    "subscription_plans", metadata,
    _id(),
    Column("name", String(100), nullable=False, unique=True),
    Column("description", Text, nullable=False, server_default=""),
    Column("reset_amount_nanos", BigInteger, nullable=False),
    Column("reset_interval_days", Integer, nullable=False),
    Column("price_nanos", BigInteger, nullable=False, server_default=ZERO),
    # 0 = a subscription to this plan never expires
    Column("duration_days", Integer, nullable=False, server_default=ZERO),
    Column("purchasable", Boolean, nullable=False, server_default=FALSE),
    Column("enabled", Boolean, nullable=False, server_default=TRUE),
    *_timestamps(),
)

user_subscriptions = Table(
    "user_subscriptions", metadata,
    _id(),
    Column("user_id", Integer, ForeignKey("users.id", ondelete="CASCADE"), nullable=False),
    Column("plan_id", Integer, ForeignKey("subscription_plans.id"), nullable=False),
    # the quota left in this cycle; spent before the wallet by settlement
    Column("balance_nanos", BigInteger, nullable=False),
    Column("active_until", UTCDateTime, nullable=True),
    Column("next_reset_at", UTCDateTime, nullable=False),
    Column("last_reset_at", UTCDateTime, nullable=True),
    Column("source", String(32), nullable=False, server_default=""),
    *_timestamps(),
)
Index("ix_user_subscriptions_user", user_subscriptions.c.user_id, user_subscriptions.c.id)

redeem_codes = Table(
    "redeem_codes", metadata,
    _id(),
    Column("code", String(64), nullable=False, unique=True),
    Column("amount_nanos", BigInteger, nullable=False, server_default=ZERO),
    Column("group_id", Integer, ForeignKey("groups.id"), nullable=True),
    Column("group_duration_days", Integer, nullable=False, server_default=ZERO),
    Column("subscription_plan_id", Integer, ForeignKey("subscription_plans.id"), nullable=True),
    Column("subscription_duration_days", Integer, nullable=False, server_default=ZERO),
    Column("allow_stacking", Boolean, nullable=False, server_default=FALSE),
    # 0 = unlimited (contract section 0); redemptions never exceed it (conditional UPDATE)
    Column("max_uses", Integer, nullable=False, server_default=text("1")),
    Column("used_count", Integer, nullable=False, server_default=ZERO),
    Column("enabled", Boolean, nullable=False, server_default=TRUE),
    Column("expires_at", UTCDateTime, nullable=True),
    *_timestamps(),
)

redeem_uses = Table(
    "redeem_uses", metadata,
    _id(),
    Column("redeem_code_id", Integer, ForeignKey("redeem_codes.id", ondelete="CASCADE"),
           nullable=False),
    Column("user_id", Integer, ForeignKey("users.id", ondelete="CASCADE"), nullable=False),
    Column("amount_nanos", BigInteger, nullable=False, server_default=ZERO),
    Column("subscription_plan_id", Integer, nullable=True),
    Column("created_at", UTCDateTime, nullable=False),
    UniqueConstraint("redeem_code_id", "user_id", name="uq_redeem_uses_code_user"),
)

referral_commissions = Table(
    "referral_commissions", metadata,
    _id(),
    Column("referrer_id", Integer, ForeignKey("users.id", ondelete="CASCADE"), nullable=False),
    Column("referred_user_id", Integer, nullable=False),
    # the billed call (usage_logs.request_id); one commission per call
    Column("request_id", String(64), nullable=False, unique=True),
    Column("base_cost_nanos", BigInteger, nullable=False),
    Column("rate_nanos", BigInteger, nullable=False),
    Column("amount_nanos", BigInteger, nullable=False),
    Column("created_at", UTCDateTime, nullable=False),
)
Index("ix_referral_commissions_referrer", referral_commissions.c.referrer_id,
      referral_commissions.c.id)

# --- passkeys and sign-in challenges ----------------------------------------------------------

passkeys = Table(
    "passkeys", metadata,
    _id(),
    Column("user_id", Integer, ForeignKey("users.id", ondelete="CASCADE"), nullable=False),
    # base64url (no padding) of the raw credential id; unique across all users
    Column("credential_id", String(1400), nullable=False, unique=True),
    # base64url of the COSE public key
    Column("public_key", Text, nullable=False),
    Column("name", String(100), nullable=False),
    Column("sign_count", BigInteger, nullable=False, server_default=ZERO),
    Column("last_used_at", UTCDateTime, nullable=True),
    *_timestamps(),
)
Index("ix_passkeys_user", passkeys.c.user_id)

auth_challenges = Table(
    "auth_challenges", metadata,
    _id(),
    # the passkey challenge or OIDC state (single use: consumed by a conditional DELETE)
    Column("key", String(128), nullable=False, unique=True),
    # passkey_register | passkey_login | oidc_login | oidc_bind
    Column("purpose", String(32), nullable=False),
    # the user the challenge is bound to (0 = bound to no account); no FK: rows live minutes
    Column("user_id", Integer, nullable=True),
    Column("data", JSONText, nullable=False),
    Column("expires_at", UTCDateTime, nullable=False),
    Column("created_at", UTCDateTime, nullable=False),
)
Index("ix_auth_challenges_expiry", auth_challenges.c.expires_at)

# --- operations -----------------------------------------------------------------------------

announcements = Table(
    "announcements", metadata,
    _id(),
    Column("title", String(120), nullable=False),
    Column("content", Text, nullable=False),
    Column("enabled", Boolean, nullable=False, server_default=TRUE),
    Column("sort_order", Integer, nullable=False, server_default=ZERO),
    *_timestamps(),
)
Index("ix_announcements_order", announcements.c.sort_order, announcements.c.created_at)

# --- operations -----------------------------------------------------------------------------

status_monitors = Table(
    "status_monitors", metadata,
    _id(),
    Column("name", String(100), nullable=False),
    Column("target_url", Text, nullable=False),
    # http | tcp
    Column("check_type", String(8), nullable=False, server_default="http"),
    Column("method", String(8), nullable=False, server_default="GET"),
    Column("interval_seconds", Integer, nullable=False, server_default=text("60")),
    Column("retention_hours", Integer, nullable=False, server_default=text("168")),
    Column("enabled", Boolean, nullable=False, server_default=TRUE),
    # pending | up | down
    Column("last_status", String(16), nullable=False, server_default="pending"),
    Column("last_latency_ms", Integer, nullable=False, server_default=ZERO),
    Column("last_status_code", Integer, nullable=False, server_default=ZERO),
    Column("last_message", Text, nullable=False, server_default=""),
    Column("last_checked_at", UTCDateTime, nullable=True),
    *_timestamps(),
)

status_checks = Table(
    "status_checks", metadata,
    Column("id", BigInteger().with_variant(Integer, "sqlite"), primary_key=True,
           autoincrement=True),
    Column("monitor_id", Integer, ForeignKey("status_monitors.id", ondelete="CASCADE"),
           nullable=False),
    Column("status", String(16), nullable=False),
    Column("latency_ms", Integer, nullable=False, server_default=ZERO),
    Column("status_code", Integer, nullable=False, server_default=ZERO),
    Column("message", Text, nullable=False, server_default=""),
    Column("checked_at", UTCDateTime, nullable=False),
)
Index("ix_status_checks_monitor_time", status_checks.c.monitor_id, status_checks.c.checked_at)

# --- async tasks (gateway/tasks) -------------------------------------------------------------

tasks = Table(
    "tasks", metadata,
    # our public id ("vtask_" + 32 hex); the upstream id is never shown in its place
    Column("id", String(64), primary_key=True),
    Column("user_id", Integer, ForeignKey("users.id", ondelete="CASCADE"), nullable=False),
    Column("api_key_id", Integer, nullable=True),
    # video | compat
    Column("family", String(16), nullable=False),
    # image | video | artjob
    Column("kind", String(16), nullable=False),
    Column("user_channel_id", Integer, nullable=True),
    Column("channel_id", Integer, nullable=True),
    Column("config_id", Integer, nullable=True),
    Column("model_name", String(200), nullable=False),
    Column("upstream_task_id", String(255), nullable=False, server_default=""),
    # the exact upstream status path (GET), fixed at creation; "" = never polled
    Column("status_path", Text, nullable=False, server_default=""),
    # queued | processing | succeeded | failed | cancelled | expired (normalised)
    Column("status", String(32), nullable=False),
    Column("upstream_status", String(64), nullable=False, server_default=""),
    Column("progress", Integer, nullable=True),
    # held at submit; charged = kept; refunded once on failure (ledger task_refund)
    Column("cost_nanos", BigInteger, nullable=False, server_default=ZERO),
    Column("charged_nanos", BigInteger, nullable=False, server_default=ZERO),
    Column("refunded_nanos", BigInteger, nullable=False, server_default=ZERO),
    # the part of the charge paid from subscription quota (not refunded to the wallet)
    Column("subscription_nanos", BigInteger, nullable=False, server_default=ZERO),
    # held | settled | refunded
    Column("billing_state", String(16), nullable=False, server_default="held"),
    Column("request", JSONText, nullable=True),
    Column("first_response", JSONText, nullable=True),
    Column("last_response", JSONText, nullable=True),
    Column("error", Text, nullable=False, server_default=""),
    Column("next_poll_at", UTCDateTime, nullable=True),
    Column("poll_attempts", Integer, nullable=False, server_default=ZERO),
    Column("poll_errors", Integer, nullable=False, server_default=ZERO),
    Column("lease_owner", String(64), nullable=True),
    Column("lease_until", UTCDateTime, nullable=True),
    Column("expires_at", UTCDateTime, nullable=False),
    Column("completed_at", UTCDateTime, nullable=True),
    *_timestamps(),
)
Index("ix_tasks_due", tasks.c.status, tasks.c.next_poll_at)
Index("ix_tasks_user", tasks.c.user_id, tasks.c.created_at)


# --- meta models (console contract §6.3) ----------------------------------------------------

meta_models = Table(
    "meta_models", metadata,
    _id(),
    # the public model name clients send (unique among meta and global models)
    Column("model_name", String(100), nullable=False, unique=True),
    # the label (``name`` on the wire; the spec's ``name`` is this, D9)
    Column("name", String(100), nullable=False),
    Column("description", Text, nullable=False, server_default=""),
    # the program as source text (a plan object sent as ``definition`` is stored rendered)
    Column("dsl", Text, nullable=False),
    Column("provider", String(100), nullable=False, server_default="meta"),
    Column("provider_name", String(100), nullable=False, server_default="Meta Module"),
    Column("provider_icon_url", Text, nullable=False, server_default=""),
    Column("expose_referenced_models", Boolean, nullable=False, server_default=TRUE),
    # actual | meta
    Column("billing_mode", String(16), nullable=False, server_default="actual"),
    Column("input_price_nanos", BigInteger, nullable=False, server_default=ZERO),
    Column("output_price_nanos", BigInteger, nullable=False, server_default=ZERO),
    Column("cached_input_price_nanos", BigInteger, nullable=False, server_default=ZERO),
    Column("enabled", Boolean, nullable=False, server_default=TRUE),
    *_timestamps(),
)


# --- agent links: connector devices, their tasks, sandbox hosts (agents contract §1.13, §2, §3)

connector_devices = Table(
    "connector_devices", metadata,
    # "acd-…" (contract §0.1)
    Column("id", String(32), primary_key=True),
    Column("user_id", Integer, ForeignKey("users.id", ondelete="CASCADE"), nullable=False),
    Column("name", String(120), nullable=False),
    Column("remark", String(200), nullable=False, server_default=""),
    # sha256 hex of the trimmed token; the plaintext is never stored
    Column("token_hash", String(64), nullable=False, unique=True),
    Column("hostname", String(120), nullable=False, server_default=""),
    Column("os", String(40), nullable=False, server_default=""),
    Column("arch", String(40), nullable=False, server_default=""),
    Column("version", String(80), nullable=False, server_default=""),
    # cli | desktop
    Column("kind", String(16), nullable=False, server_default="cli"),
    Column("desktop_instance_id", String(120), nullable=False, server_default=""),
    # platform | web_server | sandboxd (sandboxd only for host devices, [P-20])
    Column("mode", String(16), nullable=False, server_default="platform"),
    Column("listen_port", Integer, nullable=False, server_default=ZERO),
    # host devices are hidden from device listings ([P-16])
    Column("hidden", Boolean, nullable=False, server_default=FALSE),
    # online | offline as last written; the online rule (§2.5) is computed on read
    Column("status", String(16), nullable=False, server_default="offline"),
    Column("last_seen_at", UTCDateTime, nullable=True),
    # the live WebSocket link holding the device ("<node>/<connection>"), None when none
    Column("link_id", String(96), nullable=True),
    Column("max_parallel", Integer, nullable=False, server_default=text("1")),
    Column("capabilities", JSONText, nullable=True),
    *_timestamps(),
)
Index("ix_connector_devices_user", connector_devices.c.user_id, connector_devices.c.last_seen_at)

connector_tasks = Table(
    "connector_tasks", metadata,
    # "act-…"
    Column("id", String(32), primary_key=True),
    # the owner (for sandbox tasks the sandbox owner, not the host admin)
    Column("user_id", Integer, ForeignKey("users.id", ondelete="CASCADE"), nullable=False),
    Column("device_id", String(32), ForeignKey("connector_devices.id", ondelete="CASCADE"),
           nullable=False),
    # empty for management / terminal / cleanup tasks
    Column("run_id", String(32), nullable=False, server_default=""),
    Column("tool_call_id", String(128), nullable=False, server_default=""),
    Column("action", String(64), nullable=False),
    # empty = unrestricted
    Column("workspace_path", Text, nullable=False, server_default=""),
    # the arguments object (input)
    Column("payload", JSONText, nullable=False),
    # the sandbox this task works in (also in the payload); empty for device tasks
    Column("cloud_sandbox_id", String(32), nullable=False, server_default=""),
    # pending_approval | queued | running | completed | failed
    Column("status", String(24), nullable=False),
    # normalized result text (§1.13) and the device's raw result fields (output)
    Column("result", Text, nullable=False, server_default=""),
    Column("output", JSONText, nullable=True),
    Column("error_message", Text, nullable=False, server_default=""),
    # who claimed it: "http" (long-poll) or the link id of the WebSocket that carried it
    Column("claimed_by", String(96), nullable=True),
    Column("started_at", UTCDateTime, nullable=True),
    Column("finished_at", UTCDateTime, nullable=True),
    *_timestamps(),
)
Index("ix_connector_tasks_queue", connector_tasks.c.device_id, connector_tasks.c.status,
      connector_tasks.c.created_at)
Index("ix_connector_tasks_run", connector_tasks.c.run_id, connector_tasks.c.created_at)
Index("ix_connector_tasks_claim", connector_tasks.c.claimed_by, connector_tasks.c.status)
Index("ix_connector_tasks_status", connector_tasks.c.status, connector_tasks.c.created_at)
Index("ix_connector_tasks_sandbox", connector_tasks.c.cloud_sandbox_id,
      connector_tasks.c.status)

sandbox_hosts = Table(
    "sandbox_hosts", metadata,
    # "ash-…"
    Column("id", String(32), primary_key=True),
    Column("name", String(120), nullable=False),
    Column("connector_device_id", String(32),
           ForeignKey("connector_devices.id", ondelete="CASCADE"), nullable=False, unique=True),
    # the admin who created it (owner of the hidden device)
    Column("created_by", Integer, ForeignKey("users.id", ondelete="CASCADE"), nullable=False),
    Column("enabled", Boolean, nullable=False, server_default=TRUE),
    # JSON text of an object (§3.2), kept as the admin sent it
    Column("security_policy", Text, nullable=False, server_default=""),
    Column("runtime_price_hour_nanos", BigInteger, nullable=False, server_default=ZERO),
    Column("cpu_price_hour_nanos", BigInteger, nullable=False, server_default=ZERO),
    Column("memory_price_gb_hour_nanos", BigInteger, nullable=False, server_default=ZERO),
    Column("storage_price_gb_hour_nanos", BigInteger, nullable=False, server_default=ZERO),
    Column("runtime_multiplier_nanos", BigInteger, nullable=False,
           server_default=text("1000000000")),
    # hello.capacity {cpu_cores, memory_mb, disk_gb} as last reported ([P-24]); None until then
    Column("reported_capacity", JSONText, nullable=True),
    Column("last_seen_at", UTCDateTime, nullable=True),
    *_timestamps(),
)

cloud_sandboxes = Table(
    "cloud_sandboxes", metadata,
    # "acs-…"
    Column("id", String(32), primary_key=True),
    Column("user_id", Integer, ForeignKey("users.id", ondelete="CASCADE"), nullable=False),
    Column("host_id", String(32), ForeignKey("sandbox_hosts.id", ondelete="CASCADE"),
           nullable=False),
    Column("name", String(120), nullable=False),
    Column("image", String(255), nullable=False),
    # decimal cores in nano-units (0.25 core = 250000000)
    Column("cpu_cores_nanos", BigInteger, nullable=False),
    Column("memory_mb", Integer, nullable=False),
    Column("disk_gb", Integer, nullable=False),
    # ready | deleted
    Column("status", String(16), nullable=False, server_default="ready"),
    Column("storage_charged_at", UTCDateTime, nullable=True),
    Column("deleted_at", UTCDateTime, nullable=True),
    *_timestamps(),
)
Index("ix_cloud_sandboxes_user", cloud_sandboxes.c.user_id, cloud_sandboxes.c.updated_at)
Index("ix_cloud_sandboxes_host", cloud_sandboxes.c.host_id, cloud_sandboxes.c.status)

sandbox_charges = Table(
    "sandbox_charges", metadata,
    # "asc-…"
    Column("id", String(32), primary_key=True),
    Column("user_id", Integer, ForeignKey("users.id", ondelete="CASCADE"), nullable=False),
    Column("sandbox_id", String(32), ForeignKey("cloud_sandboxes.id", ondelete="CASCADE"),
           nullable=False),
    Column("host_id", String(32), nullable=False),
    # runtime | storage
    Column("kind", String(16), nullable=False),
    # "task:<task id>" or "storage:<sandbox id>:<time>": unique, so nothing is charged twice
    Column("reference", String(200), nullable=False, unique=True),
    # minutes (runtime) or hours (storage) as an exact decimal string
    Column("quantity", String(64), nullable=False),
    Column("cost_nanos", BigInteger, nullable=False),
    # JSON text of the rates used
    Column("rate_snapshot", Text, nullable=False),
    Column("created_at", UTCDateTime, nullable=False),
)
Index("ix_sandbox_charges_sandbox", sandbox_charges.c.sandbox_id, sandbox_charges.c.created_at)


# --- assistant chat (agents contract §1) ----------------------------------------------------
# The admin settings are ``advanced_chat_<field>`` rows of ``settings`` (§1.1); what follows is
# per user.  String ids are the contract's ``<prefix>-<base32>`` ids (§0.1).

assistant_user_settings = Table(
    "assistant_user_settings", metadata,
    Column("user_id", Integer, ForeignKey("users.id", ondelete="CASCADE"), primary_key=True),
    Column("title_model_name", String(100), nullable=False, server_default=""),
    Column("title_user_channel_id", Integer, nullable=False, server_default=ZERO),
    # recent | all
    Column("title_generation_scope", String(16), nullable=False, server_default="recent"),
    Column("connector_approval_agent_id", String(32), nullable=False, server_default=""),
    # the user's custom MCP server items (§1.3), replaced as a whole list
    Column("custom_mcp_servers", JSONText, nullable=False, server_default="[]"),
    *_timestamps(),
)

assistant_agents = Table(
    "assistant_agents", metadata,
    _id(),
    Column("user_id", Integer, ForeignKey("users.id", ondelete="CASCADE"), nullable=False),
    # the user's always-present agent, answered as id "default" (§1.4)
    Column("is_default", Boolean, nullable=False, server_default=FALSE),
    Column("name", String(100), nullable=False),
    Column("description", Text, nullable=False, server_default=""),
    Column("prompt", Text, nullable=False, server_default=""),
    Column("default_model", String(100), nullable=False, server_default=""),
    Column("user_channel_id", Integer, nullable=False, server_default=ZERO),
    Column("stream", Boolean, nullable=False, server_default=FALSE),
    Column("enabled", Boolean, nullable=False, server_default=TRUE),
    Column("visibility", String(16), nullable=False, server_default="personal"),
    Column("skill_ids", JSONText, nullable=False, server_default="[]"),
    Column("mcp_server_ids", JSONText, nullable=False, server_default="[]"),
    Column("knowledge_base_ids", JSONText, nullable=False, server_default="[]"),
    Column("preset_messages", JSONText, nullable=False, server_default="[]"),
    # allowed tool groups ([P-4]); empty = all
    Column("tools", JSONText, nullable=False, server_default="[]"),
    *_timestamps(),
    UniqueConstraint("user_id", "name", name="uq_assistant_agents_user_name"),
)

assistant_skills = Table(
    "assistant_skills", metadata,
    _id(),
    Column("user_id", Integer, ForeignKey("users.id", ondelete="CASCADE"), nullable=False),
    Column("name", String(100), nullable=False),
    Column("description", Text, nullable=False, server_default=""),
    Column("prompt", Text, nullable=False, server_default=""),
    Column("content", Text, nullable=False, server_default=""),
    Column("enabled", Boolean, nullable=False, server_default=TRUE),
    Column("mcp_server_ids", JSONText, nullable=False, server_default="[]"),
    *_timestamps(),
    UniqueConstraint("user_id", "name", name="uq_assistant_skills_user_name"),
)

assistant_sessions = Table(
    "assistant_sessions", metadata,
    # client-chosen (<= 80 chars) or ``acs-...``; unique across users (409 when taken, §1.6)
    Column("id", String(80), primary_key=True),
    Column("user_id", Integer, ForeignKey("users.id", ondelete="CASCADE"), nullable=False),
    Column("title", String(200), nullable=False, server_default=""),
    # chat | assistant | agent_group
    Column("run_mode", String(16), nullable=False, server_default="chat"),
    Column("agent_id", String(32), nullable=False, server_default=""),
    Column("agent_group_id", String(80), nullable=False, server_default=""),
    Column("skill_ids", JSONText, nullable=False, server_default="[]"),
    Column("mcp_server_ids", JSONText, nullable=False, server_default="[]"),
    Column("knowledge_base_ids", JSONText, nullable=False, server_default="[]"),
    Column("connector_device_id", String(80), nullable=False, server_default=""),
    Column("connector_workspace_path", Text, nullable=False, server_default=""),
    Column("cloud_sandbox_id", String(80), nullable=False, server_default=""),
    # manual | full_access | assistant
    Column("connector_approval_mode", String(16), nullable=False, server_default="manual"),
    Column("connector_command_prefixes", JSONText, nullable=False, server_default="[]"),
    Column("model_name", String(100), nullable=False, server_default=""),
    Column("user_channel_id", Integer, nullable=False, server_default=ZERO),
    Column("max_tokens", Integer, nullable=False, server_default=ZERO),
    # a sampling knob (0..2), not money; kept as JSON so 0.7 round-trips as written
    Column("temperature", JSONText, nullable=True),
    Column("reasoning_effort", String(16), nullable=False, server_default=""),
    Column("auto_compress_context", Boolean, nullable=False, server_default=FALSE),
    Column("disabled_tool_groups", JSONText, nullable=False, server_default="[]"),
    Column("folder_id", String(80), nullable=False, server_default=""),
    Column("metadata", JSONText, nullable=False, server_default="{}"),
    # internal studio work sessions are read-only through the chat routes (§1.6, §4.16)
    Column("internal", Boolean, nullable=False, server_default=FALSE),
    *_timestamps(),
)
Index("ix_assistant_sessions_user", assistant_sessions.c.user_id,
      assistant_sessions.c.updated_at)

assistant_messages = Table(
    "assistant_messages", metadata,
    Column("session_id", String(80), ForeignKey("assistant_sessions.id", ondelete="CASCADE"),
           primary_key=True),
    # a client id kept as given when valid, else ``acm-...``; unique within its session
    Column("id", String(80), primary_key=True),
    Column("position", Integer, nullable=False),
    # user | assistant
    Column("role", String(16), nullable=False),
    Column("content", Text, nullable=False, server_default=""),
    Column("content_parts", JSONText, nullable=False, server_default="[]"),
    Column("tool_calls", JSONText, nullable=False, server_default="[]"),
    *_timestamps(),
)
Index("ix_assistant_messages_position", assistant_messages.c.session_id,
      assistant_messages.c.position)

assistant_runs = Table(
    "assistant_runs", metadata,
    Column("id", String(32), primary_key=True),
    Column("user_id", Integer, ForeignKey("users.id", ondelete="CASCADE"), nullable=False),
    Column("session_id", String(80), ForeignKey("assistant_sessions.id", ondelete="CASCADE"),
           nullable=False),
    Column("assistant_message_id", String(80), nullable=False),
    # assistant | agent_group
    Column("mode", String(16), nullable=False),
    # queued | running | completed | failed | cancelled (guarded transitions, §1.9)
    Column("status", String(16), nullable=False, server_default="queued"),
    Column("status_message", String(64), nullable=False, server_default=""),
    Column("current_round", Integer, nullable=False, server_default=ZERO),
    Column("error_message", Text, nullable=False, server_default=""),
    Column("cost_nanos", BigInteger, nullable=False, server_default=ZERO),
    Column("tool_calls", Integer, nullable=False, server_default=ZERO),
    Column("tool_call_details", JSONText, nullable=False, server_default="[]"),
    # everything the background worker needs to run it on any node (prepared request)
    Column("request", JSONText, nullable=False, server_default="{}"),
    # the node working it and until when its lease holds (a dead node's run fails, §1.9)
    Column("node_name", String(100), nullable=False, server_default=""),
    Column("lease_expires_at", UTCDateTime, nullable=True),
    Column("deadline_at", UTCDateTime, nullable=True),
    Column("started_at", UTCDateTime, nullable=True),
    Column("finished_at", UTCDateTime, nullable=True),
    *_timestamps(),
)
Index("ix_assistant_runs_session", assistant_runs.c.session_id, assistant_runs.c.status)
Index("ix_assistant_runs_user", assistant_runs.c.user_id, assistant_runs.c.status)

assistant_run_events = Table(
    "assistant_run_events", metadata,
    Column("id", BigInteger().with_variant(Integer, "sqlite"), primary_key=True,
           autoincrement=True),
    Column("run_id", String(32), ForeignKey("assistant_runs.id", ondelete="CASCADE"),
           nullable=False),
    Column("session_id", String(80), nullable=False),
    # 1, 2, 3 ... per run
    Column("seq", Integer, nullable=False),
    Column("event", String(32), nullable=False),
    Column("payload", JSONText, nullable=False, server_default="{}"),
    Column("created_at", UTCDateTime, nullable=False),
    UniqueConstraint("run_id", "seq", name="uq_assistant_run_events_run_seq"),
)


# --- studio operations (agents contract §4) -------------------------------------------------
# A studio (§4.1) is a user's team of chat agents; its operations record ("personal company",
# §4.3) and everything under it hang off ``studio_companies``.  Money is nano-units; the
# contract's JSON-text fields (§4.3) are ``Text`` columns holding canonical JSON text, because
# they are returned as strings, not parsed values.

studios = Table(
    "studios", metadata,
    Column("user_id", Integer, ForeignKey("users.id", ondelete="CASCADE"), primary_key=True),
    # caller-chosen ``^[A-Za-z0-9_-]{1,80}$`` or ``agp-...``; unique per user (§4.1)
    Column("id", String(80), primary_key=True),
    Column("name", String(200), nullable=False),
    Column("description", Text, nullable=False, server_default=""),
    # the members, in order: [{id, name, type, prompt, chat_agent_id, ...}]
    Column("agents", JSONText, nullable=False, server_default="[]"),
    *_timestamps(),
)

studio_companies = Table(
    "studio_companies", metadata,
    _id(),
    Column("owner_user_id", Integer, ForeignKey("users.id", ondelete="CASCADE"), nullable=False),
    Column("agent_group_id", String(80), nullable=False),
    Column("name", String(160), nullable=False),
    # draft | bootstrap | operating | attention_required | paused | safe_mode | archived (§4.4)
    Column("state", String(24), nullable=False, server_default="operating"),
    Column("timezone", String(80), nullable=False, server_default="UTC"),
    Column("autonomy_level", String(4), nullable=False, server_default="r0"),
    Column("daily_budget_nanos", BigInteger, nullable=False, server_default=ZERO),
    Column("monthly_budget_nanos", BigInteger, nullable=False, server_default=ZERO),
    Column("balance_floor_nanos", BigInteger, nullable=False, server_default=ZERO),
    Column("charter_revision_id", Integer, nullable=True),
    Column("connector_device_id", String(80), nullable=False, server_default=""),
    Column("connector_workspace_path", Text, nullable=False, server_default=""),
    Column("connector_command_prefixes", Text, nullable=False, server_default="[]"),
    Column("cloud_sandbox_id", String(80), nullable=False, server_default=""),
    Column("max_concurrent_tasks", Integer, nullable=False, server_default=text("1")),
    Column("paused_at", UTCDateTime, nullable=True),
    *_timestamps(),
    UniqueConstraint("owner_user_id", "agent_group_id",
                     name="uq_studio_companies_owner_studio"),
)

studio_charters = Table(
    "studio_charters", metadata,
    _id(),
    Column("personal_company_id", Integer,
           ForeignKey("studio_companies.id", ondelete="CASCADE"), nullable=False),
    Column("revision", Integer, nullable=False),
    Column("mission", Text, nullable=False),
    Column("goals", Text, nullable=False, server_default="[]"),
    Column("data_boundaries", Text, nullable=False, server_default="[]"),
    Column("prohibited_actions", Text, nullable=False, server_default="[]"),
    Column("approval_policy", Text, nullable=False),
    Column("created_by_user_id", Integer, nullable=False),
    Column("created_at", UTCDateTime, nullable=False),
    UniqueConstraint("personal_company_id", "revision", name="uq_studio_charters_revision"),
)

studio_objectives = Table(
    "studio_objectives", metadata,
    _id(),
    Column("personal_company_id", Integer,
           ForeignKey("studio_companies.id", ondelete="CASCADE"), nullable=False),
    Column("owner_user_id", Integer, nullable=False),
    Column("title", String(200), nullable=False),
    Column("description", Text, nullable=False, server_default=""),
    # active | paused | completed | archived
    Column("status", String(16), nullable=False, server_default="active"),
    Column("priority", Integer, nullable=False, server_default=ZERO),
    Column("target_date", UTCDateTime, nullable=True),
    *_timestamps(),
)

studio_work_items = Table(
    "studio_work_items", metadata,
    _id(),
    Column("personal_company_id", Integer,
           ForeignKey("studio_companies.id", ondelete="CASCADE"), nullable=False),
    Column("owner_user_id", Integer, nullable=False),
    Column("objective_id", Integer, ForeignKey("studio_objectives.id", ondelete="SET NULL"),
           nullable=True),
    Column("title", String(200), nullable=False),
    Column("description", Text, nullable=False, server_default=""),
    Column("definition_of_done", Text, nullable=False, server_default=""),
    # §4.10 statuses
    Column("status", String(24), nullable=False, server_default="queued"),
    Column("priority", Integer, nullable=False, server_default=ZERO),
    Column("risk_level", String(4), nullable=False, server_default="r0"),
    Column("idempotency_key", String(100), nullable=False),
    Column("input_snapshot", Text, nullable=False, server_default="{}"),
    Column("allowed_tools", Text, nullable=False, server_default="[]"),
    Column("assigned_employee_id", Integer, nullable=True),
    Column("reviewer_employee_id", Integer, nullable=True),
    # the charter revision in force when the item was created
    Column("charter_revision_id", Integer, nullable=True),
    Column("estimated_cost_nanos", BigInteger, nullable=False, server_default=ZERO),
    Column("reserved_cost_nanos", BigInteger, nullable=False, server_default=ZERO),
    Column("consumed_cost_nanos", BigInteger, nullable=False, server_default=ZERO),
    Column("due_at", UTCDateTime, nullable=True),
    *_timestamps(),
    UniqueConstraint("personal_company_id", "idempotency_key",
                     name="uq_studio_work_items_idempotency_key"),
)
Index("ix_studio_work_items_status", studio_work_items.c.personal_company_id,
      studio_work_items.c.status)

studio_work_attempts = Table(
    "studio_work_attempts", metadata,
    _id(),
    Column("work_item_id", Integer, ForeignKey("studio_work_items.id", ondelete="CASCADE"),
           nullable=False),
    # denormalized so a studio's executing attempts are one indexed read (pause, slots)
    Column("personal_company_id", Integer, nullable=False),
    Column("attempt_number", Integer, nullable=False),
    Column("advanced_chat_run_id", String(32), nullable=False, server_default=""),
    # execution | review
    Column("kind", String(16), nullable=False),
    # executing | awaiting_review | verified | blocked | retryable_failure | dead_letter |
    # cancelled
    Column("status", String(24), nullable=False, server_default="executing"),
    # never exposed; guards lease renewal/recovery against a stale holder
    Column("lease_token", String(64), nullable=False, server_default=""),
    Column("lease_expires_at", UTCDateTime, nullable=True),
    Column("started_at", UTCDateTime, nullable=True),
    Column("finished_at", UTCDateTime, nullable=True),
    Column("input_snapshot", Text, nullable=False, server_default="{}"),
    Column("result_summary", Text, nullable=False, server_default=""),
    Column("cost_nanos", BigInteger, nullable=False, server_default=ZERO),
    *_timestamps(),
    UniqueConstraint("work_item_id", "attempt_number", name="uq_studio_work_attempts_number"),
)
Index("ix_studio_work_attempts_status", studio_work_attempts.c.personal_company_id,
      studio_work_attempts.c.status)
Index("ix_studio_work_attempts_run", studio_work_attempts.c.advanced_chat_run_id)

studio_artifacts = Table(
    "studio_artifacts", metadata,
    _id(),
    Column("work_item_id", Integer, ForeignKey("studio_work_items.id", ondelete="CASCADE"),
           nullable=False),
    Column("work_attempt_id", Integer, nullable=True),
    Column("kind", String(40), nullable=False),
    Column("uri", Text, nullable=False, server_default=""),
    Column("content_hash", String(64), nullable=False, server_default=""),
    Column("source", String(40), nullable=False, server_default=""),
    # pending | verified
    Column("acceptance_state", String(16), nullable=False, server_default="pending"),
    Column("created_at", UTCDateTime, nullable=False),
)

studio_employees = Table(
    "studio_employees", metadata,
    _id(),
    Column("personal_company_id", Integer,
           ForeignKey("studio_companies.id", ondelete="CASCADE"), nullable=False),
    Column("employee_key", String(80), nullable=False),
    Column("advanced_chat_agent_id", String(32), nullable=False, server_default=""),
    Column("name", String(200), nullable=False),
    Column("role", String(80), nullable=False, server_default="candidate"),
    # probation | active | suspended | retired
    Column("status", String(16), nullable=False, server_default="probation"),
    Column("version", Integer, nullable=False, server_default=text("1")),
    Column("allowed_tools", Text, nullable=False, server_default="[]"),
    Column("data_scope", Text, nullable=False, server_default="{}"),
    Column("max_risk_level", String(4), nullable=False, server_default="r0"),
    Column("max_concurrency", Integer, nullable=False, server_default=text("1")),
    *_timestamps(),
    UniqueConstraint("personal_company_id", "employee_key", name="uq_studio_employees_key"),
)

studio_employee_versions = Table(
    "studio_employee_versions", metadata,
    _id(),
    Column("employee_id", Integer, ForeignKey("studio_employees.id", ondelete="CASCADE"),
           nullable=False),
    Column("version", Integer, nullable=False),
    Column("prompt_profile", String(120), nullable=False, server_default=""),
    Column("model_policy", Text, nullable=False, server_default="{}"),
    Column("tool_grants", Text, nullable=False, server_default="[]"),
    Column("data_scope", Text, nullable=False, server_default="{}"),
    Column("skill_scope", Text, nullable=False, server_default="[]"),
    # connector device / workspace / prefixes / cloud sandbox of a runtime binding
    Column("runtime_policy", Text, nullable=False, server_default="{}"),
    Column("created_at", UTCDateTime, nullable=False),
    UniqueConstraint("employee_id", "version", name="uq_studio_employee_versions_version"),
)

studio_capability_evidence = Table(
    "studio_capability_evidence", metadata,
    _id(),
    Column("employee_id", Integer, ForeignKey("studio_employees.id", ondelete="CASCADE"),
           nullable=False),
    Column("employee_version", Integer, nullable=False),
    Column("capability", String(200), nullable=False),
    Column("evidence_uri", Text, nullable=False),
    Column("evaluation_summary", Text, nullable=False, server_default=""),
    # 0..1, kept as minimal decimal text so it round-trips exactly
    Column("score", String(24), nullable=False),
    Column("confidence", String(24), nullable=False),
    Column("valid_until", UTCDateTime, nullable=True),
    Column("created_at", UTCDateTime, nullable=False),
)

studio_handoffs = Table(
    "studio_handoffs", metadata,
    _id(),
    Column("work_item_id", Integer, ForeignKey("studio_work_items.id", ondelete="CASCADE"),
           nullable=False),
    Column("work_attempt_id", Integer, nullable=True),
    Column("from_employee_id", Integer, nullable=True),
    Column("to_employee_id", Integer, nullable=True),
    # pending | accepted | rejected | needs_revision
    Column("status", String(16), nullable=False, server_default="pending"),
    Column("completion_summary", Text, nullable=False),
    Column("evidence", Text, nullable=False, server_default="[]"),
    Column("risks", Text, nullable=False, server_default="[]"),
    Column("next_steps", Text, nullable=False),
    Column("decision_note", Text, nullable=False, server_default=""),
    Column("accepted_at", UTCDateTime, nullable=True),
    *_timestamps(),
)

studio_approvals = Table(
    "studio_approvals", metadata,
    _id(),
    Column("personal_company_id", Integer,
           ForeignKey("studio_companies.id", ondelete="CASCADE"), nullable=False),
    # one approval per work item (§4.12)
    Column("work_item_id", Integer, ForeignKey("studio_work_items.id", ondelete="CASCADE"),
           nullable=False, unique=True),
    Column("risk_level", String(4), nullable=False),
    # pending | approved | rejected | expired
    Column("status", String(16), nullable=False, server_default="pending"),
    Column("requested_action", Text, nullable=False, server_default=""),
    Column("parameters_hash", String(64), nullable=False, server_default=""),
    Column("decision_reason", Text, nullable=False, server_default=""),
    Column("decided_by_user_id", Integer, nullable=True),
    Column("decided_at", UTCDateTime, nullable=True),
    Column("expires_at", UTCDateTime, nullable=True),
    *_timestamps(),
)

studio_role_templates = Table(
    "studio_role_templates", metadata,
    _id(),
    Column("personal_company_id", Integer,
           ForeignKey("studio_companies.id", ondelete="CASCADE"), nullable=False),
    Column("template_key", String(80), nullable=False),
    Column("name", String(160), nullable=False),
    Column("responsibilities", Text, nullable=False, server_default=""),
    Column("definition_of_done", Text, nullable=False),
    Column("required_skills", Text, nullable=False, server_default="[]"),
    Column("allowed_tools", Text, nullable=False, server_default="[]"),
    Column("max_risk_level", String(4), nullable=False, server_default="r0"),
    Column("max_concurrency", Integer, nullable=False, server_default=text("1")),
    *_timestamps(),
    UniqueConstraint("personal_company_id", "template_key", name="uq_studio_role_templates_key"),
)

studio_recruitment_plans = Table(
    "studio_recruitment_plans", metadata,
    _id(),
    Column("personal_company_id", Integer,
           ForeignKey("studio_companies.id", ondelete="CASCADE"), nullable=False),
    Column("role_template_id", Integer, nullable=True),
    Column("title", String(200), nullable=False),
    Column("capability_gap", Text, nullable=False),
    Column("expected_benefit", Text, nullable=False, server_default=""),
    Column("max_risk_level", String(4), nullable=False, server_default="r0"),
    Column("proposed_tools", Text, nullable=False, server_default="[]"),
    # proposed | approved | rejected | hired
    Column("status", String(16), nullable=False, server_default="proposed"),
    Column("decision_reason", Text, nullable=False, server_default=""),
    Column("employee_id", Integer, nullable=True),
    Column("decided_at", UTCDateTime, nullable=True),
    *_timestamps(),
)

studio_budget_ledger = Table(
    "studio_budget_ledger", metadata,
    Column("id", BigInteger().with_variant(Integer, "sqlite"), primary_key=True,
           autoincrement=True),
    Column("personal_company_id", Integer,
           ForeignKey("studio_companies.id", ondelete="CASCADE"), nullable=False),
    Column("work_item_id", Integer, nullable=True),
    # reservation (+) | release (-) | consumption (+), append-only (§4.11)
    Column("entry_type", String(16), nullable=False),
    Column("amount_nanos", BigInteger, nullable=False),
    Column("reference", String(80), nullable=False, server_default=""),
    Column("created_at", UTCDateTime, nullable=False),
)
Index("ix_studio_budget_ledger_company", studio_budget_ledger.c.personal_company_id,
      studio_budget_ledger.c.created_at)

studio_signals = Table(
    "studio_signals", metadata,
    Column("id", BigInteger().with_variant(Integer, "sqlite"), primary_key=True,
           autoincrement=True),
    Column("personal_company_id", Integer,
           ForeignKey("studio_companies.id", ondelete="CASCADE"), nullable=False),
    Column("work_item_id", Integer, nullable=True),
    Column("kind", String(60), nullable=False),
    # inbox | triaged
    Column("status", String(16), nullable=False, server_default="inbox"),
    Column("payload", Text, nullable=False, server_default="{}"),
    Column("triaged_at", UTCDateTime, nullable=True),
    Column("created_at", UTCDateTime, nullable=False),
)
Index("ix_studio_signals_status", studio_signals.c.personal_company_id, studio_signals.c.status)

studio_outbox = Table(
    "studio_outbox", metadata,
    Column("id", BigInteger().with_variant(Integer, "sqlite"), primary_key=True,
           autoincrement=True),
    Column("personal_company_id", Integer,
           ForeignKey("studio_companies.id", ondelete="CASCADE"), nullable=False),
    Column("event_key", String(120), nullable=False),
    Column("event_type", String(60), nullable=False),
    Column("payload", Text, nullable=False, server_default="{}"),
    Column("created_at", UTCDateTime, nullable=False),
    UniqueConstraint("personal_company_id", "event_key", name="uq_studio_outbox_key"),
)

studio_audit_events = Table(
    "studio_audit_events", metadata,
    Column("id", BigInteger().with_variant(Integer, "sqlite"), primary_key=True,
           autoincrement=True),
    Column("personal_company_id", Integer,
           ForeignKey("studio_companies.id", ondelete="CASCADE"), nullable=False),
    Column("work_item_id", Integer, nullable=True),
    # owner | system | chief | worker | reviewer
    Column("actor_type", String(16), nullable=False),
    Column("actor_id", String(80), nullable=False, server_default=""),
    Column("event_type", String(60), nullable=False),
    Column("payload", Text, nullable=False, server_default="{}"),
    Column("created_at", UTCDateTime, nullable=False),
)
Index("ix_studio_audit_events_item", studio_audit_events.c.personal_company_id,
      studio_audit_events.c.work_item_id)

# one row per cluster-wide job lease (the studio control loop, §4.8): who holds it until when
studio_scheduler_leases = Table(
    "studio_scheduler_leases", metadata,
    Column("name", String(40), primary_key=True),
    Column("holder", String(100), nullable=False, server_default=""),
    Column("expires_at", UTCDateTime, nullable=True),
)
