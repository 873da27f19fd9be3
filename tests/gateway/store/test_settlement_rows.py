"""A settlement's usage-log row as driver parameters: defaults, clipping, JSON, timestamps."""

from __future__ import annotations

from datetime import UTC, datetime

from twisted.trial.unittest import TestCase

from gateway.store.settlement_rows import LOG_COLUMNS, PreparedSettlement, prepare
from gateway.store.usage_rollups import hour_of


def column(values: list[object], name: str) -> object:
    return values[LOG_COLUMNS.index(name)]


class PrepareTests(TestCase):
    def test_absent_columns_take_their_defaults(self) -> None:
        values = prepare({"request_id": "r1", "user_id": 3}, "sqlite").values
        assert column(values, "request_id") == "r1" and column(values, "user_id") == 3
        assert column(values, "api_key_id") is None  # nullable
        assert column(values, "model_name") == ""  # text, not null
        assert column(values, "input_tokens") == 0
        assert column(values, "is_stream") is False
        assert column(values, "group_multiplier_nanos") == 1_000_000_000
        assert column(values, "user_channel_multiplier_nanos") == 1_000_000_000
        assert column(values, "error_message") == ""
        assert column(values, "prices") is None and column(values, "created_at") is None
        assert len(values) == len(LOG_COLUMNS)

    def test_given_values_win_and_none_is_kept(self) -> None:
        values = prepare({"request_id": "r", "user_id": 1, "model_name": None,
                          "group_multiplier_nanos": None, "input_tokens": 12,
                          "not_a_column": "ignored"}, "sqlite").values
        assert column(values, "model_name") is None
        assert column(values, "group_multiplier_nanos") is None
        assert column(values, "input_tokens") == 12
        assert "ignored" not in values

    def test_texts_are_clipped_to_their_columns(self) -> None:
        item = {"request_id": "x" * 100, "user_id": 1, "model_name": "m" * 300,
                "endpoint": "e" * 150, "ip": "1" * 80, "failure_reason": "f" * 600,
                "error_message": "y" * 700, "user_agent": "short"}
        values = prepare(item, "sqlite").values
        assert column(values, "request_id") == "x" * 64
        assert column(values, "model_name") == "m" * 200
        assert column(values, "endpoint") == "e" * 100
        assert column(values, "ip") == "1" * 64
        assert column(values, "failure_reason") == "f" * 512
        assert column(values, "error_message") == "y" * 512
        assert column(values, "user_agent") == "short"
        assert prepare({"request_id": "r", "user_id": 1, "error_message": None},
                       "sqlite").values[LOG_COLUMNS.index("error_message")] == ""

    def test_prices_are_sorted_json_and_time_the_databases_form(self) -> None:
        created = datetime(2026, 11, 26, 8, 0, 5, 0, tzinfo=UTC)
        item = {"request_id": "r", "user_id": 1, "prices": {"b": "1", "a": "0.5"},
                "created_at": created}
        prepared = prepare(item, "sqlite")
        assert column(prepared.values, "prices") == '{"a":"0.5","b":"1"}'
        assert column(prepared.values, "created_at") == "2026-11-26 08:00:05.000000"
        assert prepared.hour == hour_of(created)
        on_postgres = prepare(item, "postgresql")
        assert column(on_postgres.values, "created_at") == datetime(2026, 11, 26, 8, 0, 5)
        assert prepared.item is item

    def test_for_another_dialect_converts_the_time_from_the_values(self) -> None:
        """An item prepared for one dialect and written on the other (``write_batch``) is
        converted from its values -- the item may hold only the billing inputs."""
        created = datetime(2026, 11, 26, 8, 0, 5, 7, tzinfo=UTC)
        item = {"request_id": "r", "user_id": 1, "model_name": "m", "input_tokens": 5,
                "prices": {"a": "1"}, "created_at": created}
        for first, other in (("sqlite", "postgresql"), ("postgresql", "sqlite")):
            prepared = prepare(item, first)
            bare = PreparedSettlement({"request_id": "r"}, first, prepared.values,
                                      prepared.hour)
            converted = bare.for_dialect(other)
            assert converted.values == prepare(item, other).values
            assert (converted.dialect, converted.hour, converted.item) == (
                other, hour_of(created), {"request_id": "r"})
            assert prepared.values == prepare(item, first).values  # the original is unchanged
            assert prepared.for_dialect(first) is prepared
        no_time = prepare({"request_id": "r", "user_id": 1}, "sqlite")
        assert no_time.for_dialect("postgresql").values == no_time.values
