"""The Request class Lockgate's Site uses.

twisted.web parses every POST body's Content-Type through the ``email`` package to look for
form submissions (about 13% of a bare proxy's CPU, DESIGN.md).  The /v1 routes never take form
fields from ``request.args`` -- multipart uploads are parsed by the gateway itself -- so form
parsing is switched off there and kept for the console.

``LockgateChannel`` sets ``body_limit`` (the route family's cap) once the headers are in; a
streamed (chunked) body is counted as it arrives and the channel refuses it the moment it
passes the cap, so nothing past the cap is ever buffered.
"""

from __future__ import annotations

from typing import Any

from twisted.web.server import Request


class LockgateRequest(Request):
    #: the model a /v1 call asked for, once it checked the name ("" otherwise): a metric label
    lockgate_model = ""
    #: the most body bytes this request may buffer; None when the channel sets no cap
    body_limit: int | None = None
    _body_received = 0

    def handleContentChunk(self, data: bytes) -> None:
        if self.body_limit is not None:
            self._body_received += len(data)
            if self._body_received > self.body_limit:
                channel: Any = self.channel  # a LockgateChannel: only it sets body_limit
                channel.body_over_limit(self.body_limit)
                return
        super().handleContentChunk(data)

    def requestReceived(self, command: bytes, path: bytes, version: bytes) -> None:
        if path.startswith(b"/v1/") or path.startswith(b"/v1beta/"):
            self._parsePOSTFormSubmission = False
        super().requestReceived(command, path, version)
