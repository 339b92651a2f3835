// 5. Savings (`#savings[?since=…&tenant=dev]`): answers given without an
// upstream call and what they saved, next to what was spent.
import { getSavings } from "../api.js";
import { $, el, svg } from "../dom.js";
import { DAY_MS, HOUR_MS, dateTime, fmtNumber, fmtUsd, shortDateTime } from "../format.js";
import { href, load, refreshOn } from "../router.js";
import { labelCells } from "../table.js";

/** @typedef {import("../answers.js").Figures} Figures */
/** @typedef {import("../answers.js").AnswerKind} AnswerKind */
/** @typedef {import("../answers.js").SavingsAnswer["series"]} Series */

/** @type {[AnswerKind, string][]} */
const KINDS = [
  ["kv_replay", "KV replays"],
  ["ledger_replay", "Ledger replays"],
  ["coalesced", "Coalesced"],
  ["keyless_join", "Keyless joins"],
];

const sinceField = () => /** @type {HTMLSelectElement} */ ($("savings-since"));
const tenantField = () => /** @type {HTMLInputElement} */ ($("savings-tenant"));
const filtered = () => href("savings", { since: sinceField().value, tenant: tenantField().value.trim() });

/** Hooks up the filters and Refresh (once, at start). */
export function wireSavings() {
  $("savings-filters").addEventListener("submit", (event) => {
    event.preventDefault();
    location.hash = filtered();
  });
  sinceField().addEventListener("change", () => (location.hash = filtered()));
  refreshOn("savings-refresh");
}

/** @type {import("../router.js").View} */
export async function showSavings(params, id) {
  const span = params.get("since") ?? String(DAY_MS);
  const tenant = params.get("tenant") ?? "";
  sinceField().value = span;
  tenantField().value = tenant;
  const now = Date.now();
  const since = span === "all" ? 0 : now - Number(span);
  const query = new URLSearchParams({ since_ms: String(since), ...(tenant ? { tenant } : {}) });
  await load($("view-savings"), id, () => getSavings(query), (report) => {
    // The API counts whole hours: from the start of since's hour.
    const from = report.since_ms ?? since;
    $("savings-window").textContent = from ? `Since ${dateTime.format(new Date(from))} (counted per hour).` : "Every count still kept.";
    const prices = report.prices;
    $("savings-prices").textContent = prices
      ? `Prices: onejob's bundled list prices as of ${prices.bundled_as_of}${prices.overridden?.length ? `; PRICES sets ${prices.overridden.join(", ")}` : ""}.`
      : "";
    $("savings-totals").replaceChildren(...savingsTiles(report.totals));
    $("savings-chart").replaceChildren(savingsChart(report.series ?? [], from || firstBucket(report.series ?? []), now));
    savingsTable(/** @type {HTMLTableElement} */ ($("savings-tenants")), report.by_tenant ?? [], "tenant");
    savingsTable(/** @type {HTMLTableElement} */ ($("savings-models")), report.by_model ?? [], "model");
  });
}

/** @param {Series} series */
const firstBucket = (series) => (series.length ? series[0].bucket_ms : Date.now() - DAY_MS);

/**
 * The totals as tiles: calls avoided (and their share of all answers), tokens, saved and spent.
 * @param {Figures} t
 */
function savingsTiles(t) {
  const answered = t.upstream_calls_avoided + t.jobs;
  const share = answered ? `${Math.round((t.upstream_calls_avoided / answered) * 100)}% of ${fmtNumber(answered)} answers` : "no answers yet";
  const byKind = KINDS.map(([kind], i) => `${fmtNumber(t.answered_without_call[kind])} ${["from KV", "from the Ledger", "coalesced", "keyless"][i]}`).join(" · ");
  /**
   * @param {string} name
   * @param {string} value
   * @param {string} detail
   * @param {Record<string, string>} dataset
   */
  const tile = (name, value, detail, dataset) => el("div", { class: "card stat", dataset }, el("div", { class: "stat-name" }, name), el("div", { class: "big" }, value), el("div", { class: "muted stat-detail" }, detail));
  return [
    tile("Upstream calls avoided", fmtNumber(t.upstream_calls_avoided), `${share}: ${byKind}`, { stat: "calls-avoided" }),
    tile("Tokens saved", fmtNumber(t.tokens_saved), `${fmtNumber(t.tokens)} tokens spent`, { stat: "tokens-saved" }),
    tile("Saved (estimated)", fmtUsd(t.cost_saved_usd), "what the avoided calls would have cost", { stat: "cost-saved" }),
    tile("Spent (estimated)", fmtUsd(t.cost_usd), `${fmtNumber(t.jobs)} jobs, each paid for once`, { stat: "cost-spent" }),
  ];
}

