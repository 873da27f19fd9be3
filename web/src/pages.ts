// Every console page: path, heading (also the navigation link name) and who may use it (§3).
import type { FunctionComponent } from "preact";
import { DashboardPage } from "./pages/dashboard";
import { KeysPage } from "./pages/keys";
import { LogsPage } from "./pages/logs";
import { WalletPage } from "./pages/wallet";
import { ProfilePage } from "./pages/profile";
import { PricingPage } from "./pages/pricing";
import { StatusPage } from "./pages/status";
import { ChannelsPage } from "./admin/channels";
import { ModelsPage } from "./admin/models";
import { MetaModelsPage } from "./admin/meta_models";
import { UsersPage } from "./admin/users";
import { AllLogsPage } from "./admin/logs";
import { SettingsPage } from "./admin/settings";
import {
  AnnouncementsPage,
  GroupsPage,
  MonitorsPage,
  PlansPage,
  RedeemCodesPage,
  UserChannelsPage,
} from "./admin/simple";

export type Page = { path: string; title: string; component: FunctionComponent };

export const USER_PAGES: Page[] = [
  { path: "/dashboard", title: "Dashboard", component: DashboardPage },
  { path: "/keys", title: "API keys", component: KeysPage },
  { path: "/logs", title: "Usage logs", component: LogsPage },
  { path: "/wallet", title: "Wallet", component: WalletPage },
  { path: "/profile", title: "Profile", component: ProfilePage },
];

export const PUBLIC_PAGES: Page[] = [
  { path: "/pricing", title: "Pricing", component: PricingPage },
  { path: "/status", title: "Status", component: StatusPage },
];

export const ADMIN_PAGES: Page[] = [
  { path: "/admin/channels", title: "Channels", component: ChannelsPage },
  { path: "/admin/models", title: "Models", component: ModelsPage },
  { path: "/admin/meta-models", title: "Meta models", component: MetaModelsPage },
  { path: "/admin/user-channels", title: "User channels", component: UserChannelsPage },
  { path: "/admin/groups", title: "Groups", component: GroupsPage },
  { path: "/admin/users", title: "Users", component: UsersPage },
  { path: "/admin/logs", title: "All usage logs", component: AllLogsPage },
  { path: "/admin/settings", title: "Settings", component: SettingsPage },
  { path: "/admin/announcements", title: "Announcements", component: AnnouncementsPage },
  { path: "/admin/status-monitors", title: "Status monitors", component: MonitorsPage },
  { path: "/admin/subscriptions", title: "Subscription plans", component: PlansPage },
  { path: "/admin/redeem-codes", title: "Redeem codes", component: RedeemCodesPage },
];

export function findPage(path: string): Page | undefined {
  const clean = path.length > 1 ? path.replace(/\/+$/, "") : path;
  return [...USER_PAGES, ...PUBLIC_PAGES, ...ADMIN_PAGES].find((p) => p.path === clean);
}
