"""A name resolver with scripted answers, installed on a reactor for one test.

Outbound connections resolve names through ``reactor.nameResolver``
(``IReactorPluggableNameResolver``); ``ScriptedNames`` answers chosen names with chosen
addresses -- a list per lookup, so a name can change its answer between lookups (DNS rebinding)
-- and passes every other name to the resolver it replaced.
"""

from __future__ import annotations

from typing import Any

from twisted.internet.address import IPv4Address, IPv6Address
from twisted.internet.interfaces import IHostnameResolver, IResolutionReceiver
from zope.interface import implementer


@implementer(IHostnameResolver)
class ScriptedNames:
    """``answers[name]``: a list of answers; each lookup takes the next (the last repeats)."""

    def __init__(self, answers: dict[str, list[list[str]]],
                 fallback: IHostnameResolver | None = None) -> None:
        self.answers = {name.lower(): list(rounds) for name, rounds in answers.items()}
        self.fallback = fallback
        #: every name asked, in order
        self.asked: list[str] = []

    def resolveHostName(self, resolutionReceiver: IResolutionReceiver, hostName: str,
                        portNumber: int = 0, addressTypes: Any = None,
                        transportSemantics: str = "TCP") -> Any:
        name = hostName.lower()
        self.asked.append(name)
        rounds = self.answers.get(name)
        if rounds is None:
            assert self.fallback is not None, f"no scripted answer for {hostName}"
            return self.fallback.resolveHostName(resolutionReceiver, hostName, portNumber,
                                                 addressTypes, transportSemantics)
        answer = rounds.pop(0) if len(rounds) > 1 else rounds[0]
        resolutionReceiver.resolutionBegan(None)  # type: ignore[arg-type]
        for address in answer:
            kind = IPv6Address if ":" in address else IPv4Address
            resolutionReceiver.addressResolved(kind("TCP", address, portNumber))
        resolutionReceiver.resolutionComplete()
        return None

    def install(self, test: Any, reactor: Any) -> ScriptedNames:
        """Install on ``reactor`` until ``test`` ends (unknown names go to the old resolver)."""
        self.fallback = reactor.installNameResolver(self)
        test.addCleanup(reactor.installNameResolver, self.fallback)
        return self
