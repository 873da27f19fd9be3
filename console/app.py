"""Mounts every console route group at its path (one Klein app per group).

Route groups are listed in ``MOUNTS``; each is a class with a class-level Klein ``app`` whose
routes are relative to its mount point.  Paths under ``/api`` and ``/auth`` that no group owns
answer a JSON 404.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from klein import Klein
from twisted.web.resource import Resource

from console.context import ConsoleContext
from console.routes.admin_users import AdminUserRoutes
from console.routes.announcements import AnnouncementRoutes
from console.routes.api_keys import ApiKeyRoutes, LegacyApiKeyRoutes
from console.routes.assistant_admin_settings import AssistantAdminSettingsRoutes
from console.routes.assistant_agents import AssistantAgentRoutes
from console.routes.assistant_sessions import AssistantSessionRoutes
from console.routes.assistant_skills import AssistantSkillRoutes
from console.routes.assistant_user_settings import (
    AssistantMcpServerRoutes,
    AssistantUserSettingsRoutes,
)
from console.routes.available_sandbox_hosts import AvailableSandboxHostRoutes
from console.routes.catalog import CatalogRoutes
from console.routes.channel_models import ChannelModelRoutes
from console.routes.channel_usage import ChannelUsageRoutes
from console.routes.channels import ChannelRoutes
from console.routes.check_in import CheckInRoutes
from console.routes.cloud_sandboxes import CloudSandboxRoutes
from console.routes.connector_links import ConnectorLinkRoutes
from console.routes.connector_tasks import ConnectorTaskRoutes
from console.routes.devices import DeviceRoutes
from console.routes.groups import GroupRoutes
from console.routes.logs import LogRoutes
from console.routes.me import MeRoutes
from console.routes.meta_models import MetaModelRoutes
from console.routes.models import ModelRoutes
from console.routes.oidc import OidcBindRoutes, OidcCallbackRoutes, OidcLoginRoutes
from console.routes.passkey_auth import PasskeyAuthRoutes
from console.routes.passkeys import PasskeyRoutes
from console.routes.password_auth import PasswordAuthRoutes
from console.routes.password_change import PasswordChangeRoutes
from console.routes.payment_notify import EpayNotifyRoutes, StripeNotifyRoutes
from console.routes.payments import PaymentRoutes
from console.routes.pricing import PricingRoutes
from console.routes.public import PublicSettingsRoutes
from console.routes.public_announcements import PublicAnnouncementRoutes
from console.routes.public_models import PublicModelsRoutes
from console.routes.public_status import PublicStatusRoutes
from console.routes.redeem import RedeemRoutes
from console.routes.redeem_codes import RedeemCodeRoutes
from console.routes.referral import ReferralRoutes
from console.routes.sandbox_hosts import SandboxHostRoutes
from console.routes.settings import SettingsRoutes
from console.routes.setup import SetupRoutes
from console.routes.stats import StatsRoutes
from console.routes.status_monitors import StatusMonitorRoutes
from console.routes.subscription_plans import SubscriptionPlanRoutes
from console.routes.updates import UpdateRoutes
from console.routes.user_channels import UserChannelRoutes
from console.routes.user_logs import UserLogRoutes
from console.routes.user_stats import UserStatsRoutes
from console.routes.user_subscriptions import PurchasablePlanRoutes, UserSubscriptionRoutes
from console.static import JsonNotFound

#: (mount path, route group factory)
MOUNTS: list[tuple[str, Callable[[ConsoleContext], Any]]] = [
    ("api/setup", SetupRoutes),
    ("api/user/check-in", CheckInRoutes),
    ("api/user/redeem-code", RedeemRoutes),
    ("api/redeem-codes", RedeemCodeRoutes),
    ("api/subscription-plans", SubscriptionPlanRoutes),
    ("api/meta-models", MetaModelRoutes),
    ("api/user/subscription", UserSubscriptionRoutes),
    ("api/user/subscription-plans", PurchasablePlanRoutes),
    ("api/user/referral", ReferralRoutes),
    ("api/groups", GroupRoutes),
    ("api/users", AdminUserRoutes),
    ("api/user-channels", UserChannelRoutes),
    ("api/channels", ChannelRoutes),
    ("api/channel-models", ChannelModelRoutes),
    ("api/models", ModelRoutes),
    ("api/status-monitors", StatusMonitorRoutes),
    ("api/public/status", PublicStatusRoutes),
    ("api/public/settings", PublicSettingsRoutes),
    ("api/settings", SettingsRoutes),
    ("api/user/me", MeRoutes),
    ("auth/password", PasswordAuthRoutes),
    ("api/user/password", PasswordChangeRoutes),
    ("api/user/api-keys", ApiKeyRoutes),
    ("api/user/api-key", LegacyApiKeyRoutes),
    ("api/user/catalog", CatalogRoutes),
    ("api/public/models", PublicModelsRoutes),
    ("api/pricing", PricingRoutes),
    ("auth/passkey", PasskeyAuthRoutes),
    ("api/user/passkeys", PasskeyRoutes),
    ("auth/login", OidcLoginRoutes),
    ("auth/callback", OidcCallbackRoutes),
    ("api/user/oidc", OidcBindRoutes),
    ("api/user/payment", PaymentRoutes),
    ("api/payment/yipay", EpayNotifyRoutes),
    ("api/payment/epay", EpayNotifyRoutes),
    ("api/payment/stripe", StripeNotifyRoutes),
    ("api/stats", StatsRoutes),
    ("api/user/stats", UserStatsRoutes),
    ("api/logs", LogRoutes),
    ("api/user/logs", UserLogRoutes),
    ("api/channel-usage", ChannelUsageRoutes),
    ("api/updates", UpdateRoutes),
    ("api/announcements", AnnouncementRoutes),
    ("api/public/announcements", PublicAnnouncementRoutes),
    # agent links (agents contract §1.13, §2, §3)
    ("api/user/advanced-chat/devices", DeviceRoutes),
    ("api/user/advanced-chat/connector-tasks", ConnectorTaskRoutes),
    ("api/user/advanced-chat/sandbox-hosts", AvailableSandboxHostRoutes),
    ("api/user/advanced-chat/cloud-sandboxes", CloudSandboxRoutes),
    ("api/advanced-chat/sandbox-hosts", SandboxHostRoutes),
    ("api/advanced-chat/connectors", ConnectorLinkRoutes),

    ("api/advanced-chat/settings", AssistantAdminSettingsRoutes),
    ("api/user/advanced-chat/settings", AssistantUserSettingsRoutes),
    ("api/user/advanced-chat/mcp-servers", AssistantMcpServerRoutes),
    ("api/user/advanced-chat/agents", AssistantAgentRoutes),
    ("api/user/advanced-chat/skills", AssistantSkillRoutes),
    ("api/user/advanced-chat/sessions", AssistantSessionRoutes),
]


class Mounted(Resource):
    """Hands a whole subtree to a Klein resource; the mount point itself routes as ``/``."""

    isLeaf = True

    def __init__(self, klein_resource: Resource) -> None:
        super().__init__()
        self._klein = klein_resource

    @property
    def klein_app(self) -> Klein:
        """The mounted group's Klein app (its ``url_map`` is what ``/openapi.json`` documents)."""
        app: Klein = self._klein._app  # type: ignore[attr-defined]
        return app

    def render(self, request: Any) -> Any:
        if not request.postpath:
            request.postpath = [b""]
        return self._klein.render(request)


class Branch(Resource):
    """An intermediate path segment: known children, JSON 404 for anything else."""

    def getChild(self, path: bytes, request: Any) -> Resource:
        return JsonNotFound()

    def render(self, request: Any) -> bytes:
        return JsonNotFound().render(request)


def mount_console(root: Resource, ctx: ConsoleContext,
                  extra: list[tuple[str, Callable[[ConsoleContext], Any]]] | None = None) -> None:
    """Attach every route group under ``root`` (which serves ``/``)."""
    for path, factory in MOUNTS + (extra or []):
        segments = [segment.encode() for segment in path.split("/")]
        parent = root
        for segment in segments[:-1]:
            child = parent.children.get(segment)
            if child is None:
                child = Branch()
                parent.putChild(segment, child)
            parent = child
        parent.putChild(segments[-1], Mounted(factory(ctx).app.resource()))
