"""Deterministic token estimates for when an upstream reports no usage (contract §10.3).

No tiktoken: it downloads its encodings at run time, which a gateway must not depend on.
The heuristic is the contract's last resort made precise: **ceil(UTF-8 bytes / 4)**, at least
1 for any non-empty text, summed per text (each message text, tool argument, ...).  For ASCII
that is the familiar "4 characters per token"; counting bytes rather than code points keeps
CJK and other multi-byte scripts from being under-estimated by a factor of 3-4.  Estimates
are used for reservations and for billing streams whose upstream reported nothing, so they
lean towards over- rather than under-counting.
"""

from __future__ import annotations

from collections.abc import Iterable

BYTES_PER_TOKEN = 4


def tokens_for_bytes(size: int) -> int:
    """Tokens for ``size`` UTF-8 bytes of text."""
    if size <= 0:
        return 0
    return (size + BYTES_PER_TOKEN - 1) // BYTES_PER_TOKEN


def estimate_tokens(text: str | bytes) -> int:
    """Tokens of one text: ceil(UTF-8 bytes / 4); 0 for empty, at least 1 otherwise."""
    if not text:
        return 0
    size = len(text) if isinstance(text, bytes) else len(text.encode("utf-8", "replace"))
    return tokens_for_bytes(size)


def estimate_texts(texts: Iterable[str]) -> int:
    """Sum of ``estimate_tokens`` over several texts (each non-empty text counts at least 1)."""
    return sum(estimate_tokens(text) for text in texts)
