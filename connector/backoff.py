"""Exponential back-off with jitter for reconnects: no thundering herd after a server restart.

Pure: the random source is injected so tests can pin the delays.
"""

from __future__ import annotations

import random as random_module
from collections.abc import Callable
from dataclasses import dataclass, field


@dataclass
class Backoff:
    """Delay before attempt n+1: ``min(cap, initial * 2**n)`` scaled by a factor in [0.5, 1]."""

    initial: float = 1.0
    cap: float = 60.0
    uniform: Callable[[float, float], float] = field(default=random_module.uniform)
    failures: int = 0

    def next_delay(self) -> float:
        """The delay to wait now; each call counts one more failure."""
        ceiling = min(self.cap, self.initial * (2 ** min(self.failures, 32)))
        self.failures += 1
        return ceiling * self.uniform(0.5, 1.0)

    def reset(self) -> None:
        """A link came up: the next failure starts from ``initial`` again."""
        self.failures = 0
