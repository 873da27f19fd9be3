"""Pure pieces of the task families: id/status extraction, vocabularies, pricing, body mapping."""

from __future__ import annotations

from typing import Any

import pytest

from gateway.v1.tasks.bodies import imgvideo_body
from gateway.v1.tasks.pricing import count_of, duration_of, resolution_of
from gateway.v1.tasks.status import (
    compat_name,
    normalise,
    progress,
    upstream_id,
    upstream_status,
    video_name,
)


@pytest.mark.parametrize(("body", "expected"), [
    ({"id": "a"}, "a"),
    ({"task_id": "b", "request_id": "r"}, "b"),
    ({"request_id": "r", "data": {"task_id": "inner"}}, "inner"),  # ours: data before request_id
    ({"request_id": "r", "data": [{"id": "first"}]}, "first"),
    ({"request_id": "r"}, "r"),
    ({"data": [{"url": "x"}]}, None),
    ({"id": "  "}, None),
    ([], None),
])
def test_upstream_id(body: Any, expected: str | None) -> None:
    assert upstream_id(body) == expected


@pytest.mark.parametrize(("word", "stored", "video", "compat"), [
    ("SUCCESS", "succeeded", "succeeded", "completed"),
    ("done", "succeeded", "succeeded", "completed"),
    ("error", "failed", "failed", "failed"),
    ("created", "queued", "queued", "pending"),
    ("in_progress", "processing", "processing", "processing"),
    ("canceled", "cancelled", "cancelled", "cancelled"),
    ("Weird", "weird", "weird", "weird"),
])
def test_vocabularies(word: str, stored: str, video: str, compat: str) -> None:
    assert normalise(word) == stored
    assert video_name(stored) == video
    assert compat_name(stored) == compat


def test_status_sources_and_progress() -> None:
    assert upstream_status({"data": {"taskStatus": "RUNNING"}}) == "running"
    assert upstream_status({"data": [{"url": "x"}]}) == "succeeded"
    assert upstream_status({}) is None
    assert progress({"data": {"progress": 42}}, "processing") == 42
    assert progress({}, "processing") == 50
    assert progress({}, "failed") == 100
    assert progress({}, "queued") == 0


def test_billing_fields() -> None:
    assert resolution_of({"size": "auto", "quality": "1920 * 1080"}) == "1920x1080"
    assert resolution_of({"width": 640, "height": 480}) == "640x480"
    assert resolution_of({}) is None
    assert duration_of({"duration": "8s"}) == 8
    assert duration_of({"video_duration": 4}) == 4
    assert duration_of({"duration": "long"}) is None
    assert count_of({"num_videos": 3}) == 3
    assert count_of({"n": 0}) == 1


def test_imgvideo_body_mapping() -> None:
    mapped = imgvideo_body({"model": "m", "first_frame_image": "img", "resolution": "portrait",
                            "duration_seconds": 6, "negative_prompt": "rain",
                            "camera_control": {"type": "pan"}}, "up-model")
    assert mapped == {"model_name": "up-model", "image": "img", "aspect_ratio": "9:16",
                      "duration": "6", "negative_prompt": "rain",
                      "camera_control": {"type": "pan"}}
    kept = imgvideo_body({"model": "m", "aspect_ratio": "4:3", "size": "1:1", "duration": 5},
                         "u")
    assert kept == {"model_name": "u", "aspect_ratio": "4:3", "duration": 5}
    odd = imgvideo_body({"size": "AUTO", "resolution": "WIDE:ISH"}, "u")
    assert odd["aspect_ratio"] == "wide:ish"
