// System settings by section, saved as a partial update; configuration export / import.
import { useMemo, useState } from "preact/hooks";
import { api, apiBlob } from "../api";
import { useAction, useResource } from "../data";
import { useSession } from "../session";
import { Alert, Check, Field, Loading } from "../ui";

type Values = Record<string, unknown>;

function section(key: string): string {
  const head = key.split("_")[0];
  return head.charAt(0).toUpperCase() + head.slice(1);
}

function editable(value: unknown): boolean {
  return typeof value === "string" || typeof value === "number" || typeof value === "boolean";
}

export function SettingsPage() {
  const { notify } = useSession();
  const settings = useResource(() => api<Values>("GET", "/api/settings"));
  const [changes, setChanges] = useState<Values>({});
  const action = useAction();
  const transfer = useAction();
  const [file, setFile] = useState<File | null>(null);
  const groups = useMemo(() => {
    const out = new Map<string, string[]>();
    for (const key of Object.keys(settings.data ?? {}).sort()) {
      if (key.endsWith("_set") || !editable(settings.data?.[key])) continue;
      const name = section(key);
      out.set(name, [...(out.get(name) ?? []), key]);
    }
    return [...out.entries()];
  }, [settings.data]);
  const value = (key: string) => (key in changes ? changes[key] : settings.data?.[key]);
  const save = async (event: Event) => {
    event.preventDefault();
    const done = await action.run(() => api<Values>("PUT", "/api/settings", changes));
    if (done) {
      setChanges({});
      notify("Settings saved");
      await settings.reload();
    }
  };
  const exportConfig = async () => {
    const blob = await transfer.run(() => apiBlob("POST", "/api/settings/export", {}));
    if (!blob) return;
    const url = URL.createObjectURL(blob);
    const link = document.createElement("a");
    link.href = url;
    link.download = "lockgate-config.json";
    link.click();
    URL.revokeObjectURL(url);
    notify("Configuration exported");
  };
  const importConfig = async () => {
    if (!file) {
      transfer.setError("Choose a configuration file first");
      return;
    }
    const text = await file.text();
    const done = await transfer.run(async () => {
      let doc: unknown;
      try {
        doc = JSON.parse(text);
      } catch {
        throw new Error("Invalid configuration file");
      }
      return api("POST", "/api/settings/import", doc);
    });
    if (done) {
      notify("Configuration imported");
      await settings.reload();
    }
  };
  return (
    <>
      <h1>Settings</h1>
      <section aria-labelledby="transfer-title" class="panel">
        <h2 id="transfer-title">Export / import</h2>
        <div class="inline">
          <button type="button" onClick={exportConfig} disabled={transfer.busy}>Export</button>
          <div class="field">
            <label for="import-file">Configuration file</label>
            <input id="import-file" type="file" accept="application/json,.json"
              onChange={(e) => setFile((e.target as HTMLInputElement).files?.[0] ?? null)} />
          </div>
          <button type="button" onClick={importConfig} disabled={transfer.busy}>Import</button>
        </div>
        <Alert error={transfer.error} />
      </section>
      <Alert error={settings.error} />
      {settings.loading && !settings.data ? <Loading /> : settings.data && (
        <form onSubmit={save} noValidate>
          {groups.map(([name, keys]) => (
            <fieldset key={name} class="panel">
              <legend>{name}</legend>
              {keys.map((key) => {
                const current = value(key);
                return typeof current === "boolean" ? (
                  <Check key={key} label={key} checked={current}
                    onChange={(v) => setChanges((c) => ({ ...c, [key]: v }))} />
                ) : (
                  <Field key={key} label={key} value={String(current ?? "")}
                    onValue={(v) => setChanges((c) => ({ ...c, [key]: v }))} />
                );
              })}
            </fieldset>
          ))}
          <Alert error={action.error} />
          <div class="sticky-actions">
            <button type="submit" class="primary" disabled={action.busy}>Save</button>
          </div>
        </form>
      )}
    </>
  );
}
