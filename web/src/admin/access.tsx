// Who may use a user channel: its allowed groups and users, edited in one dialog (§3).
import { useState } from "preact/hooks";
import { api } from "../api";
import { useAction, useResource } from "../data";
import { useSession } from "../session";
import { Check, Dialog, Empty, Field, Loading } from "../ui";

type Group = { id: number; name: string };

/** The ids in a comma or space separated list, or the first entry that is not an id. */
function parseIds(text: string): { ids: number[]; bad: string | null } {
  const ids: number[] = [];
  for (const part of text.split(/[\s,]+/).filter(Boolean)) {
    if (!/^\d+$/.test(part)) return { ids, bad: part };
    ids.push(Number(part));
  }
  return { ids, bad: null };
}

function AccessDialog({ row, onClose, onSaved }: { row: any; onClose: () => void;
  onSaved: () => void }) {
  const groups = useResource(() => api<Group[]>("GET", "/api/groups"));
  const [chosen, setChosen] = useState<Set<number>>(new Set(
    (row.allowed_groups ?? []).map((g: any) => Number(g.group_id ?? g.id))));
  const [users, setUsers] = useState((row.allowed_users ?? [])
    .map((u: any) => u.user_id ?? u.id).join(", "));
  const action = useAction();
  const toggle = (id: number, on: boolean) => setChosen((current) => {
    const next = new Set(current);
    if (on) next.add(id); else next.delete(id);
    return next;
  });
  const save = async () => {
    const parsed = parseIds(users);
    if (parsed.bad !== null) {
      action.setError(`Allowed user ids must be whole numbers: “${parsed.bad}” is not`);
      return;
    }
    const done = await action.run(async () => {
      await api("PUT", `/api/user-channels/${row.id}/allowed-groups`,
        { group_ids: [...chosen].sort((a, b) => a - b) });
      return api("PUT", `/api/user-channels/${row.id}/allowed-users`, { user_ids: parsed.ids });
    });
    if (done) onSaved();
  };
  const list = groups.data ?? [];
  return (
    <Dialog title="Channel access" onClose={onClose} onSubmit={save} busy={action.busy}
      error={action.error || groups.error}>
      <p>Who may use {row.name}. With no groups and no users, everyone may.</p>
      <fieldset class="choices">
        <legend>Allowed groups</legend>
        {groups.loading && !groups.data ? <Loading /> : list.length === 0 ? (
          <Empty text="No groups yet" />
        ) : list.map((g) => (
          <Check key={g.id} label={g.name} checked={chosen.has(g.id)}
            onChange={(on) => toggle(g.id, on)} />
        ))}
      </fieldset>
      <Field label="Allowed user ids" value={users} onValue={setUsers}
        placeholder="e.g. 3, 17" inputMode="text" />
    </Dialog>
  );
}

/** The row action opening the access dialog. */
export function AccessButton({ row, reload }: { row: any; reload: () => Promise<void> }) {
  const { notify } = useSession();
  const [open, setOpen] = useState(false);
  return (
    <>
      <button type="button" onClick={() => setOpen(true)}>Access</button>
      {open && (
        <AccessDialog row={row} onClose={() => setOpen(false)} onSaved={async () => {
          setOpen(false);
          notify("Access saved");
          await reload();
        }} />
      )}
    </>
  );
}
