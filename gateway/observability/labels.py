"""The bounded label vocabulary of the metrics (operations contract §2).

Why a module of its own: a label value that is not in these lists would be a new time series
per distinct value -- unbounded memory in the process and in Prometheus.  Everything that turns
a request into a label goes through here, and nothing here returns a value outside the lists.
"""

from __future__ import annotations

#: every histogram has exactly these finite buckets (+Inf is added by prometheus_client)
BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0,
           300.0)

FAMILIES = ("chat", "completions", "responses", "messages", "modelaction", "audio",
            "moderations", "images", "videos", "artjob", "clipgen2", "tasks", "uploads",
            "account", "models", "console", "auth", "public", "probe", "other")

ATTEMPT_OUTCOMES = ("ok", "connect_error", "timeout", "status_4xx", "status_429", "status_5xx",
                    "cut")
SETTLEMENT_OUTCOMES = ("charged", "free", "refunded", "failed")
TOKEN_DIRECTIONS = ("input", "output", "cached")
LINK_KINDS = ("sandbox_host", "connector_device")

#: exact paths -> family (checked before the prefixes)
_EXACT: dict[str, str] = {
    "/v1/chat/completions": "chat",
    "/v1/completions": "completions",
    "/v1/responses": "responses",
    "/v1/messages": "messages",
    "/v1/moderations": "moderations",
    "/v1/balance": "account",
    "/v1/user/balance": "account",
    "/v1/models": "models",
    "/healthz": "probe",
    "/readyz": "probe",
    "/metrics": "probe",
    "/api/pricing": "public",
    "/api/setup": "public",
    "/api/setup/status": "public",
}

#: (prefix, family), first match wins; model actions are recognised before /v1/models/
_PREFIXES: tuple[tuple[str, str], ...] = (
    ("/v1beta/", "modelaction"),
    ("/v1/messages/", "messages"),
    ("/v1/audio/", "audio"),
    ("/v1/images/", "images"),
    ("/v1/videos/", "videos"),
    ("/v1/video/", "videos"),
    ("/v1/artjob/", "artjob"),
    ("/v1/clipgen2/", "clipgen2"),
    ("/v1/tasks/", "tasks"),
    ("/v1/uploads/", "uploads"),
    ("/auth/", "auth"),
    ("/api/public/", "public"),
    ("/api/", "console"),
)

#: classified request paths (raw bytes, or the usage log's endpoint text); bounded because
#: paths carry ids (tasks, console objects)
_CACHE: dict[bytes | str, str] = {}
_CACHE_MAX = 4096


def classify(path: str) -> str:
    """The ``family`` label of a request path (query string already removed)."""
    path = path.rstrip("/") or "/"
    family = _EXACT.get(path)
    if family is not None:
        return family
    if path.startswith("/v1/models/"):
        return "modelaction" if ":" in path else "models"
    for prefix, name in _PREFIXES:
        if path.startswith(prefix):
            return name
    return "other"


def family_of(path: bytes | str) -> str:
    """``classify`` for a raw request path or an endpoint, remembered per path."""
    family = _CACHE.get(path)
    if family is None:
        family = classify(path.decode("latin-1") if isinstance(path, bytes) else path)
        if len(_CACHE) >= _CACHE_MAX:
            _CACHE.clear()
        _CACHE[path] = family
    return family


def status_code(code: int) -> str:
    """The ``code`` label: the HTTP status as three digits (anything else is ``000``)."""
    return str(code) if 100 <= code <= 999 else "000"
