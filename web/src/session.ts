// Who is signed in, the public settings, and the short confirmations (role status).
import { createContext } from "preact";
import { useContext } from "preact/hooks";

export type User = {
  id: number;
  username: string;
  email: string;
  is_admin: boolean;
  group?: { name?: string } | null;
  [key: string]: unknown;
};

export type Session = {
  user: User | null;
  settings: Record<string, any>;
  signIn: (token: string, user: User) => void;
  signOut: () => void;
  notify: (text: string) => void;
};

export const SessionContext = createContext<Session>({
  user: null,
  settings: {},
  signIn: () => undefined,
  signOut: () => undefined,
  notify: () => undefined,
});

export function useSession(): Session {
  return useContext(SessionContext);
}
