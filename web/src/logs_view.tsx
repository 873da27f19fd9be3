// A usage-log list with filters and pagination, for the caller's logs and the admin's (§3).
import { useState } from "preact/hooks";
import { api, withQuery } from "./api";
import { useResource } from "./data";
import { Alert, Empty, Field, Loading, Select, Table, formatTime } from "./ui";

type Log = {
  id: number;
  user_id: number;
  api_key_id: number | null;
  model_name: string;
  input_tokens: number;
  output_tokens: number;
  cost: string;
  status: string;
  endpoint: string;
  response_time_ms: number | null;
  error_message?: string;
  created_at: string;
};

type Envelope = { items: Log[]; total: number; page: number; page_size: number };

const PAGE_SIZE = 20;

export function LogsView({ path, admin }: { path: string; admin: boolean }) {
  const [model, setModel] = useState("");
  const [keyId, setKeyId] = useState("");
  const [from, setFrom] = useState("");
  const [to, setTo] = useState("");
  const [userId, setUserId] = useState("");
  const [filters, setFilters] = useState<Record<string, string>>({});
  const [page, setPage] = useState(1);
  const keys = useResource(() => (admin ? Promise.resolve([])
    : api<{ id: number; name: string; key_prefix: string }[]>("GET", "/api/user/api-keys")));
  const logs = useResource(
    () => api<Envelope>("GET", withQuery(path, { ...filters, page, page_size: PAGE_SIZE })),
    [filters, page],
  );
  const apply = (event: Event) => {
    event.preventDefault();
    setPage(1);
    setFilters({ model, api_key_id: keyId, from, to, ...(admin ? { user_id: userId } : {}) });
  };
  const total = logs.data?.total ?? 0;
  const pages = Math.max(1, Math.ceil(total / PAGE_SIZE));
  const rows = logs.data?.items ?? [];
  return (
    <>
      <form class="filters" onSubmit={apply} noValidate>
        <Field label="Model" value={model} onValue={setModel} />
        {admin ? (
          <Field label="User ID" value={userId} onValue={setUserId} inputMode="numeric" />
        ) : (
          <Select label="API key" value={keyId} onValue={setKeyId} options={[
            { value: "", label: "All keys" },
            ...(keys.data ?? []).map((k) => ({ value: String(k.id),
              label: `${k.name} (${k.key_prefix}…)` })),
          ]} />
        )}
        <Field label="From" value={from} onValue={setFrom} placeholder="YYYY-MM-DD" />
        <Field label="To" value={to} onValue={setTo} placeholder="YYYY-MM-DD" />
        <button type="submit">Apply filters</button>
      </form>
      <Alert error={logs.error} />
      {logs.loading && !logs.data ? <Loading /> : rows.length === 0 ? (
        !logs.error && <Empty text="No usage logs" />
      ) : (
        <Table label="Usage logs" rows={rows} rowKey={(l) => l.id} columns={[
          { title: "Time", cell: (l) => formatTime(l.created_at) },
          ...(admin ? [{ title: "User", cell: (l: Log) => l.user_id }] : []),
          { title: "Model", cell: (l) => l.model_name },
          { title: "Input tokens", cell: (l) => l.input_tokens },
          { title: "Output tokens", cell: (l) => l.output_tokens },
          { title: "Cost", cell: (l) => l.cost },
          { title: "Status", cell: (l) => l.error_message ? `${l.status}: ${l.error_message}`
            : l.status },
          { title: "Latency", cell: (l) => (l.response_time_ms == null ? "—"
            : `${l.response_time_ms} ms`) },
        ]} />
      )}
      <div class="pager">
        <button type="button" disabled={page <= 1} onClick={() => setPage(page - 1)}>
          Previous page
        </button>
        <span>Page {page} of {pages} ({total} records)</span>
        <button type="button" disabled={page >= pages} onClick={() => setPage(page + 1)}>
          Next page
        </button>
      </div>
    </>
  );
}
