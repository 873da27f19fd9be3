"""Loading the hand-written recorded-style fixtures (JSON bodies and SSE streams) and reading
back the frames a translator produced, through the project's real SSE parser."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson

from gateway.protocols.sse import SSEEvent, SSEParser

FIXTURES = Path(__file__).parent / "fixtures"


def raw(name: str) -> bytes:
    return (FIXTURES / name).read_bytes()


def load_json(name: str) -> dict[str, Any]:
    return orjson.loads(raw(name))


def load_sse(name: str) -> list[SSEEvent]:
    parser = SSEParser()
    events = parser.feed(raw(name))
    assert parser.buffered == 0
    return events


def frames_to_events(frames: list[bytes]) -> list[SSEEvent]:
    parser = SSEParser()
    events = parser.feed(b"".join(frames))
    assert parser.buffered == 0, "a frame was not terminated"
    return events


def payloads(frames: list[bytes]) -> list[Any]:
    """Decoded data of each client frame ("[DONE]" kept as the string)."""
    result: list[Any] = []
    for event in frames_to_events(frames):
        result.append("[DONE]" if event.data == b"[DONE]" else orjson.loads(event.data))
    return result
