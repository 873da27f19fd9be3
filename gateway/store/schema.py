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
    String,
    Table,
    Text,
    UniqueConstraint,
    text,
)

from gateway.store.schema_base import FALSE, NAMING, TRUE, ZERO, _id, _timestamps, metadata
from gateway.store.types import JSONText, UTCDateTime

__all__ = ["FALSE", "NAMING", "TRUE", "ZERO", "metadata"]

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
# a model filter paired with a user or a channel counts through these (migration 0010)
Index("ix_usage_logs_user_model_time", usage_logs.c.user_id, usage_logs.c.model_name,
      usage_logs.c.created_at)
Index("ix_usage_logs_channel_model_time", usage_logs.c.channel_id, usage_logs.c.model_name,
      usage_logs.c.created_at)

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


# Feature areas with their own table modules (imported last: they build on the names above).
from gateway.store.schema_assistant import *  # noqa: E402,F403
from gateway.store.schema_links import *  # noqa: E402,F403
from gateway.store.schema_rollups import *  # noqa: E402,F403
from gateway.store.schema_studio import *  # noqa: E402,F403
