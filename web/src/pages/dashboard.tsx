// Balance, requests, cost, the usage chart and the enabled announcements (§3 /dashboard).
import { api } from "../api";
import { UsageChart } from "../chart";
import { useResource } from "../data";
import { Alert, Loading } from "../ui";

type Stats = {
  balance: string;
  total_requests: number;
  today_requests: number;
  total_cost: string;
  trend: { date: string; requests: number; cost: string }[];
};

type Announcement = { id: number | string; title: string; content: string };

export function DashboardPage() {
  const stats = useResource(() => api<Stats>("GET", "/api/user/stats"));
  const news = useResource(() => api<any>("GET", "/api/public/announcements"));
  const announcements: Announcement[] = Array.isArray(news.data) ? news.data
    : Array.isArray(news.data?.items) ? news.data.items : [];
  return (
    <>
      <h1>Dashboard</h1>
      {stats.loading && !stats.data && <Loading />}
      <Alert error={stats.error} />
      {stats.data && (
        <>
          <dl class="tiles">
            <div><dt>Balance</dt><dd>{stats.data.balance}</dd></div>
            <div><dt>Today's requests</dt><dd>{stats.data.today_requests}</dd></div>
            <div><dt>Total requests</dt><dd>{stats.data.total_requests}</dd></div>
            <div><dt>Total cost</dt><dd>{stats.data.total_cost}</dd></div>
          </dl>
          <UsageChart days={stats.data.trend || []} />
        </>
      )}
      {announcements.length > 0 && (
        <section aria-labelledby="news-title">
          <h2 id="news-title">Announcements</h2>
          {announcements.map((a) => (
            <article key={a.id} class="announcement">
              <h3>{a.title}</h3>
              <p>{a.content}</p>
            </article>
          ))}
        </section>
      )}
    </>
  );
}
