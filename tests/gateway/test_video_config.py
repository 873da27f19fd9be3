"""Combined video billing config normalisation and validation (console contract §5.9)."""

from __future__ import annotations

import pytest

from gateway.billing.video_config import (
    VideoConfigError,
    normalise_video_config,
    validate_for_quota_type,
)


def test_contract_example_normalises() -> None:
    config = normalise_video_config({"resolutions": [
        {"resolution": "720P", "duration_unit_price": "0.12"},
        {"resolution": "1280 * 720", "duration_unit_price": 5,
         "durations": [{"seconds": 10, "price": "1.10"}, {"seconds": 5, "price": 0.6},
                       {"seconds": 5, "price": "0.7"}, {"seconds": 0, "price": "1"},
                       {"seconds": 3, "price": "-1"}]},
    ]})
    assert config == {"resolutions": [
        {"resolution": "1280x720", "duration_unit_price": "0",
         "durations": [{"seconds": 5, "price": "0.7"}, {"seconds": 10, "price": "1.1"}]},
        {"resolution": "720p", "duration_unit_price": "0.12", "durations": []},
    ]}


def test_empty_forms() -> None:
    assert normalise_video_config(None) == {"resolutions": []}
    assert normalise_video_config("") == {"resolutions": []}
    assert normalise_video_config({}) == {"resolutions": []}
    assert normalise_video_config('{"resolutions": [{"resolution": "480p", '
                                  '"duration_unit_price": "0.05"}]}')["resolutions"][0][
        "resolution"] == "480p"


def test_unpriced_resolutions_dropped_and_duplicates_last_wins() -> None:
    config = normalise_video_config({"resolutions": [
        {"resolution": "1080p", "duration_unit_price": "0"},
        {"resolution": "", "duration_unit_price": "1"},
        {"resolution": "720p", "duration_unit_price": "-1"},
        {"resolution": "480p", "duration_unit_price": "0.1"},
        {"resolution": "480P", "duration_unit_price": "0.2"},
    ]})
    assert config == {"resolutions": [
        {"resolution": "480p", "duration_unit_price": "0.2", "durations": []}]}


@pytest.mark.parametrize("value", [
    [], 5, "{bad json", {"resolutions": "x"}, {"resolutions": [1]},
    {"resolutions": [{"resolution": 720}]},
    {"resolutions": [{"resolution": "720p", "durations": {}}]},
    {"resolutions": [{"resolution": "720p", "durations": [{"seconds": "x", "price": 1}]}]},
    {"resolutions": [{"resolution": "720p", "durations": [{"seconds": 5}]}]},
    {"resolutions": [{"resolution": "720p", "duration_unit_price": "abc"}]},
])
def test_malformed_configs_are_refused(value: object) -> None:
    with pytest.raises(VideoConfigError):
        normalise_video_config(value)


def test_quota_type_100_requires_a_resolution() -> None:
    with pytest.raises(VideoConfigError, match="at least one resolution price"):
        validate_for_quota_type({"resolutions": []}, 100)
    validate_for_quota_type({"resolutions": []}, 0)
    validate_for_quota_type(normalise_video_config(
        {"resolutions": [{"resolution": "720p", "duration_unit_price": "0.1"}]}), 100)
