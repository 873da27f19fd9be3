"""The two ways a translation can fail, kept apart because the pipeline answers them differently.

``ProtocolError`` is the client's fault (a 400-class answer in the client's native error shape,
before any upstream call).  ``UpstreamFormatError`` means the upstream answered something we
cannot read or convert: the pipeline answers 502 ``Upstream request failed`` (contract §7.2)
and never shows the upstream body to the client.
"""

from __future__ import annotations


class ProtocolError(Exception):
    """A client request the gateway refuses: ``status``, human ``message``, OpenAI-style
    ``type`` (e.g. ``invalid_request_error``) and the offending ``param`` when there is one."""

    def __init__(self, status: int, message: str, type: str = "invalid_request_error",
                 param: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.type = type
        self.param = param

    def __repr__(self) -> str:
        return f"ProtocolError({self.status}, {self.message!r}, {self.type!r}, {self.param!r})"


class UpstreamFormatError(Exception):
    """The upstream body or stream event is not in the shape its protocol promises."""


def invalid(message: str, param: str | None = None) -> ProtocolError:
    """The common 400 ``invalid_request_error``."""
    return ProtocolError(400, message, "invalid_request_error", param)