/**
 * Saved and spent dollars per hour (per day over more than two days), from
 * `from` to `to`, as paired SVG bars; an empty slot is a thin line.
 * @param {Series} series
 * @param {number} from
 * @param {number} to
 */
function savingsChart(series, from, to) {
  const step = to - from > 2 * DAY_MS ? DAY_MS : HOUR_MS;
  const start = from - (from % step);
  const slots = Math.max(1, Math.min(800, Math.ceil((to - start) / step)));
  const saved = new Array(slots).fill(0);
  const spent = new Array(slots).fill(0);
  for (const b of series) {
    const i = Math.floor((b.bucket_ms - start) / step);
    if (i < 0 || i >= slots) continue;
    saved[i] += b.cost_saved_usd;
    spent[i] += b.cost_usd;
  }
  const width = 720;
  const height = 140;
  const top = 6;
  const slot = width / slots;
  const max = Math.max(...saved, ...spent) || 1;
  /**
   * @param {number} value
   * @param {number} i
   * @param {boolean} second
   * @param {"saved" | "spent"} kind
   */
  const bar = (value, i, second, kind) => {
    const h = value === 0 ? 1 : Math.max(2, (value / max) * (height - top));
    const w = Math.max(0.5, slot / 2 - 1);
    const at = new Date(start + i * step);
    const label = `${step === DAY_MS ? dateTime.format(at).split(",")[0] : shortDateTime.format(at)}: ${fmtUsd(value)} ${kind}`;
    return svg("rect", { x: (i * slot + (second ? slot / 2 : 0.5)).toFixed(2), y: (height - h).toFixed(2), width: w.toFixed(2), height: h.toFixed(2), class: value === 0 ? "zero" : kind }, svg("title", {}, label));
  };
  const bars = saved.flatMap((value, i) => [bar(value, i, false, "saved"), bar(spent[i], i, true, "spent")]);
  const grid = svg("line", { x1: 0, x2: width, y1: top, y2: top, class: "grid-line" });
  const unit = step === DAY_MS ? "day" : "hour";
  const totalSaved = saved.reduce((a, b) => a + b, 0);
  const totalSpent = spent.reduce((a, b) => a + b, 0);
  return el(
    "figure",
    { class: "savings-chart", dataset: { slots: String(slots), unit } },
    el("div", { class: "chart-max muted" }, `${fmtUsd(max)} / ${unit}`),
    svg("svg", { viewBox: `0 0 ${width} ${height}`, preserveAspectRatio: "none", role: "img", "aria-label": `per ${unit}: ${fmtUsd(totalSaved)} saved, ${fmtUsd(totalSpent)} spent` }, grid, bars),
    el("figcaption", {}, el("span", {}, dateTime.format(new Date(start))), el("span", {}, `per ${unit}`), el("span", {}, "now")),
  );
}

/**
 * @param {HTMLTableElement} table
 * @param {(Figures & { tenant?: string | null, model?: string | null })[]} rows
 * @param {"tenant" | "model"} name the rows' name column
 */
function savingsTable(table, rows, name) {
  const body = rows.map((row) =>
    el(
      "tr",
      { dataset: { [name]: row[name] ?? "" } },
      el("td", {}, row[name] ?? el("span", { class: "muted" }, "(none)")),
      el("td", { class: "num strong", dataset: { field: "calls-avoided" } }, fmtNumber(row.upstream_calls_avoided)),
      KINDS.map(([kind]) => el("td", { class: "num", dataset: { field: kind } }, fmtNumber(row.answered_without_call[kind]))),
      el("td", { class: "num", dataset: { field: "tokens-saved" } }, fmtNumber(row.tokens_saved)),
      el("td", { class: "num saved", dataset: { field: "cost-saved" } }, fmtUsd(row.cost_saved_usd)),
      el("td", { class: "num", dataset: { field: "jobs" } }, fmtNumber(row.jobs)),
      el("td", { class: "num", dataset: { field: "tokens" } }, fmtNumber(row.tokens)),
      el("td", { class: "num", dataset: { field: "cost-spent" } }, fmtUsd(row.cost_usd)),
    ),
  );
  if (body.length === 0) body.push(el("tr", {}, el("td", { colspan: "11", class: "empty" }, "Nothing answered in this period.")));
  table.tBodies[0].replaceChildren(...body);
  labelCells(table);
}
