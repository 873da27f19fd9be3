// One list-and-dialog page for the admin records whose form is a flat list of fields.
import type { ComponentChildren } from "preact";
import { useState } from "preact/hooks";
import { api } from "../api";
import { useAction, useResource } from "../data";
import { useSession } from "../session";
import type { Option } from "../ui";
import { Alert, Check, Confirm, Dialog, Empty, Field, Loading, Select, Table, TextArea } from "../ui";

export type FieldSpec = {
  key: string;
  label: string;
  /** ``number``: an integer sent as a JSON number; ``decimal``: money, sent as its string */
  kind?: "text" | "number" | "decimal" | "bool" | "textarea" | "select";
  options?: Option[];
  /** shown only when creating (e.g. a batch count) */
  createOnly?: boolean;
  initial?: string | boolean;
};

export type CrudSpec = {
  title: string;
  noun: string;
  endpoint: string;
  emptyText: string;
  fields: FieldSpec[];
  columns: { title: string; key: string }[];
  rowActions?: (row: any, reload: () => Promise<void>) => ComponentChildren;
};

type Row = Record<string, any> & { id: number | string };

function rowsOf(data: unknown): Row[] {
  if (Array.isArray(data)) return data as Row[];
  const items = (data as { items?: unknown })?.items;
  return Array.isArray(items) ? (items as Row[]) : [];
}

function initialValue(spec: FieldSpec, row: Row | null): string | boolean {
  if (row && row[spec.key] !== undefined && row[spec.key] !== null) {
    return spec.kind === "bool" ? Boolean(row[spec.key]) : String(row[spec.key]);
  }
  if (spec.initial !== undefined) return spec.initial;
  if (spec.kind === "bool") return true;
  return spec.options?.[0]?.value ?? "";
}

function RecordDialog({ spec, row, onClose, onSaved }: { spec: CrudSpec; row: Row | null;
  onClose: () => void; onSaved: () => void }) {
  const fields = spec.fields.filter((f) => !(row && f.createOnly));
  const [values, setValues] = useState<Record<string, string | boolean>>(
    Object.fromEntries(fields.map((f) => [f.key, initialValue(f, row)])));
  const action = useAction();
  const set = (key: string, value: string | boolean) => setValues((v) => ({ ...v, [key]: value }));
  const save = async () => {
    const body: Record<string, unknown> = {};
    for (const f of fields) {
      const value = values[f.key];
      if (f.kind === "number" || f.kind === "decimal") {
        if (value !== "") body[f.key] = f.kind === "number" ? Number(value) : value;
      } else {
        body[f.key] = value;
      }
    }
    const done = await action.run(() => (row
      ? api("PUT", `${spec.endpoint}/${row.id}`, body) : api("POST", spec.endpoint, body)));
    if (done) onSaved();
  };
  return (
    <Dialog title={`${row ? "Edit" : "Add"} ${spec.noun}`} onClose={onClose} onSubmit={save}
      busy={action.busy} error={action.error}>
      {fields.map((f) => {
        const value = values[f.key];
        if (f.kind === "bool") {
          return <Check key={f.key} label={f.label} checked={Boolean(value)}
            onChange={(v) => set(f.key, v)} />;
        }
        if (f.kind === "select") {
          return <Select key={f.key} label={f.label} value={String(value)}
            options={f.options ?? []} onValue={(v) => set(f.key, v)} />;
        }
        if (f.kind === "textarea") {
          return <TextArea key={f.key} label={f.label} value={String(value)}
            onValue={(v) => set(f.key, v)} />;
        }
        return <Field key={f.key} label={f.label} value={String(value)}
          inputMode={f.kind === "number" ? "numeric" : f.kind === "decimal" ? "decimal"
            : undefined}
          onValue={(v) => set(f.key, v)} />;
      })}
    </Dialog>
  );
}

function show(value: unknown): string {
  if (value === true) return "Yes";
  if (value === false) return "No";
  if (value === null || value === undefined || value === "") return "—";
  if (Array.isArray(value)) return value.map((v) => (typeof v === "object"
    ? v.name ?? v.group?.name ?? v.user?.username ?? v.id : v))
    .join(", ") || "—";
  if (typeof value === "object") return String((value as any).name ?? JSON.stringify(value));
  return String(value);
}

export function CrudPage({ spec }: { spec: CrudSpec }) {
  const { notify } = useSession();
  const list = useResource(() => api<unknown>("GET", spec.endpoint), [spec.endpoint]);
  const [editing, setEditing] = useState<Row | "new" | null>(null);
  const [deleting, setDeleting] = useState<Row | null>(null);
  const rows = rowsOf(list.data);
  return (
    <>
      <h1>{spec.title}</h1>
      <div class="toolbar">
        <button type="button" class="primary" onClick={() => setEditing("new")}>
          Add {spec.noun}
        </button>
      </div>
      <Alert error={list.error} />
      {list.loading && !list.data ? <Loading /> : rows.length === 0 ? (
        !list.error && <Empty text={spec.emptyText} />
      ) : (
        <Table label={spec.title} rows={rows} rowKey={(r) => r.id} columns={[
          ...spec.columns.map((c) => ({ title: c.title, cell: (r: Row) => show(r[c.key]) })),
          { title: "Actions", cell: (r: Row) => (
            <div class="row-actions">
              {spec.rowActions?.(r, list.reload)}
              <button type="button" onClick={() => setEditing(r)}>Edit</button>
              <button type="button" class="danger" onClick={() => setDeleting(r)}>Delete</button>
            </div>
          ) },
        ]} />
      )}
      {editing && (
        <RecordDialog spec={spec} row={editing === "new" ? null : editing}
          onClose={() => setEditing(null)} onSaved={async () => {
            setEditing(null);
            notify(`${spec.noun[0].toUpperCase()}${spec.noun.slice(1)} saved`);
            await list.reload();
          }} />
      )}
      {deleting && (
        <Confirm title={`Delete ${spec.noun}`} action="Delete"
          text={`Delete this ${spec.noun}? This cannot be undone.`}
          onClose={() => setDeleting(null)} onConfirm={async () => {
            await api("DELETE", `${spec.endpoint}/${deleting.id}`);
            notify(`${spec.noun[0].toUpperCase()}${spec.noun.slice(1)} deleted`);
            await list.reload();
          }} />
      )}
    </>
  );
}
