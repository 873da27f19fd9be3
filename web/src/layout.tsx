// The frame of every page: a navigation landmark, Sign out, one main region (§2).
import type { ComponentChildren } from "preact";
import { ADMIN_PAGES, PUBLIC_PAGES, USER_PAGES } from "./pages";
import { useSession } from "./session";
import { Link } from "./ui";

function Brand() {
  const { settings } = useSession();
  return <span class="brand">{String(settings.site_name || "Lockgate")}</span>;
}

export function Layout({ children }: { children: ComponentChildren }) {
  const { user, signOut, settings } = useSession();
  const pages = [...USER_PAGES, ...PUBLIC_PAGES].filter(
    (p) => p.path !== "/status" || settings.status_page_enabled !== false);
  return (
    <div class="shell">
      <header class="top">
        <Brand />
        <span class="who">{user?.username}</span>
        <button type="button" onClick={signOut}>Sign out</button>
      </header>
      <nav aria-label="Main" class="side">
        <ul>
          {pages.map((p) => (
            <li key={p.path}><Link href={p.path}>{p.title}</Link></li>
          ))}
        </ul>
        {user?.is_admin && (
          <>
            <h2 class="nav-group">Administration</h2>
            <ul>
              {ADMIN_PAGES.map((p) => (
                <li key={p.path}><Link href={p.path}>{p.title}</Link></li>
              ))}
            </ul>
          </>
        )}
      </nav>
      <main class="content">{children}</main>
    </div>
  );
}

export function PublicLayout({ children }: { children: ComponentChildren }) {
  const { settings } = useSession();
  return (
    <div class="public">
      <header class="top">
        <Brand />
        <nav aria-label="Public">
          <Link href="/pricing">Pricing</Link>
          {settings.status_page_enabled !== false && <Link href="/status">Status</Link>}
        </nav>
      </header>
      <main class="card">{children}</main>
    </div>
  );
}
