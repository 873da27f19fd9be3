"""Model-list and price parsing and the price-sync schedule (console contract §5.10)."""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal

import pytest

from gateway.jobs.cron import CronError
from gateway.sync.model_lists import (
    AUTO_PATHS,
    SyncFormatError,
    custom_path,
    join_url,
    model_list_paths,
    parse_model_names,
)
from gateway.sync.prices import PRICES_PATH, PRICING_PATH, parse_prices, price_paths
from gateway.sync.providers import guess_provider
from gateway.sync.schedule import next_fire


def test_format_paths() -> None:
    assert model_list_paths(None) == AUTO_PATHS
    assert model_list_paths("auto") == ("/v1/models", "/models", "/api/models")
    for fmt in ("compat", "compat_models", "openai", "OpenAI-Models"):
        assert model_list_paths(fmt) == ("/v1/models",)
    assert model_list_paths("generic_models") == ("/models",)
    assert model_list_paths("models") == ("/models",)
    assert model_list_paths("api_models") == ("/api/models",)
    assert model_list_paths("oneapi_models") == ("/api/models",)
    assert model_list_paths("custom", "list/all") == ("/list/all",)
    with pytest.raises(SyncFormatError, match="unsupported"):
        model_list_paths("gopher")
    with pytest.raises(SyncFormatError, match="custom sync path is required"):
        model_list_paths("custom", "  ")


def test_custom_full_url_is_reduced_to_its_path() -> None:
    assert custom_path("http://evil.example:8080/steal?x=1") == "/steal?x=1"
    assert custom_path("//other.host/a") == "/a"
    assert custom_path("https://other.host") == "/"


def test_join_url() -> None:
    assert join_url("http://h:1/", "/v1/models") == "http://h:1/v1/models"
    assert join_url("http://h:1/v1", "/v1/models") == "http://h:1/v1/models"
    assert join_url("http://h:1/v1/", "/models") == "http://h:1/v1/models"
    assert join_url("http://h:1/base", "/api/models") == "http://h:1/base/api/models"


@pytest.mark.parametrize("payload, expected", [
    ({"object": "list", "data": [{"id": "b"}, {"id": "a"}, {"id": "a"}]}, ["a", "b"]),
    (["x", "y", " "], ["x", "y"]),
    ({"models": [{"name": "models/gemini-pro"}, {"model": "m2"}]}, ["gemini-pro", "m2"]),
    ({"success": True, "data": ["one", {"model_name": "two"}]}, ["one", "two"]),
    ({"data": {"models": [{"id": "deep"}]}}, ["deep"]),
    ({"m1": {"owned_by": "x"}, "m2": {"owned_by": "y"}}, ["m1", "m2"]),
    ('{"data": [{"id": "from-string"}]}', ["from-string"]),
    ({"data": [{"id": "has space"}, {"id": 3}, {"nothing": 1}]}, []),
])
def test_parse_model_names(payload: object, expected: list[str]) -> None:
    assert parse_model_names(payload) == expected


def test_parse_model_names_refuses_non_json_text() -> None:
    with pytest.raises(SyncFormatError):
        parse_model_names("<html>nope</html>")
    with pytest.raises(SyncFormatError):
        parse_model_names("   ")


def test_price_paths() -> None:
    assert price_paths("auto") == (PRICING_PATH, PRICES_PATH)
    for fmt in ("newapi_prices", "newapi_pricing", "api_pricing"):
        assert price_paths(fmt) == ("/api/pricing",)
    assert price_paths("legacy_api_prices") == ("/api/prices",)
    assert price_paths("api_prices") == ("/api/prices",)
    assert price_paths("models") == ("/models",)
    assert price_paths("oneapi_models") == ("/api/models",)
    assert price_paths("custom", "https://x/p") == ("/p",)
    with pytest.raises(SyncFormatError):
        price_paths("bogus")


def _by_name(payload: object) -> dict[str, dict[str, object]]:
    return {item.model_name: item.wire() for item in parse_prices(payload)}


def test_newapi_pricing_list() -> None:
    payload = {"success": True, "data": [
        {"model_name": "gpt-4o", "quota_type": 0, "model_ratio": 1.25, "model_price": 0,
         "completion_ratio": 4, "enable_groups": ["default"]},
        {"model_name": "dall-e-3", "quota_type": 1, "model_ratio": 0, "model_price": 0.04},
        {"model_name": "cached", "quota_type": 0, "model_ratio": 0.5, "completion_ratio": 2,
         "cache_ratio": 0.1},
    ]}
    items = _by_name(payload)
    # ratio scale x2 -> per 1M tokens
    assert items["gpt-4o"]["input_price"] == "2.5"
    assert items["gpt-4o"]["output_price"] == "10"
    assert items["gpt-4o"]["cached_input_price"] == "2.5"  # missing cached copies input
    assert items["gpt-4o"]["quota_type"] == 0
    # per request: kept as is
    assert items["dall-e-3"]["quota_type"] == 1
    assert items["dall-e-3"]["output_price"] == "0.04"
    assert items["dall-e-3"]["input_price"] == "0.04"
    assert items["cached"]["cached_input_price"] == "0.1"
    assert items["cached"]["output_price"] == "2"


