// Users: search, balance, group, admin and enabled flags, delete (§3 /admin/users).
import { useState } from "preact/hooks";
import { api, withQuery } from "../api";
import { useAction, useResource } from "../data";
import { useSession } from "../session";
import { Alert, Check, Confirm, Dialog, Empty, Field, Loading, Select, Table } from "../ui";

type User = { id: number; username: string; email: string; balance: string; group_id: number;
  group: { name: string } | null; is_admin: boolean; enabled: boolean };

type Envelope = { items: User[]; total: number; page: number; page_size: number };

function UserDialog({ user, groups, onClose, onSaved }: { user: User;
  groups: { id: number; name: string }[]; onClose: () => void; onSaved: () => void }) {
  const [email, setEmail] = useState(user.email);
  const [balance, setBalance] = useState(user.balance);
  const [group, setGroup] = useState(String(user.group_id ?? ""));
  const [admin, setAdmin] = useState(user.is_admin);
  const [enabled, setEnabled] = useState(user.enabled);
  const action = useAction();
  const save = async () => {
    const body: Record<string, unknown> = { email, balance, is_admin: admin, enabled };
    if (group) body.group_id = Number(group);
    const done = await action.run(() => api("PUT", `/api/users/${user.id}`, body));
    if (done) onSaved();
  };
  return (
    <Dialog title="Edit user" onClose={onClose} onSubmit={save} busy={action.busy}
      error={action.error}>
      <p>{user.username}</p>
      <Field label="Email" value={email} onValue={setEmail} />
      <Field label="Balance" value={balance} onValue={setBalance} inputMode="decimal" />
      <Select label="Group" value={group} onValue={setGroup}
        options={groups.map((g) => ({ value: String(g.id), label: g.name }))} />
      <Check label="Administrator" checked={admin} onChange={setAdmin} />
      <Check label="Enabled" checked={enabled} onChange={setEnabled} />
    </Dialog>
  );
}

export function UsersPage() {
  const { notify } = useSession();
  const [search, setSearch] = useState("");
  const [query, setQuery] = useState("");
  const [page, setPage] = useState(1);
  const users = useResource(() => api<Envelope>("GET",
    withQuery("/api/users", { search: query, page, page_size: 20 })), [query, page]);
  const groups = useResource(() => api<{ id: number; name: string }[]>("GET", "/api/groups"));
  const [editing, setEditing] = useState<User | null>(null);
  const [deleting, setDeleting] = useState<User | null>(null);
  const rows = users.data?.items ?? [];
  const pages = Math.max(1, Math.ceil((users.data?.total ?? 0) / 20));
  return (
    <>
      <h1>Users</h1>
      <form class="filters" noValidate onSubmit={(e) => {
        e.preventDefault();
        setPage(1);
        setQuery(search);
      }}>
        <Field label="Search" value={search} onValue={setSearch} type="search" />
        <button type="submit">Search</button>
      </form>
      <Alert error={users.error} />
      {users.loading && !users.data ? <Loading /> : rows.length === 0 ? (
        !users.error && <Empty text="No users found" />
      ) : (
        <Table label="Users" rows={rows} rowKey={(u) => u.id} columns={[
          { title: "Username", cell: (u) => u.username },
          { title: "Email", cell: (u) => u.email },
          { title: "Balance", cell: (u) => u.balance },
          { title: "Group", cell: (u) => u.group?.name ?? "—" },
          { title: "Admin", cell: (u) => (u.is_admin ? "Yes" : "No") },
          { title: "Enabled", cell: (u) => (u.enabled ? "Yes" : "No") },
          { title: "Actions", cell: (u) => (
            <div class="row-actions">
              <button type="button" onClick={() => setEditing(u)}>Edit</button>
              <button type="button" class="danger" onClick={() => setDeleting(u)}>Delete</button>
            </div>
          ) },
        ]} />
      )}
      <div class="pager">
        <button type="button" disabled={page <= 1} onClick={() => setPage(page - 1)}>
          Previous page
        </button>
        <span>Page {page} of {pages}</span>
        <button type="button" disabled={page >= pages} onClick={() => setPage(page + 1)}>
          Next page
        </button>
      </div>
      {editing && (
        <UserDialog user={editing} groups={groups.data ?? []} onClose={() => setEditing(null)}
          onSaved={async () => {
            setEditing(null);
            notify("User saved");
            await users.reload();
          }} />
      )}
      {deleting && (
        <Confirm title="Delete user" action="Delete" text={`Delete ${deleting.username}?`}
          onClose={() => setDeleting(null)} onConfirm={async () => {
            await api("DELETE", `/api/users/${deleting.id}`);
            notify("User deleted");
            await users.reload();
          }} />
      )}
    </>
  );
}
