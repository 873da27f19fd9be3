"""Bubblewrap for the sandbox tests: skip on a developer machine without it, fail in CI.

Why its own step: the sandbox isolation tests are only worth anything when they run under the
real ``bwrap``; CI sets ``LOCKGATE_REQUIRE_SERVERS=1`` (as for PostgreSQL and Redis), so a CI
machine that lost bubblewrap fails loudly instead of passing with the isolation untested.
"""

from __future__ import annotations

import os

from twisted.trial.unittest import SkipTest

BWRAP = "/usr/bin/bwrap"


def require_bubblewrap() -> None:
    """Return when ``bwrap`` is installed; else SkipTest, or a failure under CI."""
    if os.access(BWRAP, os.X_OK):
        return
    if os.environ.get("LOCKGATE_REQUIRE_SERVERS"):
        raise AssertionError(f"bubblewrap is not installed ({BWRAP}); CI requires it")
    raise SkipTest("bubblewrap is not installed")
