"""Runs ``tests.support.upstream.FakeUpstream`` in a process of its own for the browser tests.

The browser tests drive Chromium synchronously, so the fake upstream cannot share their
reactor; this runs it on its own and prints its base URL on the first line of stdout.
"""

from __future__ import annotations

import sys

from twisted.internet import reactor

from tests.support.upstream import FakeUpstream


def main() -> None:
    fake = FakeUpstream.start(reactor)
    if len(sys.argv) > 1:
        fake.api_key = sys.argv[1]
    print(fake.base_url, flush=True)
    reactor.run()  # type: ignore[attr-defined]


if __name__ == "__main__":
    main()
