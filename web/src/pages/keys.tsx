// API keys: list, create (plaintext shown once, W10), edit, enable/disable, rotate, reset, delete.
import { useState } from "preact/hooks";
import { api } from "../api";
import { useAction, useResource } from "../data";
import { useSession } from "../session";
import { Alert, Check, Confirm, Dialog, Empty, Field, Loading, Table } from "../ui";

export type ApiKey = {
  id: number;
  name: string;
  key_prefix: string;
  allowed_models: string[];
  allowed_user_channels: (number | string)[];
  allowed_ips: string[];
  quota_limit: string;
  enabled: boolean;
  usage: { request_count: number; total_cost: string };
  last_used_at: string | null;
};

function list(text: string): string[] {
  return text.split(/[\s,]+/).map((s) => s.trim()).filter(Boolean);
}

function CreatedDialog({ secret, onClose }: { secret: string; onClose: () => void }) {
  const [copied, setCopied] = useState("");
  const copy = async () => {
    try {
      await navigator.clipboard.writeText(secret);
      setCopied("Copied");
    } catch {
      (document.getElementById("new-api-key") as HTMLInputElement | null)?.select();
      setCopied("Press Ctrl+C to copy the selected key");
    }
  };
  return (
    <Dialog title="API key created" onClose={onClose} hideCancel
      footer={<>
        <button type="button" onClick={copy}>Copy</button>
        <button type="button" class="primary" onClick={onClose}>Done</button>
      </>}>
      <p>Copy the key now: it is not shown again.</p>
      <div class="field">
        <label for="new-api-key">New API key</label>
        <input id="new-api-key" readOnly value={secret} class="mono"
          onFocus={(e) => (e.target as HTMLInputElement).select()} />
      </div>
      <p role="status">{copied}</p>
    </Dialog>
  );
}

function EditDialog({ item, onClose, onSaved }: { item: ApiKey | null; onClose: () => void;
  onSaved: (secret?: string) => void }) {
  const [name, setName] = useState(item?.name ?? "");
  const [models, setModels] = useState((item?.allowed_models ?? []).join(", "));
  const [channels, setChannels] = useState((item?.allowed_user_channels ?? []).join(", "));
  const [ips, setIps] = useState((item?.allowed_ips ?? []).join(", "));
  const [quota, setQuota] = useState(item?.quota_limit ?? "0");
  const [enabled, setEnabled] = useState(item?.enabled ?? true);
  const action = useAction();
  const save = async () => {
    if (!item) {
      const created = await action.run(() =>
        api<{ api_key: string }>("POST", "/api/user/api-keys", { name }));
      if (created) onSaved(created.api_key);
      return;
    }
    const done = await action.run(() => api("PUT", `/api/user/api-keys/${item.id}`, {
      name, allowed_models: list(models),
      allowed_user_channels: list(channels).map((c) => (/^\d+$/.test(c) ? Number(c) : c)),
      allowed_ips: list(ips), quota_limit: quota || "0", enabled,
    }));
    if (done) onSaved();
  };
  return (
    <Dialog title={item ? "Edit key" : "Create key"} onClose={onClose} onSubmit={save}
      submitLabel={item ? "Save" : "Create"} busy={action.busy} error={action.error}>
      <Field label="Name" value={name} onValue={setName} autoFocus />
      {item && (
        <>
          <Field label="Allowed models" value={models} onValue={setModels}
            placeholder="all models" />
          <Field label="Allowed user channels" value={channels} onValue={setChannels}
            placeholder="all user channels" />
          <Field label="IP whitelist" value={ips} onValue={setIps} placeholder="any address" />
          <Field label="Quota" value={quota} onValue={setQuota} inputMode="decimal" />
          <Check label="Enabled" checked={enabled} onChange={setEnabled} />
        </>
      )}
    </Dialog>
  );
}

export function KeysPage() {
  const { notify } = useSession();
  const keys = useResource(() => api<ApiKey[]>("GET", "/api/user/api-keys"));
  const [editing, setEditing] = useState<ApiKey | null | "new">(null);
  const [secret, setSecret] = useState<string | null>(null);
  const [confirm, setConfirm] = useState<{ kind: "Delete" | "Rotate"; item: ApiKey } | null>(null);
  const rowAction = useAction();

  const toggle = async (item: ApiKey) => {
    const done = await rowAction.run(() =>
      api("PUT", `/api/user/api-keys/${item.id}`, { enabled: !item.enabled }));
    if (done) {
      notify(item.enabled ? "Key disabled" : "Key enabled");
      await keys.reload();
    }
  };
  const reset = async (item: ApiKey) => {
    const done = await rowAction.run(() =>
      api("POST", `/api/user/api-keys/${item.id}/reset-usage`));
    if (done) {
      notify("Usage reset");
      await keys.reload();
    }
  };
  const rows = keys.data ?? [];
  return (
    <>
      <h1>API keys</h1>
      <div class="toolbar">
        <button type="button" class="primary" onClick={() => setEditing("new")}>Create key</button>
      </div>
      <Alert error={keys.error || rowAction.error} />
      {keys.loading && !keys.data ? <Loading /> : rows.length === 0 ? (
        !keys.error && <Empty text="No API keys yet" />
      ) : (
        <Table label="API keys" rows={rows} rowKey={(k) => k.id} columns={[
          { title: "Name", cell: (k) => k.name },
          { title: "Key", cell: (k) => <span class="mono">{k.key_prefix}…</span> },
          { title: "Status", cell: (k) => (k.enabled ? "Enabled" : "Disabled") },
          { title: "Requests", cell: (k) => k.usage?.request_count ?? 0 },
          { title: "Cost", cell: (k) => k.usage?.total_cost ?? "0" },
          { title: "Quota", cell: (k) => (k.quota_limit === "0" ? "Unlimited" : k.quota_limit) },
          { title: "Actions", cell: (k) => (
            <div class="row-actions">
              <button type="button" onClick={() => setEditing(k)}>Edit</button>
              <button type="button" onClick={() => toggle(k)}>
                {k.enabled ? "Disable" : "Enable"}
              </button>
              <button type="button" onClick={() => setConfirm({ kind: "Rotate", item: k })}>
                Rotate
              </button>
              <button type="button" onClick={() => reset(k)}>Reset usage</button>
              <button type="button" class="danger"
                onClick={() => setConfirm({ kind: "Delete", item: k })}>Delete</button>
            </div>
          ) },
        ]} />
      )}
      {editing && (
        <EditDialog item={editing === "new" ? null : editing} onClose={() => setEditing(null)}
          onSaved={async (plaintext) => {
            setEditing(null);
            if (plaintext) setSecret(plaintext);
            else notify("Key saved");
            await keys.reload();
          }} />
      )}
      {secret && <CreatedDialog secret={secret} onClose={() => setSecret(null)} />}
      {confirm && (
        <Confirm title={`${confirm.kind} key`} action={confirm.kind}
          text={confirm.kind === "Delete"
            ? `Delete the key “${confirm.item.name}”? Clients using it stop working.`
            : `Rotate the key “${confirm.item.name}”? The old secret stops working at once.`}
          onClose={() => setConfirm(null)}
          onConfirm={async () => {
            if (confirm.kind === "Delete") {
              await api("DELETE", `/api/user/api-keys/${confirm.item.id}`);
              notify("Key deleted");
            } else {
              const rotated = await api<{ api_key: string }>(
                "POST", `/api/user/api-keys/${confirm.item.id}/rotate`);
              setSecret(rotated.api_key);
            }
            await keys.reload();
          }} />
      )}
    </>
  );
}
