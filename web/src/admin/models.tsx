// Global models and prices, model sync and price sync from channels (§3 /admin/models).
import { useState } from "preact/hooks";
import { api } from "../api";
import { useAction, useResource } from "../data";
import { useSession } from "../session";
import { Alert, Check, Confirm, Dialog, Empty, Field, Loading, Select, Table } from "../ui";

const PRICES: [string, string][] = [
  ["input_price", "Input price"],
  ["output_price", "Output price"],
  ["cached_input_price", "Cached input price"],
  ["cache_write_input_price", "Cache write input price"],
  ["cache_write_1h_input_price", "Cache write (1 h) input price"],
  ["image_input_price", "Image input price"],
  ["image_output_price", "Image output price"],
  ["audio_input_price", "Audio input price"],
  ["audio_output_price", "Audio output price"],
];

const QUOTA_TYPES = [
  { value: "0", label: "0 — per million tokens" },
  { value: "1", label: "1 — per request" },
  { value: "100", label: "100 — per video second" },
];

type Model = Record<string, any> & { id: number; model_name: string; display_name: string;
  quota_type: number; enabled: boolean };

function ModelDialog({ item, onClose, onSaved }: { item: Model | null; onClose: () => void;
  onSaved: () => void }) {
  const [name, setName] = useState(item?.model_name ?? "");
  const [display, setDisplay] = useState(item?.display_name ?? "");
  const [quotaType, setQuotaType] = useState(String(item?.quota_type ?? 0));
  const [prices, setPrices] = useState<Record<string, string>>(
    Object.fromEntries(PRICES.map(([key]) => [key, item ? String(item[key] ?? "0") : ""])));
  const [video, setVideo] = useState(item?.video_billing_config
    ? JSON.stringify(item.video_billing_config) : "");
  const [enabled, setEnabled] = useState(item?.enabled ?? true);
  const action = useAction();
  const save = async () => {
    const body: Record<string, unknown> = { model_name: name, display_name: display,
      quota_type: Number(quotaType), enabled };
    for (const [key] of PRICES) body[key] = prices[key] || "0";
    if (item) {
      for (const [key] of PRICES) body[`${key}_tiers`] = item[`${key}_tiers`] ?? [];
    }
    if (video.trim()) {
      try {
        body.video_billing_config = JSON.parse(video);
      } catch {
        action.setError("Video billing config must be JSON");
        return;
      }
    }
    const done = await action.run(() => (item
      ? api("PUT", `/api/models/${item.id}`, body) : api("POST", "/api/models", body)));
    if (done) onSaved();
  };
  return (
    <Dialog title={item ? "Edit model" : "Add model"} onClose={onClose} onSubmit={save}
      busy={action.busy} error={action.error}>
      <Field label="Model name" value={name} onValue={setName} autoFocus />
      <Field label="Display name" value={display} onValue={setDisplay} />
      <Select label="Quota type" value={quotaType} onValue={setQuotaType} options={QUOTA_TYPES} />
      <div class="grid">
        {PRICES.map(([key, label]) => (
          <Field key={key} label={label} value={prices[key]} inputMode="decimal" placeholder="0"
            onValue={(v) => setPrices((p) => ({ ...p, [key]: v }))} />
        ))}
      </div>
      {quotaType === "100" && (
        <Field label="Video billing config" value={video} onValue={setVideo}
          placeholder='{"resolutions": []}' />
      )}
      <Check label="Enabled" checked={enabled} onChange={setEnabled} />
    </Dialog>
  );
}

