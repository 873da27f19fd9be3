"""Creates an app's ``GatewayMetrics`` and points its scrape-time gauges at the live objects.

Why here: the metric families live in ``gateway.observability``, but the objects they read
(wallets, settler, task poller, shared state, the drain flag) are assembled by ``tap``; this is
the one place that knows both.
"""

from __future__ import annotations

from console.routes.updates import BUILD_VERSION
from gateway.catalog.cache import CatalogCache
from gateway.context import GatewayContext
from gateway.observability.metrics import GatewayMetrics
from gateway.state.protocol import SharedState
from gateway.v1.tasks.poller import TaskPoller


def open_metrics(catalog: CatalogCache) -> GatewayMetrics:
    """A fresh registry for one app; ``model`` labels are names in the catalogue right now."""

    def known_model(name: str) -> bool:
        return name in catalog.snapshot.models_by_name

    return GatewayMetrics(version=BUILD_VERSION, known_model=known_model)


def watch(metrics: GatewayMetrics, gateway: GatewayContext, tasks: TaskPoller,
          state: SharedState) -> None:
    """Let the scrape read reservations, queued settlements, polled tasks and Redis."""
    sources = metrics.sources
    wallets, settler = gateway.wallets, gateway.settler
    sources.reservations_open = lambda: wallets.open_reservations
    sources.settlement_queue_depth = lambda: settler.uncommitted
    sources.task_backlog = lambda: tasks.polling
    db = gateway.db
    sources.db_transactions = lambda: db.transactions
    if state.shared_across_processes:
        # ``available`` is the shared state's own verdict on Redis
        sources.shared_state_up = lambda: state.available
