// The console API client: bearer token from storage (W7), API errors as text (W8).

const TOKEN_KEY = "lockgate.session";

export class ApiError extends Error {
  constructor(message: string, public status: number, public field?: string) {
    super(message);
  }
}

export function getToken(): string | null {
  try {
    return localStorage.getItem(TOKEN_KEY);
  } catch {
    return null;
  }
}

export function setToken(token: string): void {
  localStorage.setItem(TOKEN_KEY, token);
}

export function clearToken(): void {
  localStorage.removeItem(TOKEN_KEY);
}

let unauthorized: () => void = () => undefined;

/** Called when a signed-in request answers 401: the session is over. */
export function onUnauthorized(handler: () => void): void {
  unauthorized = handler;
}

export type Query = Record<string, string | number | undefined | null>;

export function withQuery(path: string, query?: Query): string {
  if (!query) return path;
  const params = new URLSearchParams();
  for (const [name, value] of Object.entries(query)) {
    if (value !== undefined && value !== null && value !== "") params.set(name, String(value));
  }
  const text = params.toString();
  return text ? `${path}?${text}` : path;
}

async function send(method: string, path: string, body?: unknown): Promise<Response> {
  const headers: Record<string, string> = { Accept: "application/json" };
  const token = getToken();
  if (token) headers.Authorization = `Bearer ${token}`;
  if (body !== undefined) headers["Content-Type"] = "application/json";
  let response: Response;
  try {
    response = await fetch(path, {
      method,
      headers,
      body: body === undefined ? undefined : JSON.stringify(body),
      credentials: "same-origin",
    });
  } catch {
    throw new ApiError("Cannot reach the server", 0);
  }
  if (response.ok) return response;
  let message = `Request failed (${response.status})`;
  let field: string | undefined;
  try {
    const data = await response.json();
    if (data && typeof data.error === "string") message = data.error;
    else if (data && data.error && typeof data.error.message === "string") {
      message = data.error.message;
    }
    if (data && typeof data.field === "string") field = data.field;
  } catch {
    // not JSON: keep the status text
  }
  if (response.status === 401 && token) {
    clearToken();
    unauthorized();
  }
  throw new ApiError(message, response.status, field);
}

export async function api<T = any>(method: string, path: string, body?: unknown): Promise<T> {
  const response = await send(method, path, body);
  const type = response.headers.get("content-type") || "";
  if (type.includes("application/json")) return (await response.json()) as T;
  return (await response.text()) as unknown as T;
}

export async function apiBlob(method: string, path: string, body?: unknown): Promise<Blob> {
  return (await send(method, path, body)).blob();
}

export function errorText(error: unknown): string {
  if (error instanceof ApiError) return error.message;
  if (error instanceof Error) return error.message;
  return String(error);
}
