"""What a client sees of a task: the video task record and the compatible task data (§13.4, §13.6).

Built from the stored row only (a GET never waits on the upstream).  Our id is the id; the
upstream id is shown only as ``upstream_id``.  Money is a decimal string.  Pure.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from gateway.billing.money import format_decimal, format_nanos
from gateway.v1.tasks.status import TERMINAL, compat_name, error_of, progress, video_name


def _ts(value: Any) -> int:
    return int(value.timestamp()) if value is not None else 0


def _cost(row: dict[str, Any]) -> str:
    return format_nanos(int(row["charged_nanos"]) - int(row["refunded_nanos"]))


def _video_items(body: Any) -> list[Any] | None:
    if not isinstance(body, dict):
        return None
    result = body.get("task_result")
    if isinstance(result, dict) and isinstance(result.get("videos"), list):
        items = []
        for item in result["videos"]:
            if isinstance(item, dict):
                url = item.get("url") or item.get("video_url") or item.get("videoUrl")
                items.append({**item, "url": url} if url else dict(item))
        return items
    data = body.get("data")
    return data if data is not None else None


def video_record(row: dict[str, Any]) -> dict[str, Any]:
    """The video task family's record."""
    out: dict[str, Any] = {
        "id": row["id"], "object": "video.generation", "model": row["model_name"],
        "status": video_name(row["status"]), "cost": _cost(row),
        "upstream_id": row["upstream_task_id"] or row["id"],
        "created_at": _ts(row["created_at"]), "updated_at": _ts(row["updated_at"]),
    }
    body = row.get("last_response")
    if body is not None:
        out["upstream_response"] = body
        items = _video_items(body)
        if items is not None:
            out["data"] = items
    if row.get("error"):
        out["error"] = {"message": row["error"]}
    return out


def _result(body: Any, kind: str) -> dict[str, Any] | None:
    if not isinstance(body, dict):
        return None
    for source in (body, body.get("data")):
        if isinstance(source, dict):
            for name in ("result", "task_result", "taskResult"):
                if isinstance(source.get(name), dict):
                    return dict(source[name])
    data = body.get("data")
    if isinstance(data, list):
        images: list[Any] = []
        videos: list[Any] = []
        for item in data:
            if not isinstance(item, dict):
                continue
            video = item.get("video_url") or item.get("videoUrl") or (
                item.get("url") if kind == "video" else None)
            image = item.get("url") or item.get("image_url") or item.get("imageUrl")
            if video:
                videos.append({**item, "url": video})
            elif image:
                entry: dict[str, Any] = {"url": [image]}
                if "expires_at" in item:
                    entry["expires_at"] = item["expires_at"]
                images.append(entry)
        out: dict[str, Any] = {}
        if images:
            out["images"] = images
        if videos:
            out["videos"] = videos
        return out
    return None


def compat_data(row: dict[str, Any]) -> dict[str, Any]:
    """The compatible task family's data object."""
    body = row.get("last_response")
    status = row["status"]
    cost = Decimal(_cost(row))
    out: dict[str, Any] = {
        "id": row["id"], "task_id": row["id"], "status": compat_name(status),
        "cost": _cost(row), "credits_cost": format_decimal(cost * 10),
        "progress": row["progress"] if row.get("progress") is not None
        else progress(body, status),
        "created": _ts(row["created_at"]),
        "upstream_id": row["upstream_task_id"] or row["id"],
        "upstream_response": body if body is not None else {},
    }
    result = _result(body, row["kind"])
    if result is not None:
        out["result"] = result
    if status in TERMINAL and row.get("completed_at") is not None:
        out["completed"] = _ts(row["completed_at"])
        out["actual_time"] = max(0, _ts(row["completed_at"]) - _ts(row["created_at"]))
    error = error_of(body) or (row.get("error") or None)
    if error:
        out["error"] = error if isinstance(error, dict) else {"message": str(error)}
    return out


def artjob_view(row: dict[str, Any]) -> dict[str, Any]:
    """``GET /v1/artjob/:id``: the task data flattened around the result's image URLs."""
    data = compat_data(row)
    result = data.get("result") or {}
    urls: list[Any] = []
    for item in result.get("images") or []:
        if isinstance(item, dict):
            found = item.get("url")
            urls.extend(u for u in (found if isinstance(found, list) else [found]) if u)
    out: dict[str, Any] = {
        "id": data["id"], "task_id": data["task_id"], "status": data["status"],
        "progress": data["progress"], "cost": data["cost"],
        "credits_cost": data["credits_cost"], "image_urls": urls, "result": result,
        "upstream_id": data["upstream_id"], "upstream_response": data["upstream_response"]}
    if urls:
        out["grid_image_url"] = urls[0]
    body = row.get("last_response")
    for source in (body, body.get("data") if isinstance(body, dict) else None):
        if isinstance(source, dict):
            buttons = source.get("buttons", source.get("actions"))
            if isinstance(buttons, list):
                out["buttons"] = buttons
                break
    if "error" in data:
        out["error"] = data["error"]
    return out
