// The public price list (§3 /pricing): the API's error text when it is disabled.
import { api } from "../api";
import { useResource } from "../data";
import { Alert, Empty, Loading, Table } from "../ui";

type Item = { model_name: string; display_name: string; provider_name: string;
  quota_type: number; input_price: string; output_price: string; cached_input_price: string;
  user_channels: { name: string; effective_input_price: string;
    effective_output_price: string }[] };

export function PricingPage() {
  const models = useResource(() => api<Item[]>("GET", "/api/public/models"));
  const rows = models.data ?? [];
  return (
    <>
      <h1>Pricing</h1>
      <p>Prices per million tokens (per request for request-priced models).</p>
      <Alert error={models.error} />
      {models.loading && !models.data ? <Loading /> : rows.length === 0 ? (
        !models.error && <Empty text="No models are offered yet" />
      ) : (
        <Table label="Pricing" rows={rows} rowKey={(m) => m.model_name} columns={[
          { title: "Model", cell: (m) => m.display_name || m.model_name },
          { title: "Provider", cell: (m) => m.provider_name || "—" },
          { title: "Input price", cell: (m) => m.input_price },
          { title: "Output price", cell: (m) => m.output_price },
          { title: "Cached input price", cell: (m) => m.cached_input_price },
          { title: "User channels", cell: (m) => m.user_channels.map((u) =>
            `${u.name}: ${u.effective_input_price} / ${u.effective_output_price}`).join("; ") },
        ]} />
      )}
    </>
  );
}
