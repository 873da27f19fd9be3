"""Command-line options of ``twistd lockgate``, with ``LOCKGATE_*`` environment fallbacks.

Precedence: command line > environment > ``--config`` TOML file > built-in default.  Keeping the
resolution here (and not scattered through makeService) means every option is documented once,
in ``--help``.
"""

from __future__ import annotations

import os
import sys
import tomllib
from collections.abc import Mapping
from typing import Any

from twisted.python import usage

from tap.dispatch_budget import DEFAULT_PER_TURN
from tap.version import version_line

DEFAULT_LISTEN = "tcp:8080:interface=127.0.0.1"
DEFAULT_DATABASE = "sqlite:///lockgate.sqlite3"
DEFAULT_SECRET_FILE = "lockgate.secret"

#: option name -> (environment variable, default)
_SCALARS: dict[str, tuple[str, str | None]] = {
    "database": ("LOCKGATE_DATABASE", DEFAULT_DATABASE),
    "redis": ("LOCKGATE_REDIS", None),
    "secret-file": ("LOCKGATE_SECRET_FILE", DEFAULT_SECRET_FILE),
    "shutdown-grace": ("LOCKGATE_SHUTDOWN_GRACE", "10"),
    "trusted-proxies": ("LOCKGATE_TRUSTED_PROXIES", ""),
    "db-threads": ("LOCKGATE_DB_THREADS", None),
    "access-log": ("LOCKGATE_ACCESS_LOG", "-"),
    "metrics-listen": ("LOCKGATE_METRICS_LISTEN", None),
    "otlp-endpoint": ("LOCKGATE_OTLP_ENDPOINT", None),
    "node-name": ("LOCKGATE_NODE_NAME", ""),
    "log-format": ("LOCKGATE_LOG_FORMAT", "human"),
    "workers": ("LOCKGATE_WORKERS", "1"),
    "dispatch-per-turn": ("LOCKGATE_DISPATCH_PER_TURN", str(DEFAULT_PER_TURN)),
}


class Options(usage.Options):
    """``twistd lockgate`` options."""

    synopsis = "[options]"
    longdesc = (
        "Runs the Lockgate gateway (/v1, /v1beta) and console (/auth, /api). Every option can "
        "also be set with the LOCKGATE_<NAME> environment variable (upper case, '-' -> '_'; "
        "LOCKGATE_LISTEN takes space-separated endpoints) or in the --config TOML file "
        "(same names as the long options; 'listen' is a list)."
    )

    optParameters = [
        ["database", "d", None,
         f"SQLAlchemy database URL (default {DEFAULT_DATABASE}, a SQLite file in the working "
         "directory; use postgresql://user:pass@host/db for production)."],
        ["redis", "r", None,
         "Redis URL (redis://host:6379/0) for state shared between processes: rate limits, "
         "routing counters, cache invalidation. Default: in-memory (single process)."],
        ["secret-file", "s", None,
         f"File holding the JWT and API-key hashing secret (default {DEFAULT_SECRET_FILE}); "
         "generated with mode 0600 on first start if absent."],
        ["config", "c", None, "TOML file with any of these options."],
        ["shutdown-grace", None, None,
         "Seconds in-flight requests may take to finish on shutdown (default 10)."],
        ["trusted-proxies", None, None,
         "Comma-separated IPs/CIDRs of reverse proxies whose X-Forwarded-For is believed."],
        ["db-threads", None, None,
         "Database worker threads (default 1 for SQLite, 8 otherwise)."],
        ["log-format", None, None,
         "'human' (default) or 'json': one JSON object per log event and line, with the "
         "request_id on every line a gateway call causes (the access log is separate: "
         "give --access-log a file or 'off' to keep standard output pure JSON)."],
        ["node-name", None, None,
         "This process's name in a fleet (shown as current_node_name in the settings; names "
         "the owner of the async tasks it polls). Default: empty (pid<n> for tasks)."],
        ["access-log", None, None,
         "Where the combined-format access log goes: '-' (default) standard output, a file "
         "path (appended), or 'off'. Lines are written in blocks, at least once a second."],
        ["metrics-listen", None, None,
         "Endpoint string of a separate listener serving GET /metrics (Prometheus) and the "
         "/healthz and /readyz probes, e.g. tcp:9100:interface=127.0.0.1. Default: off."],
        ["workers", None, None,
         "Worker processes sharing the listening sockets (tcp: endpoints), 'auto' for one per "
         "core (default 1: this process serves). Without --redis they share balances, quotas, "
         "limits and cache invalidation through the supervisor; --metrics-listen port P "
         "becomes P+i on worker i."],
        ["dispatch-per-turn", None, None,
         f"New /v1 requests started per reactor turn (default {DEFAULT_PER_TURN}); the rest "
         "of a burst waits in arrival order for the next turns, so running streams and "
         "upstream answers are served in between. 0: start every request as soon as it is in."],
        ["otlp-endpoint", None, None,
         "OTLP/HTTP traces endpoint (e.g. http://collector:4318/v1/traces): one span per "
         "request, a child span per upstream attempt. Default: no tracing."],
    ]
    optFlags = [
        ["no-migrate", None, "Do not apply database migrations on start."],
    ]

    def __init__(self) -> None:
        super().__init__()
        self["listen"] = []

    def opt_listen(self, endpoint: str) -> None:
        """Endpoint string to listen on (repeatable; default tcp:8080:interface=127.0.0.1)."""
        self["listen"].append(endpoint)

    opt_l = opt_listen

    def opt_version(self) -> None:
        """Print Lockgate's version and exit."""
        print(version_line())
        sys.exit(0)

    def postOptions(self) -> None:
        resolve(self, os.environ)


