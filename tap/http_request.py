"""The Request class Lockgate's Site uses.

twisted.web parses every POST body's Content-Type through the ``email`` package to look for
form submissions (about 13% of a bare proxy's CPU, DESIGN.md).  The /v1 routes never take form
fields from ``request.args`` -- multipart uploads are parsed by the gateway itself -- so form
parsing is switched off there and kept for the console.

``LockgateChannel`` sets ``body_limit`` (the route family's cap) once the headers are in; a
streamed (chunked) body is counted as it arrives and the channel refuses it the moment it
passes the cap, so nothing past the cap is ever buffered.

Twisted's request attributes live in slots (``tap.slot_defaults``): an open stream keeps its
request for its whole life, and the ~1.5 KiB ``__dict__`` they would fill is a tenth of what a
stream costs.

A /v1 call learns of its client's hang-up through ``on_connection_lost``, the drain counter of
a request's end through ``when_done``: what ``notifyFinish().addErrback(hook)`` and
``.addBoth(hook)`` do, in the same order, without a Deferred made (and fired at the end) for
every request.

The first ``write`` of an answer has ``LockgateChannel`` hold the head twisted.web makes, so the
head and that write's body bytes leave in one ``send()`` (``tap.response_write``).

A /v1 request is started through the site's ``dispatch_budget`` when it has one
(``tap.dispatch_budget``): a burst of new requests is started a few per reactor turn.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from twisted.logger import Logger
from twisted.python.failure import Failure
from twisted.web.server import Request

from tap import slot_defaults

_log = Logger()

#: every attribute twisted.web's Request (and Componentized) sets on an instance, and ours
_SLOTS = (
    "_adapterCache", "_disconnected", "_encoder", "_forceSSL", "_inFakeHead",
    "_insecureSession", "_parsePOSTFormSubmission", "_secureSession", "appRootURL", "args",
    "channel", "chunked", "client", "clientproto", "code", "code_message", "content",
    "cookies", "etag", "finished", "host", "lastModified", "method", "notifications",
    "password", "path", "postpath", "prepath", "producer", "queued", "received_cookies",
    "requestHeaders", "responseHeaders", "sentLength", "site", "sitepath", "startedWriting",
    "streamingProducer", "transport", "uri", "user",
    "_body_received", "body_limit", "lockgate_model",
)
_DEFAULTS = {**slot_defaults.class_defaults(Request, _SLOTS),
             "lockgate_model": "", "body_limit": None, "_body_received": 0}
_fill_defaults = slot_defaults.filler(_DEFAULTS)


class _Hook:
    """Stands in ``Request.notifications`` for one hook: twisted.web errbacks that list on a
    lost connection and calls it back once the request is done with, and asks nothing else of
    its entries.  ``both``: the hook also hears the good end (``None``)."""

    __slots__ = ("_both", "_hook")

    def __init__(self, hook: Callable[[Failure | None], object], both: bool) -> None:
        self._hook: Callable[[Failure | None], object] | None = hook
        self._both = both

    def callback(self, _result: object) -> None:
        hook, self._hook = self._hook, None  # the hook (and what it holds) is let go
        if hook is not None and self._both:
            self._run(hook, None)

    def errback(self, reason: Failure) -> None:
        hook, self._hook = self._hook, None
        if hook is not None:
            self._run(hook, reason)

    @staticmethod
    def _run(hook: Callable[[Failure | None], object], reason: Failure | None) -> None:
        try:
            hook(reason)
        except Exception:  # as a Deferred's callback would: logged, the next ones still run
            _log.failure("a request-done hook failed")


class LockgateRequest(Request):
    __slots__ = _SLOTS

    #: lockgate_model: the model a /v1 call asked for, once it checked the name ("" otherwise):
    #: a metric label.  body_limit: the most body bytes this request may buffer; None when the
    #: channel sets no cap.
    lockgate_model: str
    body_limit: int | None
    _body_received: int

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        _fill_defaults(self)
        super().__init__(*args, **kwargs)

    def handleContentChunk(self, data: bytes) -> None:
        if self.body_limit is not None:
            self._body_received += len(data)
            if self._body_received > self.body_limit:
                channel: Any = self.channel  # a LockgateChannel: only it sets body_limit
                channel.body_over_limit(self.body_limit)
                return
        super().handleContentChunk(data)

    def write(self, data: bytes) -> None:
        if self.startedWriting:
            super().write(data)
            return
        # the first write: the channel sends the head with this write's body bytes
        # (tap.response_write); a channel of another kind writes as twisted.web does
        channel: Any = self.channel
        hold = getattr(channel, "hold_head", None)
        if hold is None:
            super().write(data)
            return
        hold()
        try:
            super().write(data)
        finally:
            channel.release_head()

    def on_connection_lost(self, hook: Callable[[Failure], object]) -> None:
        """Call ``hook(reason)`` if the connection is lost before this request is done with:
        exactly when, and in the same order as, an errback on ``notifyFinish()`` would run
        (it waits in the same list), without a Deferred."""
        self.notifications.append(_Hook(hook, False))  # type: ignore[arg-type]

    def when_done(self, hook: Callable[[Failure | None], object]) -> None:
        """Call ``hook`` once this request is done with: ``None`` when it was answered, the
        reason when its connection was lost first -- as ``notifyFinish().addBoth(hook)``."""
        self.notifications.append(_Hook(hook, True))  # type: ignore[arg-type]

    def requestReceived(self, command: bytes, path: bytes, version: bytes) -> None:
        if path.startswith(b"/v1/") or path.startswith(b"/v1beta/"):
            self._parsePOSTFormSubmission = False
        super().requestReceived(command, path, version)

    def process(self) -> None:
        # a /v1 request (form parsing off, above) starts within the site's per-turn budget;
        # an Upgrade request never waits (what follows its head belongs to whoever takes the
        # transport over, now)
        channel: Any = self.channel
        budget = None if self._parsePOSTFormSubmission else getattr(
            channel.site, "dispatch_budget", None)
        if budget is None or getattr(channel, "_upgrade_transport", None) is not None:
            super().process()
        else:
            budget.admit(self, super().process)

    def connectionLost(self, reason: Any) -> None:
        site = getattr(getattr(self, "channel", None), "site", None)
        budget = getattr(site, "dispatch_budget", None)
        if budget is not None:
            budget.forget(self)  # hung up while waiting for its turn: never started
        super().connectionLost(reason)


#: Request._cleanup dels ``content`` (and ``channel``, which has no class default)
slot_defaults.restore_on_delete(LockgateRequest, ("content",), _DEFAULTS)
