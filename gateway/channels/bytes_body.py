"""An ``IBodyProducer`` for a request body already in memory.

Twisted's ``FileBodyProducer`` drives a cooperator task (and so the global reactor) to copy a
file object in slices; for bodies we already hold as bytes, one ``write`` is both simpler and
cheaper.  Every outbound HTTP client in Lockgate (upstream relay, captcha, OIDC, payments,
sync) uses this one.
"""

from __future__ import annotations

from typing import Any

from twisted.internet.defer import Deferred, succeed
from twisted.web.iweb import IBodyProducer
from zope.interface import implementer


@implementer(IBodyProducer)
class BytesBody:
    def __init__(self, body: bytes) -> None:
        self._body = body
        self.length = len(body)

    def startProducing(self, consumer: Any) -> Deferred[None]:
        consumer.write(self._body)
        return succeed(None)

    def pauseProducing(self) -> None:
        pass

    def resumeProducing(self) -> None:
        pass

    def stopProducing(self) -> None:
        pass
