// First run: create the administrator, then continue signed in (§3 /setup).
import { useState } from "preact/hooks";
import { api } from "../api";
import { useAction } from "../data";
import { useSession } from "../session";
import type { User } from "../session";
import { Alert, Field } from "../ui";

export function SetupPage() {
  const { signIn } = useSession();
  const [siteName, setSiteName] = useState("Lockgate");
  const [username, setUsername] = useState("");
  const [email, setEmail] = useState("");
  const [password, setPassword] = useState("");
  const action = useAction();
  const submit = async (event: Event) => {
    event.preventDefault();
    const done = await action.run(() => api<{ token: string; user: User }>("POST", "/api/setup", {
      site_name: siteName, username, email, password,
    }));
    if (done) signIn(done.token, done.user);
  };
  return (
    <>
      <h1>Set up Lockgate</h1>
      <p>Create the first administrator of this installation.</p>
      <form onSubmit={submit} noValidate>
        <Field label="Site name" value={siteName} onValue={setSiteName} />
        <Field label="Username" value={username} onValue={setUsername} autoComplete="username" />
        <Field label="Email" type="email" value={email} onValue={setEmail} autoComplete="email" />
        <Field label="Password" type="password" value={password} onValue={setPassword}
          autoComplete="new-password" />
        <Alert error={action.error} />
        <button type="submit" class="primary" disabled={action.busy}>Create administrator</button>
      </form>
    </>
  );
}
