"""extract_usage: the §10.2 table, case by case, plus the encoders back to OpenAI shapes."""

from __future__ import annotations

import pytest

from gateway.billing.usage import Usage
from gateway.protocols.usage import chat_usage, extract_usage, responses_usage
from tests.gateway.protocols.recorded import load_json


def test_chat_cached_tokens_in_details_do_not_change_input():
    usage = extract_usage("chat", load_json("chat_response_text.json"))
    assert usage == Usage(input=2006, output=300, cache_read=1920)


def test_responses_usage_with_reasoning():
    usage = extract_usage("responses", load_json("responses_response_text.json"))
    assert usage == Usage(input=1036, output=87, cache_read=1024, reasoning=30)


def test_messages_style_cache_fields_are_added_to_input():
    usage = extract_usage("messages", load_json("messages_usage.json"))
    # input_tokens excludes cache; no total_tokens and the key is not prompt_tokens
    assert usage == Usage(input=21 + 3000 + 1000 + 500, output=393, cache_read=3000,
                          cache_write_5m=1000, cache_write_1h=500)


def test_messages_without_split_uses_creation_total_as_5m():
    usage = extract_usage("messages", {"input_tokens": 10, "cache_creation_input_tokens": 40,
                                       "cache_read_input_tokens": 0, "output_tokens": 3})
    assert usage == Usage(input=50, output=3, cache_write_5m=40)


@pytest.mark.parametrize("payload, expected_input", [
    # total == input + output -> input already contains the cache
    ({"input_tokens": 100, "output_tokens": 10, "total_tokens": 110,
      "cache_read_input_tokens": 60}, 100),
    # total != input + output -> it does not
    ({"input_tokens": 100, "output_tokens": 10, "total_tokens": 170,
      "cache_read_input_tokens": 60}, 160),
    # no total: prompt_tokens (chat style) includes the cache ...
    ({"prompt_tokens": 100, "completion_tokens": 10, "cache_read_input_tokens": 60}, 100),
    # ... input_tokens (Messages style) does not
    ({"input_tokens": 100, "output_tokens": 10, "cache_read_input_tokens": 60}, 160),
    # a write field alone also triggers the decision
    ({"prompt_tokens": 100, "completion_tokens": 10, "total_tokens": 110,
      "cache_write_input_tokens": 30}, 100),
    ({"input_tokens": 100, "output_tokens": 10, "cache_creation_1h_input_tokens": 30}, 130),
    # details-only cache read never changes input
    ({"input_tokens": 100, "output_tokens": 10,
      "input_tokens_details": {"cached_tokens": 90}}, 100),
])
def test_total_tokens_decision(payload, expected_input):
    usage = extract_usage("chat", payload)
    assert usage is not None and usage.input == expected_input


def test_explicit_read_wins_over_details():
    usage = extract_usage("chat", {"prompt_tokens": 50, "completion_tokens": 1,
                                   "total_tokens": 51, "cache_read_input_tokens": 20,
                                   "prompt_tokens_details": {"cached_tokens": 30}})
    assert usage.cache_read == 20


def test_missing_usage():
    assert extract_usage("chat", {"prompt_tokens": 5}) is None
    assert extract_usage("chat", {"completion_tokens": 5}) is None
    assert extract_usage("chat", {"usage": None, "choices": []}) is None
    assert extract_usage("chat", {"id": "x"}) is None
    assert extract_usage("chat", {"prompt_tokens": "5", "completion_tokens": 1}) is None
    assert extract_usage("responses", {"type": "response.created",
                                       "response": {"usage": None}}) is None


def test_wrappers_are_unwrapped():
    event = {"type": "response.completed",
             "response": {"usage": {"input_tokens": 3, "output_tokens": 4, "total_tokens": 7}}}
    assert extract_usage("responses", event) == Usage(input=3, output=4)
    start = {"type": "message_start", "message": {"usage": {"input_tokens": 9,
                                                            "output_tokens": 1}}}
    assert extract_usage("messages", start) == Usage(input=9, output=1)


def test_clamping():
    usage = extract_usage("chat", {"prompt_tokens": -5, "completion_tokens": -1,
                                   "total_tokens": -6,
                                   "prompt_tokens_details": {"cached_tokens": 7,
                                                             "audio_tokens": 3}})
    assert usage == Usage(input=7, output=0, cache_read=7, audio_in=3)
    media = extract_usage("chat", {"prompt_tokens": 1, "completion_tokens": 2,
                                   "image_input_tokens": 10,
                                   "completion_tokens_details": {"image_tokens": 9,
                                                                 "audio_tokens": 4}})
    assert media == Usage(input=10, output=13, image_in=10, image_out=9, audio_out=4)