def test_split_ratio_maps() -> None:
    payload = {"data": {"model_ratio": {"m-a": 0.5, "m-b": 3}, "completion_ratio": {"m-a": 4},
                        "model_price": {"per-call": 0.02}}}
    items = _by_name(payload)
    assert items["m-a"]["input_price"] == "1"
    assert items["m-a"]["output_price"] == "4"
    assert items["m-b"]["output_price"] == "6"  # completion ratio defaults to 1
    assert items["per-call"]["quota_type"] == 1
    assert items["per-call"]["output_price"] == "0.02"


def test_per_model_object_spellings_and_tiers() -> None:
    payload = {"prices": {
        "claude-x": {"prompt": "1.5", "completion": "7.5", "cache_read_price": "0.15",
                     "cache_creation_price": "1.875",
                     "input_price_tiers": [{"min_tokens": 200000, "price": "3"},
                                           {"min_tokens": -1, "price": "9"}]},
        "only-output": {"output_price": 2},
        "generic": 0.25,
        "expr": {"input_price": "1", "output_price": "2", "billing_expression": "tokens*p"},
        "junk": {"input_price": "abc"},
    }}
    items = _by_name(payload)
    claude = items["claude-x"]
    assert (claude["input_price"], claude["output_price"]) == ("3", "15")
    assert claude["cached_input_price"] == "0.3"
    assert claude["cache_write_input_price"] == "3.75"
    assert claude["input_price_tiers"] == [{"min_tokens": 200000, "price": "6",
                                            "condition": ""}]
    assert items["only-output"]["input_price"] == "4"  # copies output (x2)
    assert items["generic"]["input_price"] == "0.5"
    # prices from a billing expression are taken as they are
    assert (items["expr"]["input_price"], items["expr"]["output_price"]) == ("1", "2")
    assert "junk" not in items


def test_arrays_under_other_containers_and_rounding() -> None:
    payload = {"model_prices": [{"model": "tiny", "input": 0.0000000004}, {"id": "x",
                                                                              "ratio": "2"}]}
    items = _by_name(payload)
    assert items["tiny"]["input_price"] == "0.000000001"  # rounded to 9 places after x2
    assert items["x"]["output_price"] == "4"
    assert parse_prices({"data": []}) == []
    assert parse_prices({"success": False, "message": "nope"}) == []


def test_price_items_sorted_and_deduplicated() -> None:
    items = parse_prices([{"model_name": "b", "price": 1}, {"model_name": "a", "price": 1},
                          {"model_name": "b", "price": 2}])
    assert [item.model_name for item in items] == ["a", "b"]
    assert items[1].prices["input_price"] == Decimal("4")


def test_guess_provider() -> None:
    assert guess_provider("gpt-4o") == "openai"
    assert guess_provider("claude-3-5") == "anthropic"
    assert guess_provider("vendor/gemini-pro") == "google"
    assert guess_provider("fast-small") == "custom"


def _at(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


@pytest.mark.parametrize("expression, after, expected", [
    ("0 * * * *", "2026-11-22T10:30:00", "2026-11-22T11:00:00"),
    ("0 * * * *", "2026-11-22T10:00:00", "2026-11-22T11:00:00"),  # strictly after
    ("*/15 * * * *", "2026-11-22T10:14:59", "2026-11-22T10:15:00"),
    ("*/15 * * * *", "2026-11-22T10:15:00", "2026-11-22T10:30:00"),
    ("5-10/5 1 * * *", "2026-11-22T01:06:00", "2026-11-22T01:10:00"),
    ("@daily", "2026-01-31T23:59:00", "2026-02-01T00:00:00"),
    ("@hourly", "2026-12-31T23:30:00", "2027-01-01T00:00:00"),
    ("0 0 29 2 *", "2025-03-01T00:00:00", "2028-02-29T00:00:00"),
    ("0 9 * * MON", "2026-11-22T12:00:00", "2026-11-23T09:00:00"),  # 22nd is a Sunday
    ("0 9 * * 7", "2026-11-21T12:00:00", "2026-11-22T09:00:00"),  # 7 = Sunday
    ("0 0 13 * FRI", "2026-11-01T00:00:00", "2026-11-06T00:00:00"),  # either day rule
    ("30 2 1 JAN-MAR *", "2026-03-02T00:00:00", "2027-01-01T02:30:00"),
])
def test_next_fire(expression: str, after: str, expected: str) -> None:
    assert next_fire(expression, _at(after)) == _at(expected)


def test_next_fire_never_and_invalid() -> None:
    assert next_fire("0 0 31 2 *", _at("2026-01-01T00:00:00")) is None
    with pytest.raises(CronError):
        next_fire("61 * * * *", _at("2026-01-01T00:00:00"))