function PriceSyncDialog({ onClose, onDone }: { onClose: () => void; onDone: () => void }) {
  const channels = useResource(() => api<{ id: number; name: string }[]>("GET", "/api/channels"));
  const [channelId, setChannelId] = useState("");
  const [preview, setPreview] = useState<{ models: any[] } | null>(null);
  const action = useAction();
  const chosen = channelId || String(channels.data?.[0]?.id ?? "");
  const load = async () => {
    const found = await action.run(() => api<{ models: any[] }>("POST",
      "/api/models/prices/sync/preview", { channel_id: Number(chosen) }));
    if (found) setPreview(found);
  };
  const apply = async () => {
    const done = await action.run(() => api("POST", "/api/models/prices/sync/apply",
      { channel_id: Number(chosen), models: preview?.models ?? [] }));
    if (done) onDone();
  };
  return (
    <Dialog title="Sync prices" onClose={onClose} error={action.error || channels.error}
      onSubmit={preview ? apply : load} submitLabel={preview ? "Apply prices" : "Preview"}
      busy={action.busy}>
      <Select label="Channel" value={chosen} onValue={(v) => { setChannelId(v); setPreview(null); }}
        options={(channels.data ?? []).map((c) => ({ value: String(c.id), label: c.name }))} />
      {preview && <p>{preview.models.length} model prices found.</p>}
    </Dialog>
  );
}

export function ModelsPage() {
  const { notify } = useSession();
  const models = useResource(() => api<Model[]>("GET", "/api/models"));
  const [editing, setEditing] = useState<Model | "new" | null>(null);
  const [deleting, setDeleting] = useState<Model | null>(null);
  const [priceSync, setPriceSync] = useState(false);
  const sync = useAction();
  const [syncResult, setSyncResult] = useState("");
  const syncModels = async () => {
    const done = await sync.run(() => api<any>("POST", "/api/models/sync", {}));
    if (done) {
      const results: any[] = Array.isArray(done.results) ? done.results
        : Array.isArray(done) ? done : [];
      setSyncResult(results.length ? results.map((r) => r.error
        ? `${r.channel_name}: ${r.error}` : `${r.channel_name}: ${r.created} created, ${r.updated} updated`)
        .join("; ") : "Models synced");
      await models.reload();
    }
  };
  const rows = models.data ?? [];
  return (
    <>
      <h1>Models</h1>
      <div class="toolbar">
        <button type="button" class="primary" onClick={() => setEditing("new")}>Add model</button>
        <button type="button" onClick={syncModels} disabled={sync.busy}>Sync models</button>
        <button type="button" onClick={() => setPriceSync(true)}>Sync prices</button>
      </div>
      {syncResult && <p role="status">{syncResult}</p>}
      <Alert error={models.error || sync.error} />
      {models.loading && !models.data ? <Loading /> : rows.length === 0 ? (
        !models.error && <Empty text="No models yet" />
      ) : (
        <Table label="Models" rows={rows} rowKey={(m) => m.id} columns={[
          { title: "Model name", cell: (m) => m.model_name },
          { title: "Display name", cell: (m) => m.display_name || "—" },
          { title: "Quota type", cell: (m) => m.quota_type },
          { title: "Input price", cell: (m) => m.input_price },
          { title: "Output price", cell: (m) => m.output_price },
          { title: "Cached input price", cell: (m) => m.cached_input_price },
          { title: "Enabled", cell: (m) => (m.enabled ? "Yes" : "No") },
          { title: "Actions", cell: (m) => (
            <div class="row-actions">
              <button type="button" onClick={() => setEditing(m)}>Edit</button>
              <button type="button" class="danger" onClick={() => setDeleting(m)}>Delete</button>
            </div>
          ) },
        ]} />
      )}
      {editing && (
        <ModelDialog item={editing === "new" ? null : editing} onClose={() => setEditing(null)}
          onSaved={async () => {
            setEditing(null);
            notify("Model saved");
            await models.reload();
          }} />
      )}
      {priceSync && (
        <PriceSyncDialog onClose={() => setPriceSync(false)} onDone={async () => {
          setPriceSync(false);
          notify("Prices synced");
          await models.reload();
        }} />
      )}
      {deleting && (
        <Confirm title="Delete model" action="Delete"
          text={`Delete the model “${deleting.model_name}” and its channel configs?`}
          onClose={() => setDeleting(null)}
          onConfirm={async () => {
            await api("DELETE", `/api/models/${deleting.id}`);
            notify("Model deleted");
            await models.reload();
          }} />
      )}
    </>
  );
}