def test_google_usage_adds_thoughts_and_tool_prompt():
    usage = extract_usage("modelaction", load_json("google_usage.json"))
    assert usage == Usage(input=1230, output=170, cache_read=1000, image_in=258, reasoning=120)
    assert extract_usage("modelaction", {"usageMetadata": {"promptTokenCount": 4,
                                                           "totalTokenCount": 4}}) == Usage(
        input=4, output=0)
    assert extract_usage("modelaction", {"usageMetadata": {"candidatesTokenCount": 4}}) is None


def test_encoders_round_trip_through_extraction():
    usage = Usage(input=100, output=40, cache_read=30, reasoning=10, audio_in=5)
    assert extract_usage("chat", chat_usage(usage)) == usage
    assert extract_usage("responses", responses_usage(usage)) == usage
    body = chat_usage(usage)
    assert body["total_tokens"] == 140
    assert body["prompt_tokens_details"]["cached_tokens"] == 30
    assert "cache_creation_input_tokens" not in body
    written = Usage(input=100, output=1, cache_write_5m=20, cache_write_1h=10)
    assert chat_usage(written)["cache_creation_input_tokens"] == 20
    assert extract_usage("chat", chat_usage(written)) == written


def test_details_cache_write_is_inside_input():
    usage = extract_usage("responses", {"input_tokens": 500, "output_tokens": 5,
                                        "total_tokens": 505,
                                        "input_tokens_details": {"cached_tokens": 100,
                                                                 "cache_write_tokens": 300}})
    assert usage == Usage(input=500, output=5, cache_read=100, cache_write_5m=300)


def test_messages_stream_reports_combine():
    from gateway.protocols.usage import merge_usage_objects
    start = {"input_tokens": 25, "cache_read_input_tokens": 100,
             "cache_creation_input_tokens": 0, "output_tokens": 1}
    delta = {"output_tokens": 15, "input_tokens": None}
    # the origin saw neither report as complete usage; combined they are
    assert extract_usage("messages", merge_usage_objects(start, delta)) == Usage(
        input=125, output=15, cache_read=100)


#: every key the OpenAI-style rules read, written out here (not taken from the module) so that
#: a key the plain-shape shortcut forgets shows up as a difference
_EVERY_KEY = ["prompt_tokens", "input_tokens", "inputTokens", "completion_tokens",
              "output_tokens", "outputTokens", "total_tokens", "cache_read_input_tokens",
              "cached_tokens", "cached_input_tokens", "cache_creation_input_tokens",
              "cache_write_input_tokens", "cache_creation_5m_input_tokens",
              "cache_write_5m_input_tokens", "cache_creation_1h_input_tokens",
              "cache_write_1h_input_tokens", "image_input_tokens", "audio_input_tokens",
              "image_output_tokens", "audio_output_tokens", "reasoning_output_tokens"]
_DETAIL_KEYS = ["prompt_tokens_details", "input_tokens_details", "completion_tokens_details",
                "output_tokens_details"]


def test_the_plain_shape_shortcut_reads_what_the_full_rules_read():
    """A usage object with no cache, detail or media field takes a shortcut; the same object
    forced through the full rules (a null ``cache_creation`` changes nothing there) must give
    the same ``Usage``, whatever other fields come along."""
    import random

    rng = random.Random(22)
    values = [0, 1, 7, 120, -3, 2.0, True, None, "9"]
    for _ in range(3000):
        usage: dict[str, object] = {}
        for key in rng.sample(_EVERY_KEY, rng.randint(1, 6)):
            usage[key] = rng.choice(values)
        if rng.random() < 0.5:
            usage[rng.choice(["prompt_tokens", "input_tokens"])] = rng.randint(0, 50)
            usage[rng.choice(["completion_tokens", "output_tokens"])] = rng.randint(0, 50)
        if rng.random() < 0.1:
            usage[rng.choice(_DETAIL_KEYS)] = {"cached_tokens": 3, "image_tokens": 2,
                                               "audio_tokens": 1, "reasoning_tokens": 4,
                                               "cache_write_tokens": 5}
        forced = {**usage, "cache_creation": None}
        assert extract_usage("chat", usage) == extract_usage("chat", forced), usage
        assert extract_usage("chat", {"usage": usage}) == extract_usage("chat", forced), usage
