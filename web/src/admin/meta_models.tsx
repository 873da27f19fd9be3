// Meta models: a public model name routed by a DSL program (§3 /admin/meta-models, API §6.3).
// The DSL source is validated by the API as it is typed (and on Validate), errors at line:col.
import { useEffect, useRef, useState } from "preact/hooks";
import { api, errorText } from "../api";
import { useAction, useResource } from "../data";
import { useSession } from "../session";
import { Alert, Check, Confirm, Dialog, Empty, Field, Loading, Select, Table, TextArea }
  from "../ui";

const PRICES: [string, string][] = [
  ["input_price", "Input price"],
  ["output_price", "Output price"],
  ["cached_input_price", "Cached input price"],
];

const BILLING_MODES = [
  { value: "actual", label: "actual — the routed model's prices" },
  { value: "meta", label: "meta — this meta model's prices" },
];

type MetaModel = Record<string, any> & { id: number; model_name: string; name: string;
  description: string; dsl: string; billing_mode: string; enabled: boolean;
  expose_referenced_models: boolean };

type Validation = { valid: boolean; errors: string[] };

/** How long the DSL source must rest before it is validated as typed. */
const VALIDATE_AFTER_MS = 600;

function MetaModelDialog({ item, onClose, onSaved }: { item: MetaModel | null;
  onClose: () => void; onSaved: () => void }) {
  const [modelName, setModelName] = useState(item?.model_name ?? "");
  const [label, setLabel] = useState(item?.name ?? "");
  const [description, setDescription] = useState(item?.description ?? "");
  const [dsl, setDsl] = useState(item?.dsl ?? "");
  const [billingMode, setBillingMode] = useState(item?.billing_mode ?? "actual");
  const [prices, setPrices] = useState<Record<string, string>>(
    Object.fromEntries(PRICES.map(([key]) => [key, item ? String(item[key] ?? "0") : ""])));
  const [enabled, setEnabled] = useState(item?.enabled ?? true);
  const [expose, setExpose] = useState(item?.expose_referenced_models ?? true);
  const [verdict, setVerdict] = useState("");
  const [problem, setProblem] = useState<string | null>(null);
  const action = useAction();
  /** the source being shown, so an answer about older text is dropped */
  const latest = useRef(dsl);
  latest.current = dsl;
  const body = () => ({
    model_name: modelName, name: label, description, dsl, billing_mode: billingMode,
    ...Object.fromEntries(PRICES.map(([key]) => [key, prices[key] || "0"])),
    enabled, expose_referenced_models: expose,
  });
  const validate = async () => {
    const source = dsl;
    setVerdict("");
    setProblem(null);
    try {
      const found = await api<Validation>("POST", "/api/meta-models/validate", body());
      if (latest.current !== source) return;
      if (found.valid) setVerdict("The program is valid");
      else setProblem(found.errors.join("; "));
    } catch (e) {
      if (latest.current === source) setProblem(errorText(e));
    }
  };
  useEffect(() => {
    if (!dsl.trim()) return undefined;
    const timer = setTimeout(() => void validate(), VALIDATE_AFTER_MS);
    return () => clearTimeout(timer);
  }, [dsl]);
  const save = async () => {
    const done = await action.run(() => (item
      ? api("PUT", `/api/meta-models/${item.id}`, body())
      : api("POST", "/api/meta-models", body())));
    if (done) onSaved();
  };
  return (
    <Dialog title={item ? "Edit meta model" : "Add meta model"} onClose={onClose}
      onSubmit={save} busy={action.busy} error={action.error}>
      <Field label="Public model name" value={modelName} onValue={setModelName} autoFocus />
      <Field label="Label" value={label} onValue={setLabel} placeholder="same as the name" />
      <TextArea label="Description" value={description} onValue={setDescription} rows={2} />
      <TextArea label="DSL source" value={dsl} rows={10}
        onValue={(v) => { setDsl(v); setVerdict(""); setProblem(null); }} />
      <div class="inline">
        <button type="button" onClick={validate}>Validate</button>
        {verdict && <span role="status">{verdict}</span>}
      </div>
      <Alert error={problem} />
      <Select label="Billing mode" value={billingMode} onValue={setBillingMode}
        options={BILLING_MODES} />
      <div class="grid">
        {PRICES.map(([key, text]) => (
          <Field key={key} label={text} value={prices[key]} inputMode="decimal" placeholder="0"
            onValue={(v) => setPrices((p) => ({ ...p, [key]: v }))} />
        ))}
      </div>
      <Check label="Enabled" checked={enabled} onChange={setEnabled} />
      <Check label="Expose referenced models" checked={expose} onChange={setExpose} />
    </Dialog>
  );
}

export function MetaModelsPage() {
  const { notify } = useSession();
  const list = useResource(() => api<MetaModel[]>("GET", "/api/meta-models"));
  const [editing, setEditing] = useState<MetaModel | "new" | null>(null);
  const [deleting, setDeleting] = useState<MetaModel | null>(null);
  const rows = list.data ?? [];
  return (
    <>
      <h1>Meta models</h1>
      <div class="toolbar">
        <button type="button" class="primary" onClick={() => setEditing("new")}>
          Add meta model
        </button>
      </div>
      <Alert error={list.error} />
      {list.loading && !list.data ? <Loading /> : rows.length === 0 ? (
        !list.error && <Empty text="No meta models yet" />
      ) : (
        <Table label="Meta models" rows={rows} rowKey={(m) => m.id} columns={[
          { title: "Public model name", cell: (m) => m.model_name },
          { title: "Label", cell: (m) => m.name || "—" },
          { title: "Billing mode", cell: (m) => m.billing_mode },
          { title: "Input price", cell: (m) => m.input_price },
          { title: "Output price", cell: (m) => m.output_price },
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
        <MetaModelDialog item={editing === "new" ? null : editing}
          onClose={() => setEditing(null)} onSaved={async () => {
            setEditing(null);
            notify("Meta model saved");
            await list.reload();
          }} />
      )}
      {deleting && (
        <Confirm title="Delete meta model" action="Delete"
          text={`Delete the meta model “${deleting.model_name}”? This cannot be undone.`}
          onClose={() => setDeleting(null)} onConfirm={async () => {
            await api("DELETE", `/api/meta-models/${deleting.id}`);
            notify("Meta model deleted");
            await list.reload();
          }} />
      )}
    </>
  );
}
