// Upstream channels: create/edit, Test (§6), their model configs, delete (§3 /admin/channels).
import { useState } from "preact/hooks";
import { api } from "../api";
import { useAction, useResource } from "../data";
import { useSession } from "../session";
import { Alert, Check, Confirm, Dialog, Empty, Field, Loading, Select, Table } from "../ui";

export const CHANNEL_TYPES = ["compat", "responses", "messages", "modelaction", "compat-video",
  "imgvideo", "artjob"];

type Config = { id: number; model_id: number; model_name: string; upstream_model_name: string;
  enabled: boolean };

type Channel = {
  id: number;
  name: string;
  type: string;
  base_url: string;
  user_channel_id: number | null;
  user_channel: { name: string } | null;
  has_api_key: boolean;
  api_key_masked: string;
  priority: number;
  weight: number;
  enabled: boolean;
  last_health_status: string;
  models: Config[];
  group_multipliers: { group_id: number; multiplier: string }[];
};

type Named = { id: number; name?: string; model_name?: string };

type TestOutcome = { success: boolean; status_code: number | null; latency_ms: number;
  message: string };

const DECIMAL = /^\d+(\.\d+)?$/;

function initialMultipliers(item: Channel | null): Record<number, string> {
  return Object.fromEntries((item?.group_multipliers ?? [])
    .map((m) => [m.group_id, m.multiplier]));
}

function ChannelDialog({ item, userChannels, groups, onClose, onSaved }: {
  item: Channel | null; userChannels: Named[]; groups: Named[]; onClose: () => void;
  onSaved: () => void }) {
  const [name, setName] = useState(item?.name ?? "");
  const [type, setType] = useState(item?.type ?? "compat");
  const [baseUrl, setBaseUrl] = useState(item?.base_url ?? "");
  const [key, setKey] = useState("");
  const [uc, setUc] = useState(item?.user_channel_id ? String(item.user_channel_id)
    : userChannels[0] ? String(userChannels[0].id) : "");
  const [priority, setPriority] = useState(String(item?.priority ?? 1));
  const [weight, setWeight] = useState(String(item?.weight ?? 1));
  const [enabled, setEnabled] = useState(item?.enabled ?? true);
  const [multipliers, setMultipliers] = useState<Record<number, string>>(
    initialMultipliers(item));
  const action = useAction();
  const save = async () => {
    const given = groups.map((g) => ({ group: g, text: (multipliers[g.id] ?? "").trim() }))
      .filter((m) => m.text !== "");
    const bad = given.find((m) => !DECIMAL.test(m.text));
    if (bad) {
      action.setError(`The multiplier for ${bad.group.name} must be a number of at least 0`);
      return;
    }
    const items = given.map((m) => ({ group_id: m.group.id, multiplier: m.text }));
    const before = initialMultipliers(item);
    const changed = groups.some((g) => (multipliers[g.id] ?? "").trim() !== (before[g.id] ?? ""));
    const body: Record<string, unknown> = {
      name, type, base_url: baseUrl, user_channel_id: uc ? Number(uc) : null,
      priority: Number(priority), weight: Number(weight), enabled,
    };
    if (key) body.api_key = key;
    const done = await action.run(async () => {
      const saved = await (item ? api<Channel>("PUT", `/api/channels/${item.id}`, body)
        : api<Channel>("POST", "/api/channels", body));
      if (changed) await api("PUT", `/api/channels/${saved.id}/group-multipliers`, items);
      return saved;
    });
    if (done) onSaved();
  };
  return (
    <Dialog title={item ? "Edit channel" : "Add channel"} onClose={onClose} onSubmit={save}
      busy={action.busy} error={action.error}>
      <Field label="Name" value={name} onValue={setName} autoFocus />
      <Select label="Type" value={type} onValue={setType}
        options={CHANNEL_TYPES.map((t) => ({ value: t, label: t }))} />
      <Field label="Base URL" value={baseUrl} onValue={setBaseUrl} placeholder="https://…" />
      <Field label="API key" value={key} onValue={setKey} autoComplete="off"
        placeholder={item?.has_api_key ? `unchanged (${item.api_key_masked})` : ""} />
      <Select label="User channel" value={uc} onValue={setUc} options={[
        { value: "", label: "None" },
        ...userChannels.map((u) => ({ value: String(u.id), label: String(u.name) })),
      ]} />
      <Field label="Priority" value={priority} onValue={setPriority} inputMode="numeric" />
      <Field label="Weight" value={weight} onValue={setWeight} inputMode="numeric" />
      <Check label="Enabled" checked={enabled} onChange={setEnabled} />
      {groups.length > 0 && (
        <fieldset class="choices">
          <legend>Group multipliers</legend>
          <p class="hint">Empty means the group pays this channel at 1×.</p>
          {groups.map((g) => (
            <Field key={g.id} label={`Multiplier for ${g.name}`} value={multipliers[g.id] ?? ""}
              inputMode="decimal" placeholder="1"
              onValue={(v) => setMultipliers((m) => ({ ...m, [g.id]: v }))} />
          ))}
        </fieldset>
      )}
    </Dialog>
  );
}

