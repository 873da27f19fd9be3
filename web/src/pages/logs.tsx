// The caller's own usage logs (§3 /logs).
import { LogsView } from "../logs_view";

export function LogsPage() {
  return (
    <>
      <h1>Usage logs</h1>
      <LogsView path="/api/user/logs" admin={false} />
    </>
  );
}
