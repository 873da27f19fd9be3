"""``--log-format json``: one JSON object per log event, for log shippers.

Twisted's own ``jsonFileLogObserver`` writes the events (every field, so ``request_id``,
``channel_id`` or ``upstream_status`` stay fields, not words in a sentence); the text a human
would have read is in ``log_format`` with the fields it names.  Each line is one object
(``recordSeparator=""``, newline-terminated) rather than RFC 7464 records, which is what
line-based shippers expect.  Events logged while a gateway call runs get that call's
``request_id`` (``gateway.log_context``) when they do not name one themselves.

twistd chooses its log observer before a plugin's service starts; the documented way to give
it another one is the application's ``ILogObserver`` component, which ``install`` sets when the
service is attached to twistd's application.
"""

from __future__ import annotations

import sys
from typing import IO, Any

from twisted.logger import ILogObserver, jsonFileLogObserver
from twisted.python.components import Componentized
from zope.interface import implementer

from gateway.observability.log_context import REQUEST_ID

HUMAN = "human"
JSON = "json"
FORMATS = (HUMAN, JSON)


@implementer(ILogObserver)
class RequestIdObserver:
    """Adds the current call's ``request_id`` to events that lack one, then passes them on."""

    def __init__(self, observer: ILogObserver) -> None:
        self._observer = observer

    def __call__(self, event: dict[str, Any]) -> None:
        if "request_id" not in event:
            request_id = REQUEST_ID.get()
            if request_id is not None:
                event = {**event, "request_id": request_id}
        self._observer(event)


def json_observer(out: IO[str]) -> ILogObserver:
    return RequestIdObserver(jsonFileLogObserver(out, recordSeparator=""))


def log_destination(twistd_options: Any) -> IO[str]:
    """Where twistd would have written: ``--logfile`` (``-`` = standard output), else standard
    output with ``-n`` and ``twistd.log`` when daemonized."""
    logfile = twistd_options.get("logfile") if twistd_options is not None else None
    if not logfile:
        nodaemon = twistd_options is None or twistd_options.get("nodaemon")
        logfile = "-" if nodaemon else "twistd.log"
    if logfile == "-":
        return sys.stdout
    return open(logfile, "a", encoding="utf-8")  # lives as long as the process


def install(application: Any, log_format: str, twistd_options: Any) -> None:
    """Make ``application``'s log observer the JSON one when ``log_format`` asks for it."""
    if log_format == JSON and isinstance(application, Componentized):
        application.setComponent(ILogObserver, json_observer(log_destination(twistd_options)))
