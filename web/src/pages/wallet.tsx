// Balance, top-up orders, redeem codes, daily check-in and the referral link (§3 /wallet).
import { useState } from "preact/hooks";
import { api } from "../api";
import { useAction, useResource } from "../data";
import { useSession } from "../session";
import { Alert, Empty, Field, Loading, Select, Table, formatTime } from "../ui";

type Order = { order_no: string; amount: string; method: string; status: string;
  created_at: string };

function TopUp({ onCreated }: { onCreated: () => void }) {
  const config = useResource(() => api<any>("GET", "/api/user/payment/config"));
  const [amount, setAmount] = useState("");
  const [method, setMethod] = useState("");
  const action = useAction();
  if (config.loading && !config.data) return <Loading />;
  if (!config.data?.enabled) return null;
  const methods: string[] = config.data.methods ?? [];
  const chosen = method || methods[0] || "";
  const pay = async (event: Event) => {
    event.preventDefault();
    const order = await action.run(() => api<{ payment_url?: string }>("POST",
      "/api/user/payment/orders", { amount, method: chosen }));
    if (order) {
      onCreated();
      if (order.payment_url) window.location.assign(order.payment_url);
    }
  };
  return (
    <section class="panel" aria-labelledby="topup-title">
      <h2 id="topup-title">Top up</h2>
      <form class="inline" onSubmit={pay} noValidate>
        <Field label="Amount" value={amount} onValue={setAmount} inputMode="decimal"
          placeholder={`at least ${config.data.min_recharge_amount}`} />
        <Select label="Method" value={chosen} onValue={setMethod}
          options={methods.map((m) => ({ value: m, label: m }))} />
        <button type="submit" class="primary" disabled={action.busy}>Pay</button>
      </form>
      <Alert error={action.error} />
    </section>
  );
}

function CheckIn({ onDone }: { onDone: () => void }) {
  const status = useResource(() => api<any>("GET", "/api/user/check-in/status"));
  const action = useAction();
  const { notify } = useSession();
  if (!status.data?.enabled) return null;
  const done = Boolean(status.data.checked_in_today);
  const checkIn = async () => {
    const result = await action.run(() => api<any>("POST", "/api/user/check-in"));
    if (result) {
      notify(`Checked in: +${result.reward_amount}`);
      await status.reload();
      onDone();
    }
  };
  return (
    <section class="panel" aria-labelledby="checkin-title">
      <h2 id="checkin-title">Daily check-in</h2>
      <p>Streak: {status.data.current_streak} days.</p>
      <button type="button" onClick={checkIn} disabled={done || action.busy}>
        {done ? "Checked in today" : "Check in"}
      </button>
      <Alert error={action.error} />
    </section>
  );
}

function Referral() {
  const referral = useResource(() => api<any>("GET", "/api/user/referral"));
  if (!referral.data?.enabled) return null;
  return (
    <section class="panel" aria-labelledby="ref-title">
      <h2 id="ref-title">Referral</h2>
      <div class="field">
        <label for="ref-link">Referral link</label>
        <input id="ref-link" readOnly value={referral.data.link} class="mono" />
      </div>
    </section>
  );
}

export function WalletPage() {
  const { notify } = useSession();
  const stats = useResource(() => api<{ balance: string }>("GET", "/api/user/stats"));
  const orders = useResource(() => api<Order[]>("GET", "/api/user/payment/orders"));
  const [code, setCode] = useState("");
  const redeem = useAction();
  const submitCode = async (event: Event) => {
    event.preventDefault();
    const done = await redeem.run(() => api<any>("POST", "/api/user/redeem-code", { code }));
    if (done) {
      setCode("");
      notify(`Code redeemed: +${done.amount}`);
      await stats.reload();
    }
  };
  const rows = Array.isArray(orders.data) ? orders.data : [];
  return (
    <>
      <h1>Wallet</h1>
      <Alert error={stats.error} />
      <dl class="tiles"><div><dt>Balance</dt><dd>{stats.data?.balance ?? "…"}</dd></div></dl>
      <TopUp onCreated={orders.reload} />
      <section class="panel" aria-labelledby="redeem-title">
        <h2 id="redeem-title">Redeem code</h2>
        <form class="inline" onSubmit={submitCode} noValidate>
          <Field label="Code" value={code} onValue={setCode} />
          <button type="submit" disabled={redeem.busy}>Redeem code</button>
        </form>
        <Alert error={redeem.error} />
      </section>
      <CheckIn onDone={stats.reload} />
      <Referral />
      <section class="panel" aria-labelledby="orders-title">
        <h2 id="orders-title">Orders</h2>
        {orders.error && orders.error !== "Not found" ? <Alert error={orders.error} />
          : orders.loading && !orders.data ? <Loading />
          : rows.length === 0 ? <Empty text="No orders yet" /> : (
            <Table label="Orders" rows={rows} rowKey={(o) => o.order_no} columns={[
              { title: "Order", cell: (o) => o.order_no },
              { title: "Time", cell: (o) => formatTime(o.created_at) },
              { title: "Amount", cell: (o) => o.amount },
              { title: "Method", cell: (o) => o.method },
              { title: "Status", cell: (o) => o.status },
            ]} />
          )}
      </section>
    </>
  );
}
