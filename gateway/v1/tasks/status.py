"""Reading upstream task bodies: the upstream id, the status and its normalised vocabulary.

Pure (gateway contract §13.2-§13.3).  Tasks store one vocabulary -- the video-task one plus
``expired`` (ours: the poller gave up) -- and each projection renders its own (compatible
tasks say ``pending``/``completed`` where the video family says ``queued``/``succeeded``).
"""

from __future__ import annotations

from typing import Any

QUEUED = "queued"
PROCESSING = "processing"
SUCCEEDED = "succeeded"
FAILED = "failed"
CANCELLED = "cancelled"
EXPIRED = "expired"
TERMINAL = frozenset({SUCCEEDED, FAILED, CANCELLED, EXPIRED})
#: terminal states that give the held money back
REFUNDED = frozenset({FAILED, CANCELLED, EXPIRED})

_VOCABULARY = {
    **dict.fromkeys(("succeed", "succeeded", "success", "completed", "complete", "done"),
                    SUCCEEDED),
    **dict.fromkeys(("fail", "failed", "error"), FAILED),
    **dict.fromkeys(("submitted", "created", "pending", "queued"), QUEUED),
    **dict.fromkeys(("processing", "running", "in_progress"), PROCESSING),
    **dict.fromkeys(("cancelled", "canceled"), CANCELLED),
}
_COMPAT_NAMES = {QUEUED: "pending", SUCCEEDED: "completed", EXPIRED: FAILED}
_VIDEO_NAMES = {EXPIRED: FAILED}

_ID_FIELDS = ("id", "task_id", "taskId", "generation_id", "generationId")
_REQUEST_ID_FIELDS = ("request_id", "requestId")
_STATUS_FIELDS = ("status", "state", "task_status", "taskStatus")


def normalise(value: str) -> str:
    """An upstream status word -> our stored status (unknown words lower-cased as they are)."""
    word = value.strip().lower()
    return _VOCABULARY.get(word, word)


def compat_name(status: str) -> str:
    return _COMPAT_NAMES.get(status, status)


def video_name(status: str) -> str:
    return _VIDEO_NAMES.get(status, status)


def _first_string(body: dict[str, Any], names: tuple[str, ...]) -> str | None:
    for name in names:
        value = body.get(name)
        if isinstance(value, str) and value.strip():
            return value.strip()
        if isinstance(value, int) and not isinstance(value, bool):
            return str(value)
    return None


def upstream_id(body: Any) -> str | None:
    """The upstream task id: top-level ids, then ``data``'s (object or first item), and only
    then a ``request_id`` (ours ⚑: the origin took ``request_id`` first and polled the wrong id).
    """
    if not isinstance(body, dict):
        return None
    data = body.get("data")
    inner = data if isinstance(data, dict) else (
        data[0] if isinstance(data, list) and data and isinstance(data[0], dict) else None)
    for source, names in ((body, _ID_FIELDS), (inner, _ID_FIELDS),
                          (body, _REQUEST_ID_FIELDS), (inner, _REQUEST_ID_FIELDS)):
        if source is not None:
            found = _first_string(source, names)
            if found:
                return found
    return None


def upstream_status(body: Any) -> str | None:
    """The raw upstream status word (lower-cased), ``succeeded`` for an array ``data``."""
    if not isinstance(body, dict):
        return None
    found = _first_string(body, _STATUS_FIELDS)
    if found:
        return found.lower()
    data = body.get("data")
    if isinstance(data, dict):
        found = _first_string(data, _STATUS_FIELDS)
        return found.lower() if found else None
    if isinstance(data, list) and data:
        return SUCCEEDED
    return None


def progress(body: Any, status: str) -> int:
    """Upstream ``progress`` when numeric, else 100 terminal / 50 processing / 0."""
    if isinstance(body, dict):
        for source in (body, body.get("data")):
            if isinstance(source, dict):
                value = source.get("progress")
                if isinstance(value, (int, float)) and not isinstance(value, bool):
                    return max(0, min(100, int(value)))
    if status in TERMINAL:
        return 100
    return 50 if status == PROCESSING else 0


def error_of(body: Any) -> Any:
    if isinstance(body, dict):
        if body.get("error"):
            return body["error"]
        data = body.get("data")
        if isinstance(data, dict) and data.get("error"):
            return data["error"]
    return None
