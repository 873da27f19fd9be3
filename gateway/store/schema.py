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
    *_timestamps(),
)
Index("ix_orders_user_time", orders.c.user_id, orders.c.created_at)
Index("ix_orders_status_expiry", orders.c.status, orders.c.expires_at)
