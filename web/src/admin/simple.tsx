// The admin pages that are one list and one flat form each (§3).
import { useState } from "preact/hooks";
import { api, errorText } from "../api";
import { AccessButton } from "./access";
import { CrudPage } from "./crud";
import type { CrudSpec } from "./crud";

const ALGORITHMS = ["priority", "round_robin", "weighted_round_robin"]
  .map((v) => ({ value: v, label: v }));

const USER_CHANNELS: CrudSpec = {
  title: "User channels", noun: "user channel", endpoint: "/api/user-channels",
  emptyText: "No user channels yet",
  fields: [
    { key: "name", label: "Name" },
    { key: "description", label: "Description", kind: "textarea" },
    { key: "routing_algorithm", label: "Routing algorithm", kind: "select", options: ALGORITHMS },
    { key: "multiplier", label: "Multiplier", kind: "decimal", initial: "1" },
    { key: "rate_limit_enabled", label: "Rate limit enabled", kind: "bool", initial: false },
    { key: "rate_limit_requests_per_minute", label: "Requests per minute", kind: "number" },
    { key: "rate_limit_burst", label: "Burst", kind: "number" },
    { key: "enabled", label: "Enabled", kind: "bool" },
  ],
  columns: [
    { title: "Name", key: "name" }, { title: "Routing", key: "routing_algorithm" },
    { title: "Multiplier", key: "multiplier" }, { title: "Allowed groups", key: "allowed_groups" },
    { title: "Allowed users", key: "allowed_users" }, { title: "Enabled", key: "enabled" },
  ],
  rowActions: (row, reload) => <AccessButton row={row} reload={reload} />,
};

const GROUPS: CrudSpec = {
  title: "Groups", noun: "group", endpoint: "/api/groups", emptyText: "No groups yet",
  fields: [
    { key: "name", label: "Name" },
    { key: "multiplier", label: "Multiplier", kind: "decimal", initial: "1" },
    { key: "is_default", label: "Default", kind: "bool", initial: false },
  ],
  columns: [{ title: "Name", key: "name" }, { title: "Multiplier", key: "multiplier" },
    { title: "Default", key: "is_default" }],
};

const ANNOUNCEMENTS: CrudSpec = {
  title: "Announcements", noun: "announcement", endpoint: "/api/announcements",
  emptyText: "No announcements yet",
  fields: [
    { key: "title", label: "Title" },
    { key: "content", label: "Content", kind: "textarea" },
    { key: "sort_order", label: "Sort order", kind: "number", initial: "0" },
    { key: "enabled", label: "Enabled", kind: "bool" },
  ],
  columns: [{ title: "Title", key: "title" }, { title: "Sort order", key: "sort_order" },
    { title: "Enabled", key: "enabled" }],
};

function CheckNow({ row, reload }: { row: any; reload: () => Promise<void> }) {
  const [text, setText] = useState("");
  const check = async () => {
    setText("Checking…");
    try {
      const result = await api<any>("POST", `/api/status-monitors/${row.id}/check`);
      setText(String(result.status ?? result.last_status ?? "checked"));
      await reload();
    } catch (e) {
      setText(errorText(e));
    }
  };
  return (
    <>
      <button type="button" onClick={check}>Check now</button>
      {text && <span role="status"> {text}</span>}
    </>
  );
}

const MONITORS: CrudSpec = {
  title: "Status monitors", noun: "monitor", endpoint: "/api/status-monitors",
  emptyText: "No status monitors yet",
  fields: [
    { key: "name", label: "Name" },
    { key: "check_type", label: "Check type", kind: "select",
      options: ["http", "tcp"].map((v) => ({ value: v, label: v })) },
    { key: "target_url", label: "Target" },
    { key: "method", label: "Method", initial: "GET" },
    { key: "enabled", label: "Enabled", kind: "bool" },
  ],
  columns: [{ title: "Name", key: "name" }, { title: "Type", key: "check_type" },
    { title: "Target", key: "target_url" }, { title: "Status", key: "last_status" },
    { title: "Enabled", key: "enabled" }],
  rowActions: (row, reload) => <CheckNow row={row} reload={reload} />,
};

const PLANS: CrudSpec = {
  title: "Subscription plans", noun: "plan", endpoint: "/api/subscription-plans",
  emptyText: "No subscription plans yet",
  fields: [
    { key: "name", label: "Name" },
    { key: "description", label: "Description", kind: "textarea" },
    { key: "price", label: "Price", kind: "decimal" },
    { key: "reset_amount", label: "Reset amount", kind: "decimal" },
    { key: "reset_interval_days", label: "Reset interval (days)", kind: "number" },
    { key: "duration_days", label: "Duration (days)", kind: "number" },
    { key: "purchasable", label: "Purchasable", kind: "bool" },
    { key: "enabled", label: "Enabled", kind: "bool" },
  ],
  columns: [{ title: "Name", key: "name" }, { title: "Price", key: "price" },
    { title: "Reset amount", key: "reset_amount" }, { title: "Duration", key: "duration_days" },
    { title: "Enabled", key: "enabled" }],
};

const REDEEM_CODES: CrudSpec = {
  title: "Redeem codes", noun: "redeem code", endpoint: "/api/redeem-codes",
  emptyText: "No redeem codes yet",
  fields: [
    { key: "amount", label: "Amount", kind: "decimal" },
    { key: "count", label: "Count", kind: "number", initial: "1", createOnly: true },
    { key: "prefix", label: "Prefix", createOnly: true },
    { key: "max_uses", label: "Max uses", kind: "number", initial: "1" },
    { key: "enabled", label: "Enabled", kind: "bool" },
  ],
  columns: [{ title: "Code", key: "code" }, { title: "Amount", key: "amount" },
    { title: "Uses", key: "used_count" }, { title: "Max uses", key: "max_uses" },
    { title: "Enabled", key: "enabled" }],
};

export const UserChannelsPage = () => <CrudPage spec={USER_CHANNELS} />;
export const GroupsPage = () => <CrudPage spec={GROUPS} />;
export const AnnouncementsPage = () => <CrudPage spec={ANNOUNCEMENTS} />;
export const MonitorsPage = () => <CrudPage spec={MONITORS} />;
export const PlansPage = () => <CrudPage spec={PLANS} />;
export const RedeemCodesPage = () => <CrudPage spec={REDEEM_CODES} />;
