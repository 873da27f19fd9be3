"""When a 5-field cron expression next fires, for scheduled price sync (contract §5.10).

``gateway.jobs.cron.check_cron`` validates the shape; this module reads a valid expression into
sets of allowed values and finds the first matching minute after a given time (UTC), stepping
whole months, days and hours when they cannot match so that even yearly schedules are found
in a few hundred steps.  Day-of-month and day-of-week follow the classic cron rule: when both
are restricted a day matching either one fires.

Pure: no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from gateway.jobs.cron import check_cron

DESCRIPTORS = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}
_MONTHS = {name: i for i, name in enumerate(
    ["JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC"], 1)}
_DAYS = {name: i for i, name in enumerate(["SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"])}
_NONE: dict[str, int] = {}
_BOUNDS: tuple[tuple[int, int, dict[str, int]], ...] = (
    (0, 59, _NONE), (0, 23, _NONE), (1, 31, _NONE), (1, 12, _MONTHS), (0, 7, _DAYS))
#: give up after this many steps (an expression like "0 0 31 2 *" never fires)
MAX_STEPS = 100_000


@dataclass(frozen=True)
class Schedule:
    minutes: frozenset[int]
    hours: frozenset[int]
    days: frozenset[int]
    months: frozenset[int]
    weekdays: frozenset[int]
    days_restricted: bool
    weekdays_restricted: bool

    def day_matches(self, moment: datetime) -> bool:
        weekday = (moment.weekday() + 1) % 7  # cron: 0 = Sunday
        by_day = moment.day in self.days
        by_weekday = weekday in self.weekdays
        if self.days_restricted and self.weekdays_restricted:
            return by_day or by_weekday
        return by_day and by_weekday


def _value(text: str, names: dict[str, int]) -> int:
    return int(text) if text.isdigit() else names[text.upper()]


def _field(text: str, low: int, high: int, names: dict[str, int]) -> frozenset[int]:
    values: set[int] = set()
    for part in text.split(","):
        base, _, step_text = part.partition("/")
        step = int(step_text) if step_text else 1
        if base in ("*", "?"):
            start, end = low, high
        elif "-" in base:
            first, last = base.split("-", 1)
            start, end = _value(first, names), _value(last, names)
        else:
            start = _value(base, names)
            end = high if step_text else start
        values.update(range(start, end + 1, step))
    return frozenset(values)


def parse_schedule(expression: str) -> Schedule:
    """A validated expression (raises ``gateway.jobs.cron.CronError`` when invalid)."""
    text = check_cron(expression)
    text = DESCRIPTORS.get(text, text)
    fields = text.split(" ")
    sets = [_field(f, low, high, names) for f, (low, high, names) in zip(fields, _BOUNDS,
                                                                          strict=True)]
    weekdays = frozenset(d % 7 for d in sets[4])  # 7 is Sunday too
    return Schedule(sets[0], sets[1], sets[2], sets[3], weekdays,
                    days_restricted=fields[2] not in ("*", "?"),
                    weekdays_restricted=fields[4] not in ("*", "?"))


def next_fire(expression: str, after: datetime) -> datetime | None:
    """The first whole minute strictly after ``after`` that the expression matches (same
    tz as ``after``), or None when it never fires."""
    schedule = parse_schedule(expression)
    moment = after.replace(second=0, microsecond=0) + timedelta(minutes=1)
    for _ in range(MAX_STEPS):
        if moment.month not in schedule.months:
            year, month = (moment.year + 1, 1) if moment.month == 12 else (
                moment.year, moment.month + 1)
            moment = moment.replace(year=year, month=month, day=1, hour=0, minute=0)
            continue
        if not schedule.day_matches(moment):
            moment = (moment + timedelta(days=1)).replace(hour=0, minute=0)
            continue
        if moment.hour not in schedule.hours:
            moment = (moment + timedelta(hours=1)).replace(minute=0)
            continue
        if moment.minute not in schedule.minutes:
            moment += timedelta(minutes=1)
            continue
        return moment
    return None
