"""The console scripts ``lockgate-connector`` and ``lockgate-sandboxd``: the package's entry
point, where ``twisted.internet.task.react`` provides the reactor (nothing here imports it).

Exit status: 0 when stopped by a signal, 2 on a usage error (argparse), 3 when the server
refused the token (401 / close 4401), 4 when another connection of the same device took over
(close 4409).
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Any

from twisted.internet.task import react
from twisted.logger import globalLogBeginner, textFileLogObserver

from connector.client import run
from connector.config import parse_config

EXIT_CODES = {"stopped": 0, "revoked": 3, "superseded": 4}


def _main(argv: Sequence[str] | None, sandboxd: bool) -> None:
    """Parse the options, then run the link under ``task.react`` (which owns the reactor and
    exits with the status the link ended with)."""
    config = parse_config(sys.argv[1:] if argv is None else argv, sandboxd)
    globalLogBeginner.beginLoggingTo([textFileLogObserver(sys.stderr)], redirectStandardIO=False)

    async def linked(reactor: Any) -> None:
        try:
            reason = await run(reactor, config)
        except Exception as exc:
            print(f"{exc}", file=sys.stderr)
            raise SystemExit(1) from None
        raise SystemExit(EXIT_CODES.get(reason.kind, 1))

    react(linked)


def connector_main(argv: Sequence[str] | None = None) -> None:
    """``lockgate-connector``: a connector device for this machine."""
    _main(argv, sandboxd=False)


def sandboxd_main(argv: Sequence[str] | None = None) -> None:
    """``lockgate-sandboxd``: a sandbox host running each sandbox's commands isolated."""
    _main(argv, sandboxd=True)


if __name__ == "__main__":
    connector_main()
