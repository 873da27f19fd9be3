"""The operations panel's wire form (agents contract §4.15)."""

from __future__ import annotations

from typing import Any

from console.services.studio.views import (
    approval_view,
    charter_view,
    company_view,
    objective_view,
    work_item_view,
)
from gateway.assistant.record_views import timestamp
from gateway.billing.money import format_nanos
from gateway.store.studio.panel import Panel


def panel_view(p: Panel) -> dict[str, Any]:
    view: dict[str, Any] = {
        "company": company_view(p.company),
        "objectives": [objective_view(o) for o in p.objectives],
        "work_items": [work_item_view(w) for w in p.work_items],
        "approvals": [approval_view(a) for a in p.approvals],
        "budget": {"daily_limit": format_nanos(p.company.daily_budget_nanos),
                   "monthly_limit": format_nanos(p.company.monthly_budget_nanos),
                   "reserved": format_nanos(p.reserved_nanos),
                   "consumed": format_nanos(p.consumed_nanos),
                   "monthly_reserved": format_nanos(p.monthly_reserved_nanos)},
        "health": {"active_objectives": p.active_objectives,
                   "active_work_items": p.active_work_items,
                   "blocked_work_items": p.blocked_work_items,
                   "pending_approvals": len(p.approvals) + len(p.connector_approvals)},
        "balance_guard": {"current": format_nanos(p.balance_nanos),
                          "floor": format_nanos(p.company.balance_floor_nanos)},
        "connector_approvals": [
            {"id": t.id, "work_item_id": t.work_item_id, "work_item_title": t.work_item_title,
             "run_id": t.run_id, "action": t.action, "workspace_path": t.workspace_path,
             "payload": t.payload, "created_at": timestamp(t.created_at)}
            for t in p.connector_approvals]}
    if p.charter is not None:
        view["charter"] = charter_view(p.charter)
    return view
