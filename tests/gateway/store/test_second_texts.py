"""``SecondTexts``: a time's SQLite text and rollup hour, the same as the plain conversions."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta, timezone

from twisted.trial.unittest import TestCase

from gateway.store.driver_sql import timestamp_param
from gateway.store.second_texts import SecondTexts
from gateway.store.usage_rollups import hour_of

#: an hour boundary, and a microsecond either side of whole seconds around it
EDGE = datetime(2026, 11, 26, 15, 0, 0, tzinfo=UTC)
US = timedelta(microseconds=1)


def plain(moment: datetime) -> tuple[str, int]:
    return timestamp_param(moment, "sqlite"), hour_of(moment)


class SecondTextsTests(TestCase):
    def test_each_time_converts_as_timestamp_param_and_hour_of(self) -> None:
        """Random UTC times in runs (same second, next second, backwards), every one equal
        to the plain conversion -- the cached second must never answer for another."""
        rng = random.Random(22)
        texts = SecondTexts()
        moment = EDGE - timedelta(seconds=3)
        for _ in range(20_000):
            step = rng.choice((US, 7 * US, timedelta(microseconds=rng.randrange(1_000_000)),
                               timedelta(seconds=1), timedelta(seconds=-1), -US,
                               timedelta(hours=rng.randrange(-50, 50),
                                         microseconds=rng.randrange(1_000_000))))
            moment += step
            assert texts.sqlite_text_and_hour(moment) == plain(moment), moment

    def test_whole_seconds_and_hour_edges(self) -> None:
        texts = SecondTexts()
        for moment in (EDGE - US, EDGE, EDGE + US, EDGE - US, EDGE + timedelta(seconds=1) - US,
                       EDGE + timedelta(seconds=1), datetime(1, 1, 1, tzinfo=UTC),
                       datetime(999, 12, 31, 23, 59, 59, 999_999, tzinfo=UTC),
                       datetime(9999, 12, 31, 23, 59, 59, 999_999, tzinfo=UTC), EDGE):
            assert texts.sqlite_text_and_hour(moment) == plain(moment), moment
        assert texts.sqlite_text_and_hour(EDGE) == ("2026-11-26 15:00:00.000000", hour_of(EDGE))
        assert texts.sqlite_text_and_hour(EDGE - US)[0] == "2026-11-26 14:59:59.999999"

    def test_other_zones_convert_as_before(self) -> None:
        """A time in another zone (the cached instant on another wall clock, or an offset of
        a fraction of a second) is not confused with the cached UTC second."""
        texts = SecondTexts()
        texts.sqlite_text_and_hour(EDGE)
        for zone in (timezone(timedelta(hours=2)), timezone(timedelta(hours=-5, minutes=-30)),
                     timezone(timedelta(microseconds=250))):
            moment = EDGE.astimezone(zone) + 3 * US
            assert texts.sqlite_text_and_hour(moment) == plain(moment)
        assert texts.sqlite_text_and_hour(EDGE.astimezone(timezone(timedelta(hours=2))))[0] \
            == "2026-11-26 15:00:00.000000"
