// The public status page (§3 /status): each monitor with its latest state.
import { api } from "../api";
import { useResource } from "../data";
import { Alert, Empty, Loading, Table, formatTime } from "../ui";

type Monitor = { id: number; name: string; status: string; latency_ms: number | null;
  last_checked_at: string | null; uptime: number };

export function StatusPage() {
  const status = useResource(() => api<{ enabled: boolean; monitors: Monitor[] }>(
    "GET", "/api/public/status"));
  const rows = status.data?.monitors ?? [];
  return (
    <>
      <h1>Status</h1>
      <Alert error={status.error} />
      {status.loading && !status.data ? <Loading /> : rows.length === 0 ? (
        !status.error && <Empty text="No monitors are published" />
      ) : (
        <Table label="Status" rows={rows} rowKey={(m) => m.id} columns={[
          { title: "Service", cell: (m) => m.name },
          { title: "Status", cell: (m) => <span class={`state ${m.status}`}>{m.status}</span> },
          { title: "Latency", cell: (m) => (m.latency_ms == null ? "—" : `${m.latency_ms} ms`) },
          { title: "Uptime", cell: (m) => `${m.uptime}%` },
          { title: "Last checked", cell: (m) => formatTime(m.last_checked_at) },
        ]} />
      )}
    </>
  );
}
