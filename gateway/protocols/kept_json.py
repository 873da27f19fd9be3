"""JSON bytes that are kept for as long as a stream lasts, in an allocation of their own size.

``orjson.dumps`` writes into a buffer of at least ~4 KiB and hands that buffer back as the
``bytes`` object, only setting its length: ``orjson.dumps("gpt-4o")`` is 8 bytes of JSON in a
4 KiB allocation (measured with tracemalloc, orjson 3.13).  Thrown away at once that costs
nothing, but a value a translator keeps for the life of a stream costs 4 KiB of heap per open
stream -- two such values were a quarter of a streaming call's memory (bench/stream_memory.py).
``kept_dumps`` copies the JSON into a right-sized object; the copy is a ``memcpy`` of the
JSON's length.
"""

from __future__ import annotations

from typing import Any

import orjson


def kept_dumps(value: Any) -> bytes:
    """``orjson.dumps(value)`` in an allocation of its own length (for values kept long)."""
    return bytes(memoryview(orjson.dumps(value)))
