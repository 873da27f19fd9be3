"""The llhttp request parser a ``LockgateChannel`` reads its requests with, and its seams.

twisted.web's HTTPChannel parses a request line by line in Python (``LineReceiver``,
``headerReceived``, transfer decoders): about a tenth of the CPU a /v1 call costs (issue 22).
httptools (llhttp, in C) finds the same request line, headers and body pieces and calls the
channel back once per field.  This module holds what the channel needs around it: one parser
per connection, the exception a callback raises to stop llhttp mid-buffer, and the protocol a
WebSocket resource handed the connection to.
"""

from __future__ import annotations

from typing import Any

from httptools import HttpRequestParser
from twisted.protocols.policies import ProtocolWrapper


class Stop(Exception):
    """Raised from a parser callback once the channel refused the request: llhttp stops
    there, and nothing after it is parsed."""


def new(channel: Any) -> HttpRequestParser:
    """A parser calling back ``channel``'s ``on_*`` methods.

    After a request that closes the connection llhttp drops whatever follows without an
    error, as twisted.web does (the channel closes the connection once it has answered)."""
    parser = HttpRequestParser(channel)
    parser.set_dangerous_leniencies(lenient_data_after_close=True)
    return parser


def successor_of(transport: Any) -> Any:
    """The protocol a WebSocket resource connected to ``transport`` when it took it over
    (autobahn's ``WebSocketResource``: the wrapped protocol of a TLS transport, else
    ``transport.protocol``)."""
    if isinstance(transport, ProtocolWrapper):
        return transport.wrappedProtocol
    protocol = transport.protocol
    if isinstance(protocol, ProtocolWrapper):
        return protocol.wrappedProtocol
    return protocol
