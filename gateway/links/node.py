"""Everything agent links need on one node, built once by ``tap``: the hub, the task service,
the WebSocket endpoint and the long-poll service."""

from __future__ import annotations

from typing import Any

from gateway.links.endpoint import LinkEndpoint
from gateway.links.hub import LinkHub
from gateway.links.liveness import LivenessSweep
from gateway.links.long_poll import POLL_SECONDS, DevicePolling
from gateway.links.tasks import ConnectorTasks
from gateway.links.websocket import DeviceLink, DeviceLinkFactory
from gateway.state.protocol import SharedState
from gateway.store.pool import DBRunner


class AgentLinks:
    def __init__(self, db: DBRunner, state: SharedState, clock: Any, node: str = "",
                 poll_seconds: float = POLL_SECONDS) -> None:
        self.hub = LinkHub(db, state, clock, node)
        self.tasks = ConnectorTasks(db, self.hub)
        self.factory = DeviceLinkFactory(self.hub, self.tasks)
        self.endpoint = LinkEndpoint(db, self.factory)
        self.polling = DevicePolling(self.hub, self.tasks, poll_seconds)
        self.liveness = LivenessSweep(clock, self._watched)

    def _watched(self) -> list[DeviceLink]:
        return [link for link in self.hub.links.values() if isinstance(link, DeviceLink)]

    def start(self) -> None:
        self.hub.start()
        self.liveness.start()

    def stop(self) -> None:
        self.liveness.stop()
        self.hub.stop()
