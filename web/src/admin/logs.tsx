// Every user's usage logs, with the user filter (§3 /admin/logs).
import { LogsView } from "../logs_view";

export function AllLogsPage() {
  return (
    <>
      <h1>All usage logs</h1>
      <LogsView path="/api/logs" admin />
    </>
  );
}
