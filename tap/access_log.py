"""Access-log lines in combined format with credentials removed from the query string.

Google-style clients may send the API key as ``?key=``; Twisted's default formatter would write
it to the log verbatim (gateway contract §3: never logged).
"""

from __future__ import annotations

import re
from typing import Any

from twisted.web.http import combinedLogFormatter

_SECRET_QUERY = re.compile(rb"([?&](?:key|api_key|token|access_token)=)[^&#]*", re.IGNORECASE)


def redact_uri(uri: bytes) -> bytes:
    if b"?" not in uri:
        return uri
    return _SECRET_QUERY.sub(rb"\1[redacted]", uri)


class _Redacted:
    """A read-only view of a request whose ``uri`` is redacted."""

    def __init__(self, request: Any) -> None:
        self._request = request
        self.uri = redact_uri(request.uri)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._request, name)


def redacting_log_formatter(timestamp: str, request: Any) -> str:
    return combinedLogFormatter(timestamp, _Redacted(request))
