"""The admin and user assistant settings objects (agents contract §1.1, §1.2).

Admin: every field, builtin MCP servers with their headers.  User: the admin values a user's
client needs, the builtin servers without headers, the user's own servers with theirs, both
merged (builtin first), and the user's title/approval settings.
"""

from __future__ import annotations

from typing import Any

from gateway.assistant import admin_settings, mcp_servers
from gateway.settings.store import Settings
from gateway.store.assistant.rows import UserSettingsRow

MIRRORED = (
    "attachment_max_mb", "attachment_allowed_types", "file_storage_enabled",
    "file_storage_total_mb", "file_storage_auto_save_images_enabled",
    "file_storage_auto_save_videos_enabled", "assistant_mode_enabled",
    "assistant_mcp_tools_enabled", *admin_settings.CONNECTOR_SWITCHES,
    "scheduled_tasks_enabled", "message_delivery_enabled", "delivery_system_smtp_enabled",
    "enabled", "default_model",
)


def admin_values(settings: Settings) -> dict[str, Any]:
    """The stored admin settings (builtin servers in stored form)."""
    return admin_settings.read(settings.raw)


def admin_view(settings: Settings) -> dict[str, Any]:
    values = admin_values(settings)
    values["builtin_mcp_servers"] = mcp_servers.views(values["builtin_mcp_servers"],
                                                      with_headers=True)
    return values


def builtin_ids(settings: Settings) -> list[str]:
    return [server["id"] for server in admin_values(settings)["builtin_mcp_servers"]]


def user_view(settings: Settings, row: UserSettingsRow) -> dict[str, Any]:
    admin = admin_values(settings)
    builtin, custom = admin["builtin_mcp_servers"], row.custom_mcp_servers
    view: dict[str, Any] = {name: admin[name] for name in MIRRORED}
    view.update({
        # no per-user file storage is kept yet, so none is used
        "file_storage_used_bytes": 0,
        "mcp_servers": mcp_servers.views(mcp_servers.merged(builtin, custom),
                                         with_headers=False),
        "builtin_mcp_servers": mcp_servers.views(builtin, with_headers=False),
        "custom_mcp_servers": mcp_servers.views(custom, with_headers=True),
        "title_model_name": row.title_model_name,
        "title_generation_scope": row.title_generation_scope,
        "connector_approval_agent_id": row.connector_approval_agent_id,
    })
    if row.title_user_channel_id:
        view["title_user_channel_id"] = row.title_user_channel_id
    return view
