"""The ``--metrics-listen`` listener and the site that counts the main listener's requests.

Why a listener of its own (operations contract §0): the scrape port stays off the public
listener and behind no credential, and each process is scraped at its own address.  It serves
``/metrics`` and the same ``/healthz`` and ``/readyz`` resources as the main listener (so a
probe answers the same on both); everything else is the ordinary JSON 404.
"""

from __future__ import annotations

from typing import Any

from prometheus_client.exposition import CONTENT_TYPE_PLAIN_0_0_4, generate_latest
from twisted.web.resource import Resource
from twisted.web.server import Request, Site

from console.static import JsonNotFound
from gateway.observability.metrics import GatewayMetrics
from tap.drain import CountingSite, InFlight

_CONTENT_TYPE = CONTENT_TYPE_PLAIN_0_0_4.encode("ascii")


class MetricsResource(Resource):
    """``GET /metrics``: the registry in the Prometheus text format 0.0.4."""

    isLeaf = True

    def __init__(self, metrics: GatewayMetrics) -> None:
        super().__init__()
        self._registry = metrics.registry

    def render_GET(self, request: Any) -> bytes:
        request.setHeader(b"content-type", _CONTENT_TYPE)
        request.setHeader(b"cache-control", b"no-store")
        return generate_latest(self._registry)


class _MetricsRoot(Resource):
    def getChild(self, path: bytes, request: Any) -> Resource:
        return JsonNotFound()

    def render(self, request: Any) -> bytes:
        return JsonNotFound().render(request)


class _QuietSite(Site):
    """No access log: a scrape every few seconds would drown the twistd log."""

    def startFactory(self) -> None:
        super().startFactory()
        self._logFile = None


def metrics_site(metrics: GatewayMetrics, main_root: Resource) -> Site:
    """The metrics listener's site; the probes are the main root's own resources."""
    root = _MetricsRoot()
    root.putChild(b"metrics", MetricsResource(metrics))
    for probe in (b"healthz", b"readyz"):
        root.putChild(probe, main_root.children[probe])
    site = _QuietSite(root)
    site.displayTracebacks = False
    return site


class MeteredSite(CountingSite):
    """The main listener's site, counting every finished request by family, model and code.

    The model is what a /v1 call put on the request (``lockgate_model``) once it had checked
    the name; the metrics turn a name outside the catalogue into ``other``.
    """

    def __init__(self, resource: Any, in_flight: InFlight, metrics: GatewayMetrics,
                 **kwargs: Any) -> None:
        super().__init__(resource, in_flight, **kwargs)
        self.metrics = metrics

    def getResourceFor(self, request: Request) -> Any:
        started = self.reactor.seconds()
        request.notifyFinish().addBoth(self._finished, request, started)
        return super().getResourceFor(request)

    def _finished(self, _result: object, request: Any, started: float) -> None:
        self.metrics.request_finished(request.path, getattr(request, "lockgate_model", ""),
                                      request.code, self.reactor.seconds() - started)
