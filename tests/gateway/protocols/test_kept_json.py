"""What a streaming call's translator keeps stays small: JSON it holds is right-sized.

Measured with tracemalloc over a thousand instances, so the figure is per object and not
noise.  The first test pins the orjson behaviour the module exists for (if a later orjson
shrinks its buffers, it fails and ``kept_json`` can go).
"""

from __future__ import annotations

import tracemalloc
from collections.abc import Callable
from typing import Any

import orjson
from twisted.trial.unittest import TestCase

from gateway.protocols.kept_json import kept_dumps
from gateway.protocols.request import parse_client_request
from gateway.protocols.translate import make_translator

COUNT = 1000


def bytes_each(make: Callable[[int], Any]) -> float:
    """Heap bytes each of ``COUNT`` objects made by ``make`` holds (tracemalloc)."""
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        kept = [make(i) for i in range(COUNT)]
        after = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    assert len(kept) == COUNT
    return (after - before) / COUNT


def stream_request(i: int, model: str = "gpt-4o") -> Any:
    return parse_client_request("chat", orjson.dumps({
        "model": model, "stream": True,
        "messages": [{"role": "user", "content": f"question number {i}"}]}))


class KeptJsonTests(TestCase):
    def test_orjson_hands_back_a_4_kib_allocation_for_a_short_value(self) -> None:
        assert bytes_each(lambda i: orjson.dumps(f"model-{i}")) > 3000

    def test_kept_dumps_is_the_same_json_in_its_own_size(self) -> None:
        value = {"model": "gpt-4o", "n": [1, 2.5, None], "text": "é"}
        assert kept_dumps(value) == orjson.dumps(value)
        assert bytes_each(lambda i: kept_dumps(f"model-{i}")) < 100


class TranslatorMemoryTests(TestCase):
    def test_a_same_protocol_stream_translator_with_its_upstream_body_stays_small(self) -> None:
        requests = [stream_request(i) for i in range(COUNT)]

        def translator_and_body(i: int) -> Any:
            # a renamed model: the upstream body is re-encoded (and kept while the stream runs)
            translator = make_translator("chat", "openai", requests[i], "upstream-model")
            return translator, translator.upstream_body()

        assert bytes_each(translator_and_body) < 1500

    def test_a_converting_stream_translator_stays_small(self) -> None:
        requests = [stream_request(i, "claude-x") for i in range(COUNT)]
        assert bytes_each(
            lambda i: make_translator("chat", "anthropic", requests[i], "claude-x")) < 1500
