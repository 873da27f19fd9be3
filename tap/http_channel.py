"""The HTTP/1.1 channel Lockgate's Site speaks: twisted.web's, with its parts put together.

``LockgateChannel`` is twisted.web's ``HTTPChannel`` with

- requests read by llhttp instead of twisted.web's Python line parser
  (``tap.llhttp_adapter``), and, where llhttp stops, the Upgrade hand-over and twisted.web's
  own parser (``tap.parser_handover``);
- bounded heads and bodies, refused politely in the route family's shape
  (``tap.request_refusals``);
- a response's head sent with its first body bytes in one ``send()`` (``tap.response_write``).

What is left here is what spans them: the attributes of every part live in slots
(``tap.slot_defaults``), as the request's do, since an open stream keeps its connection's
channel for its whole life; the addresses are looked up once per connection; and the end of a
connection releases every part's state.
"""

from __future__ import annotations

from typing import Any

from twisted.internet.protocol import connectionDone
from twisted.python.failure import Failure
from twisted.web.http import HTTPChannel
from twisted.web.server import Site

from tap import llhttp_adapter, parser_handover, request_refusals, response_write, slot_defaults
from tap.http_request import LockgateRequest
from tap.llhttp_adapter import LlhttpAdapter
from tap.response_write import HeadHolding

#: every attribute twisted.web's HTTPChannel (and its bases) sets on an instance;
#: ``callLater`` stays out (its class-level value is a method the factory replaces)
_TWISTED_SLOTS = (
    "_HTTPChannel__first_line", "_HTTPChannel__header", "_TimeoutMixin__timeoutCall",
    "_abortingCall", "_buffer", "_busyReceiving", "_command", "_dataBuffer",
    "_handlingRequest", "_networkProducer", "_path", "_receivedHeaderCount",
    "_receivedHeaderSize", "_requestProducer", "_requestProducerStreaming", "_savedTimeOut",
    "_transferDecoder", "_version", "_waitingForTransport", "connected", "factory", "length",
    "line_mode", "paused", "persistent", "requestFactory", "requests", "site", "timeOut",
    "transport",
)
#: each part's attributes with their first values, and this module's own
_STATE: dict[str, Any] = {**request_refusals.STATE, **parser_handover.STATE,
                          **llhttp_adapter.STATE, **response_write.STATE,
                          "_peer": None, "_host": None}
_SLOTS = (*_TWISTED_SLOTS, *_STATE, "_events")
_DEFAULTS = {**slot_defaults.class_defaults(HTTPChannel, _SLOTS), **_STATE}


class LockgateChannel(HeadHolding, LlhttpAdapter):
    """twisted.web's HTTP/1.1 channel with an llhttp request parser and bounded requests."""

    __slots__ = _SLOTS

    _peer: Any
    _host: Any

    def __init__(self) -> None:
        slot_defaults.fill(self, _DEFAULTS)
        super().__init__()
        self._events = []

    # HTTPChannel dels _command, _path and _version, which have no class default: a plain
    # slot delete is what a dict did (see tap.slot_defaults on why there is no __delattr__)

    def getPeer(self) -> Any:
        """The client's address, built once per connection: twisted.web asks for it (and for
        ``getHost``, a ``getsockname`` system call) on every request of a keep-alive
        connection, and neither changes while the connection lives."""
        if self._peer is None:
            self._peer = super().getPeer()
        return self._peer

    def getHost(self) -> Any:
        if self._host is None:
            self._host = super().getHost()
        return self._host

    def connectionLost(self, reason: Failure = connectionDone) -> None:
        if self._linger is not None and self._linger.active():
            self._linger.cancel()
        self._linger = None
        self._parser = None
        self._events.clear()
        super().connectionLost(reason)


class LockgateSite(Site):
    """A Site speaking ``LockgateChannel`` with ``LockgateRequest``s."""

    protocol = LockgateChannel  # type: ignore[assignment]  # HTTP/1.1 only (no h2 installed)

    def __init__(self, resource: Any, **kwargs: Any) -> None:
        kwargs.setdefault("requestFactory", LockgateRequest)
        super().__init__(resource, **kwargs)
