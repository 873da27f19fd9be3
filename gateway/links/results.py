"""A device's result turned into the stored task outcome (agents contract §1.13, result
normalization), and the checks a result body must pass first.

``result`` = the device's ``result``, then ``output`` if different, then ``stdout:`` and
``stderr:`` sections (each skipped when empty or identical to an earlier one), joined by a blank
line and capped at 200000 characters.  ``error_message`` = ``error`` with ``; exit code N``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

RESULT_CAP = 200_000
TRUNCATED = "\n...(truncated)"
TEXT_FIELDS = ("result", "output", "stdout", "stderr", "error")


class ResultError(ValueError):
    """A result body that cannot be recorded (the message says which field)."""


@dataclass(frozen=True)
class Outcome:
    success: bool
    result: str
    error_message: str
    #: the raw fields as the device sent them (kept on the task as ``output``)
    raw: dict[str, Any]


def parse_result(body: dict[str, Any]) -> Outcome:
    success = body.get("success")
    if not isinstance(success, bool):
        raise ResultError("success must be a boolean")
    raw: dict[str, Any] = {"success": success}
    for name in TEXT_FIELDS:
        value = body.get(name)
        if value is None:
            continue
        if not isinstance(value, str):
            raise ResultError(f"{name} must be a string")
        raw[name] = value
    exit_code = body.get("exit_code")
    if exit_code is not None:
        if isinstance(exit_code, bool) or not isinstance(exit_code, int):
            raise ResultError("exit_code must be an integer")
        raw["exit_code"] = exit_code
    return Outcome(success=success, result=_result_text(raw), error_message=_error_text(raw),
                   raw=raw)


def _result_text(raw: dict[str, Any]) -> str:
    sections: list[str] = []
    seen: list[str] = []
    for name, label in (("result", ""), ("output", ""), ("stdout", "stdout:\n"),
                        ("stderr", "stderr:\n")):
        value = raw.get(name, "")
        if not value or value in seen:
            continue
        seen.append(value)
        sections.append(label + value)
    text = "\n\n".join(sections)
    if len(text) > RESULT_CAP:
        text = text[:RESULT_CAP] + TRUNCATED
    return text


def _error_text(raw: dict[str, Any]) -> str:
    error = raw.get("error", "")
    if "exit_code" not in raw:
        return str(error)
    suffix = f"exit code {raw['exit_code']}"
    return f"{error}; {suffix}" if error else suffix
