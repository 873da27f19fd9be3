// WebAuthn in the browser: the server's JSON options in, the credential as base64url JSON out.

function fromB64url(text: string): ArrayBuffer {
  const base64 = text.replace(/-/g, "+").replace(/_/g, "/");
  const padded = base64 + "=".repeat((4 - (base64.length % 4)) % 4);
  const bytes = Uint8Array.from(atob(padded), (c) => c.charCodeAt(0));
  return bytes.buffer;
}

function toB64url(buffer: ArrayBuffer | null): string | null {
  if (!buffer) return null;
  let text = "";
  for (const byte of new Uint8Array(buffer)) text += String.fromCharCode(byte);
  return btoa(text).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
}

function withIds(list: any[] | undefined): any[] | undefined {
  return list?.map((c) => ({ ...c, id: fromB64url(c.id) }));
}

function serialise(credential: PublicKeyCredential): Record<string, unknown> {
  const response = credential.response as AuthenticatorAttestationResponse &
    AuthenticatorAssertionResponse;
  const out: Record<string, unknown> = {
    clientDataJSON: toB64url(response.clientDataJSON),
  };
  if ("attestationObject" in response) {
    out.attestationObject = toB64url(response.attestationObject);
  }
  if ("authenticatorData" in response) {
    out.authenticatorData = toB64url(response.authenticatorData);
    out.signature = toB64url(response.signature);
    out.userHandle = toB64url(response.userHandle);
  }
  return { id: credential.id, rawId: toB64url(credential.rawId), type: credential.type,
    response: out };
}

export async function getAssertion(options: any): Promise<Record<string, unknown>> {
  const pk = options.publicKey ?? options;
  const credential = (await navigator.credentials.get({
    publicKey: { ...pk, challenge: fromB64url(pk.challenge),
      allowCredentials: withIds(pk.allowCredentials) },
  })) as PublicKeyCredential | null;
  if (!credential) throw new Error("no credential");
  return serialise(credential);
}

export async function createCredential(options: any): Promise<Record<string, unknown>> {
  const pk = options.publicKey ?? options;
  const credential = (await navigator.credentials.create({
    publicKey: { ...pk, challenge: fromB64url(pk.challenge),
      user: { ...pk.user, id: fromB64url(pk.user.id) },
      excludeCredentials: withIds(pk.excludeCredentials) },
  })) as PublicKeyCredential | null;
  if (!credential) throw new Error("no credential");
  return serialise(credential);
}
