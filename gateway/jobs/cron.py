"""Validation of the 5-field cron expressions used by scheduled price sync (contract §5.7).

Only the shape is checked here (fields, ranges, steps, month/day names, ``@`` descriptors);
the scheduler that fires them lives elsewhere.  Pure.
"""

from __future__ import annotations

import re

DESCRIPTORS = frozenset({"@yearly", "@annually", "@monthly", "@weekly", "@daily", "@midnight",
                         "@hourly"})
_MONTHS = {name: i for i, name in enumerate(
    ["JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC"], 1)}
_DAYS = {name: i for i, name in enumerate(["SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"])}
#: (name, low, high, names)
_FIELDS: tuple[tuple[str, int, int, dict[str, int]], ...] = (
    ("minute", 0, 59, {}),
    ("hour", 0, 23, {}),
    ("day of month", 1, 31, {}),
    ("month", 1, 12, _MONTHS),
    ("day of week", 0, 7, _DAYS),
)
_PART = re.compile(r"^(\*|\?|[0-9A-Za-z]+(?:-[0-9A-Za-z]+)?)(?:/([0-9]+))?$")


class CronError(ValueError):
    """Not a valid 5-field cron expression or descriptor."""


def _value(text: str, name: str, low: int, high: int, names: dict[str, int]) -> int:
    if text.isdigit():
        number = int(text)
    elif text.upper() in names:
        number = names[text.upper()]
    else:
        raise CronError(f"{name}: {text!r} is not a number")
    if not low <= number <= high:
        raise CronError(f"{name}: {number} is outside {low}-{high}")
    return number


def check_cron(expression: str) -> str:
    """Return the expression with whitespace collapsed; raise CronError when invalid."""
    text = " ".join(expression.split())
    if text.startswith("@"):
        if text.lower() not in DESCRIPTORS:
            raise CronError(f"unknown descriptor {text!r}")
        return text.lower()
    fields = text.split(" ")
    if len(fields) != 5:
        raise CronError("expected 5 fields (minute hour day-of-month month day-of-week)")
    for field, (name, low, high, names) in zip(fields, _FIELDS, strict=True):
        for part in field.split(","):
            match = _PART.match(part)
            if not match:
                raise CronError(f"{name}: {part!r} is not valid")
            base, step = match.group(1), match.group(2)
            if step is not None and int(step) == 0:
                raise CronError(f"{name}: step must be positive")
            if base in ("*", "?"):
                continue
            bounds = [_value(p, name, low, high, names) for p in base.split("-")]
            if len(bounds) == 2 and bounds[0] > bounds[1]:
                raise CronError(f"{name}: range {base!r} is reversed")
    return text