def _load_toml(path: str) -> dict[str, Any]:
    try:
        with open(path, "rb") as handle:
            data = tomllib.load(handle)
    except OSError as exc:
        raise usage.UsageError(f"cannot read --config {path}: {exc.strerror}") from exc
    except tomllib.TOMLDecodeError as exc:
        raise usage.UsageError(f"--config {path} is not valid TOML: {exc}") from exc
    known = set(_SCALARS) | {"listen", "no-migrate"}
    unknown = sorted(set(data) - known)
    if unknown:
        raise usage.UsageError(f"--config {path}: unknown option(s) {', '.join(unknown)}")
    for name, value in data.items():
        if name == "listen":
            ok = isinstance(value, str) or (
                isinstance(value, list) and all(isinstance(item, str) for item in value))
        elif name == "no-migrate":
            ok = isinstance(value, (bool, str))
        else:
            ok = isinstance(value, (str, int, float)) and not isinstance(value, bool)
        if not ok:
            raise usage.UsageError(f"--config {path}: {name} has the wrong type "
                                   f"({type(value).__name__})")
    return data


_YES = ("1", "true", "yes", "on")
_NO = ("", "0", "false", "no", "off")


def resolve(options: Options | dict[str, Any], environ: Mapping[str, str]) -> None:
    """Fill unset options from the environment, then the TOML file, then defaults."""
    config_path = options.get("config") or environ.get("LOCKGATE_CONFIG")
    file_values = _load_toml(config_path) if config_path else {}

    for name, (env_name, default) in _SCALARS.items():
        if options.get(name) is not None:
            continue
        if env_name in environ:
            options[name] = environ[env_name]
        elif name in file_values:
            options[name] = str(file_values[name])
        else:
            options[name] = default

    if not options.get("listen"):
        if environ.get("LOCKGATE_LISTEN"):
            options["listen"] = environ["LOCKGATE_LISTEN"].split()
        elif file_values.get("listen"):
            listen = file_values["listen"]
            options["listen"] = [listen] if isinstance(listen, str) else list(listen)
        else:
            options["listen"] = [DEFAULT_LISTEN]

    if options.get("no-migrate"):
        options["no-migrate"] = True
    else:
        if "LOCKGATE_NO_MIGRATE" in environ:
            flag, source = environ["LOCKGATE_NO_MIGRATE"], "LOCKGATE_NO_MIGRATE"
        else:
            flag, source = str(file_values.get("no-migrate", "")), "no-migrate"
        word = flag.strip().lower()
        if word not in _YES + _NO:
            raise usage.UsageError(f"{source} must be true or false")
        options["no-migrate"] = word in _YES

    try:
        grace = float(options["shutdown-grace"])
    except (TypeError, ValueError) as exc:
        raise usage.UsageError("shutdown-grace must be a number of seconds") from exc
    if grace < 0:
        raise usage.UsageError("shutdown-grace must not be negative")
    options["shutdown-grace"] = grace
    access_log = str(options["access-log"]).strip()
    if access_log.lower() == "off":
        access_log = "off"
    elif not access_log:
        raise usage.UsageError("access-log must be '-', 'off' or a file path")
    elif access_log != "-" and not os.path.isdir(os.path.dirname(os.path.abspath(access_log))):
        raise usage.UsageError(f"access-log: no directory for {access_log!r}")
    options["access-log"] = access_log
    for name in ("metrics-listen", "otlp-endpoint"):
        value = options.get(name)
        if value is not None:
            value = str(value).strip()
            if not value:
                raise usage.UsageError(f"{name} must not be empty")
            options[name] = value
    endpoint = options.get("otlp-endpoint")
    if endpoint is not None and not endpoint.startswith(("http://", "https://")):
        raise usage.UsageError("otlp-endpoint must be an http:// or https:// URL")
    options["node-name"] = str(options.get("node-name") or "").strip()
    log_format = str(options["log-format"]).strip().lower()
    if log_format not in ("human", "json"):
        raise usage.UsageError("log-format must be 'human' or 'json'")
    options["log-format"] = log_format
    options["workers"] = _worker_count(str(options["workers"]))
    try:
        per_turn = int(str(options["dispatch-per-turn"]).strip())
    except ValueError as exc:
        raise usage.UsageError("dispatch-per-turn must be a whole number") from exc
    if not 0 <= per_turn <= 100_000:
        raise usage.UsageError("dispatch-per-turn must be between 0 and 100000")
    options["dispatch-per-turn"] = per_turn
    if options.get("db-threads") is not None:
        try:
            threads = int(options["db-threads"])
        except ValueError as exc:
            raise usage.UsageError("db-threads must be a whole number") from exc
        if not 1 <= threads <= 64:
            raise usage.UsageError("db-threads must be between 1 and 64")
        options["db-threads"] = threads


def _worker_count(value: str) -> int:
    """``--workers``: a whole number from 1 to 64, or ``auto`` (the cores this process may use)."""
    word = value.strip().lower()
    if word == "auto":
        return max(1, len(os.sched_getaffinity(0)))
    try:
        count = int(word)
    except ValueError as exc:
        raise usage.UsageError("workers must be a whole number or 'auto'") from exc
    if not 1 <= count <= 64:
        raise usage.UsageError("workers must be between 1 and 64")
    return count
