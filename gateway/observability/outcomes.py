"""How one upstream attempt ended, in the ``outcome`` vocabulary of operations contract §2."""

from __future__ import annotations

from gateway.channels.http import UpstreamResponse, UpstreamTimeout


def attempt_outcome(response: UpstreamResponse | None, error: Exception | None,
                    cut: bool) -> str:
    """``response``: what the upstream answered (None: nothing); ``error``: why not;
    ``cut``: the answer broke off after its headers (or the call failed after them)."""
    if response is None:
        if isinstance(error, UpstreamTimeout):
            return "timeout"
        if error is not None:
            return "connect_error"
        return "cut"  # the client left while the upstream was being asked
    code = response.code
    if code == 429:
        return "status_429"
    if code >= 500:
        return "status_5xx"
    if code >= 400:
        return "status_4xx"
    return "cut" if cut else "ok"
