// Registration with the optional emailed code and the referral code from ?ref= (§3 /register).
import { useState } from "preact/hooks";
import { api } from "../api";
import { useAction } from "../data";
import { Captcha } from "../captcha";
import { useSession } from "../session";
import type { User } from "../session";
import { Alert, Field, Link } from "../ui";

export function RegisterPage() {
  const { settings, signIn, notify } = useSession();
  const [username, setUsername] = useState("");
  const [email, setEmail] = useState("");
  const [password, setPassword] = useState("");
  const [code, setCode] = useState("");
  const referral = new URLSearchParams(location.search).get("ref") || "";
  const action = useAction();
  const needsCode = Boolean(settings.email_verification_required);
  const [captchaToken, setCaptchaToken] = useState("");
  const [agreed, setAgreed] = useState(false);
  const captcha = Boolean(settings.password_hcaptcha_enabled && settings.hcaptcha_site_key);
  if (!settings.registration_enabled) {
    return (
      <>
        <h1>Create account</h1>
        <Alert error="Registration is disabled" />
        <p><Link href="/login">Sign in</Link></p>
      </>
    );
  }
  const sendCode = async () => {
    const done = await action.run(() =>
      api("POST", "/auth/password/email-code", { email, purpose: "register" }));
    if (done) notify("Verification code sent");
  };
  const submit = async (event: Event) => {
    event.preventDefault();
    const body: Record<string, unknown> = { username, email, password };
    if (needsCode) body.email_code = code;
    if (referral) body.referral_code = referral;
    if (settings.auth_agreement_required) body.agreement_accepted = agreed;
    if (captcha) body.captcha_token = captchaToken;
    const done = await action.run(() =>
      api<{ token: string; user: User }>("POST", "/auth/password/register", body));
    if (done) signIn(done.token, done.user);
  };
  return (
    <>
      <h1>Create account</h1>
      <form onSubmit={submit} noValidate>
        <Field label="Username" value={username} onValue={setUsername} autoComplete="username" />
        <Field label="Email" type="email" value={email} onValue={setEmail} autoComplete="email" />
        <Field label="Password" type="password" value={password} onValue={setPassword}
          autoComplete="new-password" />
        {needsCode && (
          <div class="inline">
            <Field label="Email code" value={code} onValue={setCode} />
            <button type="button" onClick={sendCode} disabled={action.busy}>Send code</button>
          </div>
        )}
        {referral && <p>Referral code: {referral}</p>}
        {settings.auth_agreement_required && (
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
        <Alert error={action.error} />
        <button type="submit" class="primary" disabled={action.busy}>Create account</button>
      </form>
      <p>Already registered? <Link href="/login">Sign in</Link></p>
    </>
  );
}
