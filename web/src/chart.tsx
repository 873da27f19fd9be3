// The usage chart: requests per day as SVG bars, with the numbers as a table for readers.

export type Day = { date: string; requests: number; cost: string };

const WIDTH = 560;
const HEIGHT = 180;
const PAD = 24;

export function UsageChart({ days }: { days: Day[] }) {
  const max = Math.max(1, ...days.map((d) => d.requests));
  const slot = days.length ? (WIDTH - PAD * 2) / days.length : 0;
  const summary = days.map((d) => `${d.date}: ${d.requests} requests, cost ${d.cost}`).join("; ");
  return (
    <figure role="figure" aria-label="Usage chart" class="chart">
      <svg viewBox={`0 0 ${WIDTH} ${HEIGHT}`} role="img"
        aria-label={summary || "No usage in the last days"}>
        <line x1={PAD} y1={HEIGHT - PAD} x2={WIDTH - PAD} y2={HEIGHT - PAD} class="axis" />
        {days.map((d, i) => {
          const h = ((HEIGHT - PAD * 2) * d.requests) / max;
          const x = PAD + i * slot + slot * 0.15;
          return (
            <g key={d.date}>
              <rect x={x} y={HEIGHT - PAD - h} width={slot * 0.7} height={h} class="bar">
                <title>{`${d.date}: ${d.requests} requests`}</title>
              </rect>
              <text x={x + slot * 0.35} y={HEIGHT - 6} class="tick">{d.date.slice(5)}</text>
              <text x={x + slot * 0.35} y={HEIGHT - PAD - h - 4} class="value">{d.requests}</text>
            </g>
          );
        })}
      </svg>
      <figcaption>Requests per day (last {days.length} days, UTC)</figcaption>
    </figure>
  );
}
