"""The Request class Lockgate's Site uses.

twisted.web parses every POST body's Content-Type through the ``email`` package to look for
form submissions (about 13% of a bare proxy's CPU, DESIGN.md).  The /v1 routes never take form
fields from ``request.args`` -- multipart uploads are parsed by the gateway itself -- so form
parsing is switched off there and kept for the console.
"""

from __future__ import annotations

from twisted.web.server import Request


class LockgateRequest(Request):
    #: the model a /v1 call asked for, once it checked the name ("" otherwise): a metric label
    lockgate_model = ""

    def requestReceived(self, command: bytes, path: bytes, version: bytes) -> None:
        if path.startswith(b"/v1/") or path.startswith(b"/v1beta/"):
            self._parsePOSTFormSubmission = False
        super().requestReceived(command, path, version)
