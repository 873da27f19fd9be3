"""Operational settings: rate limits, reliability, log retention, content filters, SSRF policy,
auto-update, Redis, multi-node and async-task upstreams (console contract §5.4).

Cross-key rules (Redis needs an address, multi-node needs a node name) are checked by
``catalog_update`` once the whole PUT body is known.
"""

from __future__ import annotations

from gateway.settings.spec import Check, SettingError, Spec, http_url, int_range, one_of

MILLION = 1_000_000
#: what an upstream path prefix may never contain ("//" could name another host)
_FORBIDDEN = ("..", "?", "#", "\\", "//")


def _printable(text: str) -> bool:
    return all(ch.isprintable() and not ch.isspace() for ch in text)


def path_prefix(key: str) -> Check:
    """An upstream path prefix (gateway contract §0, §13.5): "/x[/y]", no query, fragment or
    "..", stored without a trailing slash so joining it with "/<rest>" is unambiguous."""

    def check(text: str) -> str:
        prefix = text.rstrip("/")
        if not text.startswith("/") or not prefix or len(prefix) > 200 \
                or any(part in prefix for part in _FORBIDDEN) or not _printable(prefix):
            raise SettingError(key, f"{key} must be a path starting with / (no '..', '?' "
                                    "or '#')")
        return prefix

    return check


def model_name(key: str) -> Check:
    """A default model name: non-empty, printable, no whitespace, at most 255 characters."""

    def check(text: str) -> str:
        if not text or len(text) > 255 or not _printable(text):
            raise SettingError(key, f"{key} must be a non-empty model name without spaces")
        return text

    return check


def specs() -> list[Spec]:
    return [
        Spec("rate_limit_enabled", "bool", "true", public=True),
        Spec("rate_limit_requests_per_minute", "text", "60", public=True,
             check=int_range("rate_limit_requests_per_minute", 0, MILLION)),
        Spec("rate_limit_burst", "text", "10", public=True,
             check=int_range("rate_limit_burst", 0, MILLION)),
        Spec("reliability_auto_disable_enabled", "bool", "false", public=True),
        Spec("reliability_disable_after_failures", "text", "3", public=True,
             check=int_range("reliability_disable_after_failures", 1, 10_000)),
        Spec("reliability_auto_detect_upstream_enabled", "bool", "false", public=True),
        Spec("reliability_auto_detect_interval_seconds", "text", "300", public=True,
             check=int_range("reliability_auto_detect_interval_seconds", 10, 86400)),
        Spec("reliability_auto_detect_timeout_seconds", "text", "10", public=True,
             check=int_range("reliability_auto_detect_timeout_seconds", 1, 600)),
        Spec("reliability_auto_recover_enabled", "bool", "false", public=True),
        Spec("reliability_recovery_after_seconds", "text", "1800", public=True,
             check=int_range("reliability_recovery_after_seconds", 1, 30 * 86400)),
        *(Spec(f"log_retention_{kind}_days", "text", "0", public=True,
               check=int_range(f"log_retention_{kind}_days", 0, 3650))
          for kind in ("api", "login", "admin", "system", "token")),
        Spec("log_retention_cleanup_interval_hours", "text", "24", public=True,
             check=int_range("log_retention_cleanup_interval_hours", 1, 8760)),
        Spec("log_storage_mode", "text", "single", public=True,
             check=one_of("log_storage_mode", ("single", "daily"),
                          "Log storage mode must be single or daily")),
        Spec("log_retention_days", "text", "30", public=True,
             check=int_range("log_retention_days", 1, 3650,
                             "Log retention must be between 1 and 3650 days")),
        Spec("sensitive_filter_enabled", "bool", "false", public=True),
        Spec("sensitive_words", "text", "", writeonly=True),
        Spec("sensitive_filter_scope", "text", "request", public=True),
        Spec("ssrf_protection_enabled", "bool", "true", public=True),
        Spec("ssrf_allow_private_networks", "bool", "false", public=True),
        Spec("ssrf_allowed_hosts", "text", ""),
        Spec("auto_update_enabled", "bool", "false", public=True),
        Spec("auto_update_interval_hours", "text", "24", public=True,
             check=int_range("auto_update_interval_hours", 1, 168,
                             "Auto update interval must be between 1 and 168 hours")),
        Spec("auto_update_release_url", "text", "", check=http_url("auto_update_release_url")),
        Spec("auto_update_latest_version", "text", "", internal=True),
        Spec("auto_update_last_checked_at", "text", "", internal=True),
        Spec("auto_update_last_error", "text", "", internal=True),
        Spec("redis_enabled", "bool", "false"),
        Spec("redis_tls_enabled", "bool", "false"),
        Spec("redis_address", "text", "127.0.0.1:6379"),
        Spec("redis_username", "text", ""),
        # write-only: GET shows redis_password_set; PUT redis_password_clear: true clears it
        Spec("redis_password", "text", "", secret=True),
        Spec("redis_database", "text", "0",
             check=int_range("redis_database", 0, None,
                             "Redis database must be a non-negative integer")),
        Spec("multi_node_enabled", "bool", "false"),
        Spec("node_address_mode", "text", "single"),
        Spec("node_addresses", "text", ""),
        Spec("current_node_name", "text", "", readonly=True),
        # async-task upstreams (gateway contract §0, §13.5): real providers use their own paths
        Spec("artjob_upstream_path_prefix", "text", "/v1/artjob",
             check=path_prefix("artjob_upstream_path_prefix")),
        Spec("clipgen2_upstream_path_prefix", "text", "/v1/clipgen2",
             check=path_prefix("clipgen2_upstream_path_prefix")),
        # the origin hard-codes a vendor model id; ours is a neutral name an admin maps
        Spec("clipgen2_default_model", "text", "clipgen2",
             check=model_name("clipgen2_default_model")),
        Spec("task_ttl_seconds", "text", "86400",
             check=int_range("task_ttl_seconds", 60, 2_592_000)),
    ]