function ModelsDialog({ channel, models, onClose, onChanged }: { channel: Channel;
  models: Named[]; onClose: () => void; onChanged: () => Promise<void> }) {
  const [modelId, setModelId] = useState(models[0] ? String(models[0].id) : "");
  const [upstream, setUpstream] = useState("");
  const action = useAction();
  const add = async () => {
    const done = await action.run(() => api("POST", `/api/channels/${channel.id}/models`, {
      model_id: Number(modelId), upstream_model_name: upstream,
    }));
    if (done) {
      setUpstream("");
      await onChanged();
    }
  };
  const remove = async (config: Config) => {
    const done = await action.run(() => api("DELETE", `/api/channel-models/${config.id}`));
    if (done) await onChanged();
  };
  return (
    <Dialog title="Channel models" onClose={onClose} error={action.error}
      footer={<button type="button" onClick={onClose}>Done</button>} hideCancel>
      <p>Models served by {channel.name}.</p>
      {channel.models.length === 0 ? <Empty text="No models on this channel yet" /> : (
        <Table label="Channel models" rows={channel.models} rowKey={(c) => c.id} columns={[
          { title: "Model", cell: (c) => c.model_name },
          { title: "Upstream model name", cell: (c) => c.upstream_model_name || "(same)" },
          { title: "Enabled", cell: (c) => (c.enabled ? "Yes" : "No") },
          { title: "Actions", cell: (c) => (
            <button type="button" onClick={() => remove(c)}>Remove</button>
          ) },
        ]} />
      )}
      <div class="inline">
        <Select label="Model" value={modelId} onValue={setModelId}
          options={models.map((m) => ({ value: String(m.id), label: String(m.model_name) }))} />
        <Field label="Upstream model name" value={upstream} onValue={setUpstream}
          placeholder="same as the model" />
        <button type="button" onClick={add} disabled={action.busy || !modelId}>Add model</button>
      </div>
    </Dialog>
  );
}

export function ChannelsPage() {
  const { notify } = useSession();
  const channels = useResource(() => api<Channel[]>("GET", "/api/channels"));
  const userChannels = useResource(() => api<Named[]>("GET", "/api/user-channels"));
  const models = useResource(() => api<Named[]>("GET", "/api/models"));
  const groups = useResource(() => api<Named[]>("GET", "/api/groups"));
  const [editing, setEditing] = useState<Channel | "new" | null>(null);
  const [modelsOf, setModelsOf] = useState<number | null>(null);
  const [deleting, setDeleting] = useState<Channel | null>(null);
  const [tests, setTests] = useState<Record<number, string>>({});
  const test = async (channel: Channel) => {
    setTests((t) => ({ ...t, [channel.id]: "Testing…" }));
    let text: string;
    try {
      const outcome = await api<TestOutcome>("POST", `/api/channels/${channel.id}/test`);
      text = outcome.success ? `OK (${outcome.latency_ms} ms)` : outcome.message;
    } catch (e) {
      text = e instanceof Error ? e.message : String(e);
    }
    setTests((t) => ({ ...t, [channel.id]: text }));
    void channels.reload();
  };
  const rows = channels.data ?? [];
  const groupName = (id: number) => String(groups.data?.find((g) => g.id === id)?.name ?? id);
  const current = rows.find((c) => c.id === modelsOf);
  return (
    <>
      <h1>Channels</h1>
      <div class="toolbar">
        <button type="button" class="primary" onClick={() => setEditing("new")}>Add channel</button>
      </div>
      <Alert error={channels.error} />
      {channels.loading && !channels.data ? <Loading /> : rows.length === 0 ? (
        !channels.error && <Empty text="No channels yet" />
      ) : (
        <Table label="Channels" rows={rows} rowKey={(c) => c.id} columns={[
          { title: "Name", cell: (c) => c.name },
          { title: "Type", cell: (c) => c.type },
          { title: "Base URL", cell: (c) => <span class="mono">{c.base_url}</span> },
          { title: "User channel", cell: (c) => c.user_channel?.name ?? "—" },
          { title: "Priority", cell: (c) => c.priority },
          { title: "Weight", cell: (c) => c.weight },
          { title: "Group multipliers", cell: (c) => c.group_multipliers
            .map((m) => `${groupName(m.group_id)}: ${m.multiplier}`).join(", ") || "—" },
          { title: "Models", cell: (c) => c.models.map((m) => m.model_name).join(", ") || "—" },
          { title: "Health", cell: (c) => (
            <span>{c.enabled ? c.last_health_status : "disabled"}
              {tests[c.id] && <span role="status" class="test-result"> {tests[c.id]}</span>}
            </span>
          ) },
          { title: "Actions", cell: (c) => (
            <div class="row-actions">
              <button type="button" onClick={() => setEditing(c)}>Edit</button>
              <button type="button" onClick={() => test(c)}>Test</button>
              <button type="button" onClick={() => setModelsOf(c.id)}>Models</button>
              <button type="button" class="danger" onClick={() => setDeleting(c)}>Delete</button>
            </div>
          ) },
        ]} />
      )}
      {editing && (
        <ChannelDialog item={editing === "new" ? null : editing}
          userChannels={userChannels.data ?? []} groups={groups.data ?? []} onClose={() => setEditing(null)}
          onSaved={async () => {
            setEditing(null);
            notify("Channel saved");
            await channels.reload();
          }} />
      )}
      {current && (
        <ModelsDialog channel={current} models={models.data ?? []}
          onClose={() => setModelsOf(null)} onChanged={channels.reload} />
      )}
      {deleting && (
        <Confirm title="Delete channel" action="Delete"
          text={`Delete the channel “${deleting.name}” and its model configs?`}
          onClose={() => setDeleting(null)}
          onConfirm={async () => {
            await api("DELETE", `/api/channels/${deleting.id}`);
            notify("Channel deleted");
            await channels.reload();
          }} />
      )}
    </>
  );
}
