// Account details, password change, passkeys and SSO binding (§3 /profile).
import { useState } from "preact/hooks";
import { api, errorText, setToken } from "../api";
import { useAction, useResource } from "../data";
import { createCredential } from "../passkey";
import { useSession } from "../session";
import { Alert, Confirm, Empty, Field, Loading, Table, formatTime } from "../ui";

type Passkey = { id: number; name: string; created_at: string; last_used_at?: string };

function PasswordForm() {
  const { notify } = useSession();
  const method = useResource(() => api<{ method: string }>("GET", "/api/user/password/method"));
  const [current, setCurrent] = useState("");
  const [next, setNext] = useState("");
  const [code, setCode] = useState("");
  const action = useAction();
  const byCode = method.data?.method === "email_code";
  const sendCode = async () => {
    const done = await action.run(() => api("POST", "/api/user/password/email-code"));
    if (done) notify("Verification code sent");
  };
  const submit = async (event: Event) => {
    event.preventDefault();
    const body: Record<string, string> = { new_password: next };
    if (byCode) body.email_code = code;
    else body.current_password = current;
    const done = await action.run(() => api<{ token?: string }>("POST",
      "/api/user/password/change", body));
    if (done) {
      if (done.token) setToken(done.token);
      setCurrent("");
      setNext("");
      setCode("");
      notify("Password updated");
    }
  };
  return (
    <section class="panel" aria-labelledby="pw-title">
      <h2 id="pw-title">Change password</h2>
      {method.loading && !method.data ? <Loading /> : (
        <form onSubmit={submit} noValidate>
          {byCode ? (
            <div class="inline">
              <Field label="Email code" value={code} onValue={setCode} />
              <button type="button" onClick={sendCode}>Send code</button>
            </div>
          ) : (
            <Field label="Current password" type="password" value={current} onValue={setCurrent}
              autoComplete="current-password" />
          )}
          <Field label="New password" type="password" value={next} onValue={setNext}
            autoComplete="new-password" />
          <Alert error={action.error || method.error} />
          <button type="submit" class="primary" disabled={action.busy}>Change password</button>
        </form>
      )}
    </section>
  );
}

function Passkeys() {
  const { notify } = useSession();
  const list = useResource(() => api<Passkey[]>("GET", "/api/user/passkeys"));
  const [name, setName] = useState("");
  const [deleting, setDeleting] = useState<Passkey | null>(null);
  const action = useAction();
  const add = async () => {
    const done = await action.run(async () => {
      const options = await api<any>("POST", "/api/user/passkeys/register/options", {});
      let credential: Record<string, unknown>;
      try {
        credential = await createCredential(options);
      } catch (e) {
        throw new Error(`Passkey creation was cancelled: ${errorText(e)}`);
      }
      return api("POST", "/api/user/passkeys/register", { name: name || "Passkey", credential });
    });
    if (done) {
      setName("");
      notify("Passkey added");
      await list.reload();
    }
  };
  const rows = list.data ?? [];
  return (
    <section class="panel" aria-labelledby="pk-title">
      <h2 id="pk-title">Passkeys</h2>
      {list.loading && !list.data ? <Loading /> : rows.length === 0 ? (
        !list.error && <Empty text="No passkeys yet" />
      ) : (
        <Table label="Passkeys" rows={rows} rowKey={(p) => p.id} columns={[
          { title: "Name", cell: (p) => p.name },
          { title: "Created", cell: (p) => formatTime(p.created_at) },
          { title: "Last used", cell: (p) => formatTime(p.last_used_at) },
          { title: "Actions", cell: (p) => (
            <button type="button" class="danger" onClick={() => setDeleting(p)}>Delete</button>
          ) },
        ]} />
      )}
      <div class="inline">
        <Field label="Passkey name" value={name} onValue={setName} />
        <button type="button" onClick={add} disabled={action.busy}>Add passkey</button>
      </div>
      <Alert error={action.error || list.error} />
      {deleting && (
        <Confirm title="Delete passkey" action="Delete" text={`Delete the passkey ${deleting.name}?`}
          onClose={() => setDeleting(null)} onConfirm={async () => {
            await api("DELETE", `/api/user/passkeys/${deleting.id}`);
            notify("Passkey deleted");
            await list.reload();
          }} />
      )}
    </section>
  );
}

function SsoBind() {
  const action = useAction();
  const bind = async () => {
    const done = await action.run(() => api<{ auth_url: string }>("POST",
      "/api/user/oidc/bind-url", {}));
    if (done?.auth_url) window.location.assign(done.auth_url);
  };
  return (
    <section class="panel" aria-labelledby="sso-title">
      <h2 id="sso-title">Single sign-on</h2>
      <button type="button" onClick={bind} disabled={action.busy}>Bind SSO account</button>
      <Alert error={action.error} />
    </section>
  );
}

export function ProfilePage() {
  const { user, settings } = useSession();
  return (
    <>
      <h1>Profile</h1>
      <dl class="details">
        <dt>Username</dt><dd>{user?.username}</dd>
        <dt>Email</dt><dd>{user?.email}</dd>
        <dt>Group</dt><dd>{user?.group?.name ?? "—"}</dd>
      </dl>
      <PasswordForm />
      {settings.passkey_enabled && <Passkeys />}
      {settings.oidc_enabled && <SsoBind />}
    </>
  );
}
