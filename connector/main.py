"""The console scripts ``lockgate-connector`` and ``lockgate-sandboxd``: the only module of
the package that imports the global reactor.

Exit status: 0 when stopped by a signal, 2 on a usage error (argparse), 3 when the server
refused the token (401 / close 4401), 4 when another connection of the same device took over
(close 4409).
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Sequence

from twisted.internet.error import ReactorNotRunning
from twisted.logger import globalLogBeginner, textFileLogObserver

from connector.client import StopReason, run
from connector.config import parse_config

EXIT_CODES = {"stopped": 0, "revoked": 3, "superseded": 4}


def _main(argv: Sequence[str] | None, sandboxd: bool) -> int:
    config = parse_config(sys.argv[1:] if argv is None else argv, sandboxd)
    from twisted.internet import reactor
    from twisted.internet.defer import Deferred

    globalLogBeginner.beginLoggingTo([textFileLogObserver(sys.stderr)], redirectStandardIO=False)
    outcome: list[StopReason] = []

    def stop_reactor() -> None:
        with contextlib.suppress(ReactorNotRunning):
            reactor.stop()  # type: ignore[attr-defined]

    def finished(reason: StopReason) -> None:
        outcome.append(reason)
        stop_reactor()

    def failed(failure: object) -> None:
        print(f"{failure}", file=sys.stderr)
        outcome.append(StopReason("failed", str(failure)))
        stop_reactor()

    def start() -> None:
        Deferred.fromCoroutine(run(reactor, config)).addCallbacks(finished, failed)

    reactor.callWhenRunning(start)  # type: ignore[attr-defined]
    reactor.run()  # type: ignore[attr-defined]
    if not outcome:
        return 0
    return EXIT_CODES.get(outcome[0].kind, 1)


def connector_main(argv: Sequence[str] | None = None) -> None:
    """``lockgate-connector``: a connector device for this machine."""
    sys.exit(_main(argv, sandboxd=False))


def sandboxd_main(argv: Sequence[str] | None = None) -> None:
    """``lockgate-sandboxd``: a sandbox host running each sandbox's commands isolated."""
    sys.exit(_main(argv, sandboxd=True))


if __name__ == "__main__":
    connector_main()
