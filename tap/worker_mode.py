"""What a process started by a ``--workers`` supervisor does differently from a lone one.

The supervisor (``tap.supervisor``) tells a worker about its place through the environment
(nothing an operator sets; the names are listed below): which inherited file descriptors are
its listening sockets, in the order of ``--listen``; its index; and, without Redis, the Unix
socket of the state hub.  A worker then

- listens on the inherited sockets instead of binding its own (``listeners``);
- uses the hub for its shared state and money holds (``HubState`` / ``HubWallets``);
- says which worker it is on ``/healthz`` and ``/readyz`` (``Lockgate-Worker: <i> pid=<pid>``);
- stops itself when the hub goes away (its supervisor is gone: it can no longer admit money
  exactly, and nobody would restart it).
"""

from __future__ import annotations

import os
import socket
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from twisted.application.internet import StreamServerEndpointService
from twisted.application.service import IService
from twisted.application.strports import service as strports_service
from twisted.internet.endpoints import AdoptedStreamServerEndpoint

from gateway.hub.client import HubState
from gateway.hub.wallets import HubWallets

#: environment of a worker process (set by the supervisor only)
INDEX = "LOCKGATE_WORKER_INDEX"
SOCKETS = "LOCKGATE_WORKER_SOCKETS"
HUB = "LOCKGATE_WORKER_HUB"

_FAMILIES = {"4": socket.AF_INET, "6": socket.AF_INET6}


@dataclass(frozen=True)
class WorkerSlot:
    index: int
    #: (file descriptor, address family) per ``--listen`` endpoint, in order
    sockets: tuple[tuple[int, int], ...]
    #: the state hub's Unix socket ("" with Redis)
    hub_path: str

    @classmethod
    def from_environ(cls, environ: Mapping[str, str]) -> WorkerSlot | None:
        if INDEX not in environ:
            return None
        sockets = []
        for item in environ.get(SOCKETS, "").split(","):
            if item:
                fd, _, family = item.partition("/")
                sockets.append((int(fd), _FAMILIES[family]))
        return cls(int(environ[INDEX]), tuple(sockets), environ.get(HUB, ""))

    @property
    def label(self) -> bytes:
        return f"{self.index} pid={os.getpid()}".encode()

    def hub(self, reactor: Any) -> tuple[HubState, HubWallets] | None:
        if not self.hub_path:
            return None
        state = HubState(reactor, self.hub_path)
        return state, HubWallets(state)


def environ_for(index: int, sockets: Iterable[tuple[int, int]], hub_path: str) -> dict[str, str]:
    """The variables that make a process worker ``index`` (``sockets``: child fd, family)."""
    families = {int(family): name for name, family in _FAMILIES.items()}
    return {INDEX: str(index),
            SOCKETS: ",".join(f"{fd}/{families[family]}" for fd, family in sockets),
            HUB: hub_path}


def listeners(endpoints: list[str], site: Any, reactor: Any,
              worker: WorkerSlot | None) -> list[IService]:
    """The listening services: the inherited sockets of a worker, else the endpoint strings."""
    if worker is None:
        return [strports_service(endpoint, site) for endpoint in endpoints]
    return [StreamServerEndpointService(AdoptedStreamServerEndpoint(reactor, fd, family), site)
            for fd, family in worker.sockets]
