// Sign in: password, passkey, SSO and extra providers as the public settings allow (§3 /login).
import { useState } from "preact/hooks";
import { api, errorText } from "../api";
import { useAction } from "../data";
import { Captcha } from "../captcha";
import { getAssertion } from "../passkey";
import { useSession } from "../session";
import type { User } from "../session";
import { Alert, Field, Link } from "../ui";

type Provider = { name?: string; display_name?: string; login_url?: string; url?: string;
  id?: string; slug?: string };

function providerLinks(raw: unknown): { name: string; href: string }[] {
  if (!Array.isArray(raw)) return [];
  return raw.flatMap((p: Provider) => {
    const name = p.display_name || p.name || p.slug || p.id;
    const href = p.login_url || p.url || (p.slug || p.id ? `/auth/login/${p.slug || p.id}` : "");
    return name && href ? [{ name, href }] : [];
  });
}

export function LoginPage({ initialError }: { initialError: string | null }) {
  const { settings, signIn } = useSession();
  const [identifier, setIdentifier] = useState("");
  const [password, setPassword] = useState("");
  const [agreed, setAgreed] = useState(false);
  const [captchaToken, setCaptchaToken] = useState("");
  // "/login#error=<text>" (W7) is shown until the next attempt
  const [fragmentError, setFragmentError] = useState(initialError);
  const action = useAction();
  const agreement = Boolean(settings.auth_agreement_required);
  const captcha = Boolean(settings.password_hcaptcha_enabled && settings.hcaptcha_site_key);
  const submit = async (event: Event) => {
    event.preventDefault();
    setFragmentError(null);
    const body: Record<string, unknown> = { identifier, password };
    if (agreement) body.agreement_accepted = agreed;
    if (captcha) body.captcha_token = captchaToken;
    const done = await action.run(() =>
      api<{ token: string; user: User }>("POST", "/auth/password/login", body));
    if (done) signIn(done.token, done.user);
  };
  const passkey = async () => {
    setFragmentError(null);
    await action.run(async () => {
      const options = await api<any>("POST", "/auth/passkey/login/options", {});
      let credential: unknown;
      try {
        credential = await getAssertion(options);
      } catch (e) {
        throw new Error(`Passkey sign-in was cancelled: ${errorText(e)}`);
      }
      const done = await api<{ token: string; user: User }>("POST", "/auth/passkey/login", {
        ...(options.challenge_id ? { challenge_id: options.challenge_id } : {}),
        credential,
      });
      signIn(done.token, done.user);
    });
  };
  return (
    <>
      <h1>Sign in</h1>
      <form onSubmit={submit} noValidate>
        <Field label="Username or email" value={identifier} onValue={setIdentifier}
          autoComplete="username" />
        <Field label="Password" type="password" value={password} onValue={setPassword}
          autoComplete="current-password" />
        {agreement && (
          <div class="field check">
            <input id="agree" type="checkbox" checked={agreed}
              onChange={(e) => setAgreed((e.target as HTMLInputElement).checked)} />
            <label for="agree">
              I agree to the{" "}
              <a href={String(settings.terms_url || "/terms")}>
                terms of service</a>{" "}and the{" "}
              <a href={String(settings.privacy_url || "/privacy")}>privacy policy</a>
            </label>
          </div>
        )}
        {captcha && (
          <Captcha siteKey={String(settings.hcaptcha_site_key)} onToken={setCaptchaToken}
            onError={action.setError} />
        )}
        <Alert error={action.error ?? fragmentError} />
        <button type="submit" class="primary" disabled={action.busy}>Sign in</button>
      </form>
      <div class="alt-signin">
        {settings.passkey_enabled && (
          <button type="button" onClick={passkey} disabled={action.busy}>
            Sign in with passkey
          </button>
        )}
        {settings.oidc_enabled && <a href="/auth/login" class="button">Sign in with SSO</a>}
        {providerLinks(settings.oauth_providers).map((p) => (
          <a key={p.href} href={p.href} class="button">Sign in with {p.name}</a>
        ))}
      </div>
      {settings.registration_enabled && (
        <p>No account yet? <Link href="/register">Create account</Link></p>
      )}
    </>
  );
}
