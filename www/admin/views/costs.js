// 4. Cost (`#costs[?since=86400000]`): jobs, tokens and estimated cost per
// tenant and per model, over the last day, week, month or every job retained.
import { getCosts } from "../api.js";
import { $, el } from "../dom.js";
import { DAY_MS, dateTime, fmtNumber, fmtUsd } from "../format.js";
import { href, load, refreshOn } from "../router.js";

/** @typedef {import("../answers.js").CostRow} CostRow */

const sinceField = () => /** @type {HTMLSelectElement} */ ($("cost-since"));

/** Hooks up the period and Refresh (once, at start). */
export function wireCosts() {
  sinceField().addEventListener("change", () => (location.hash = href("costs", { since: sinceField().value })));
  refreshOn("cost-refresh");
}

/** @type {import("../router.js").View} */
export async function showCosts(params, id) {
  const span = params.get("since") ?? String(DAY_MS);
  sinceField().value = span;
  await load($("view-costs"), id, () => getCosts(span === "all" ? undefined : Date.now() - Number(span)), (costs) => {
    $("cost-window").textContent = costs.since_ms ? `Since ${dateTime.format(new Date(costs.since_ms))}.` : "Every job still retained.";
    // Which prices: the bundled table's date, and the models PRICES prices instead.
    const prices = costs.prices;
    $("cost-prices").textContent = prices
      ? `Prices: onejob's bundled list prices as of ${prices.bundled_as_of}${prices.overridden?.length ? `; PRICES sets ${prices.overridden.join(", ")}` : ""}. A job is costed when it is indexed, with the prices of that time.`
      : "";
    costTable(/** @type {HTMLTableElement} */ ($("cost-tenants")), costs.by_tenant ?? [], "tenant");
    costTable(/** @type {HTMLTableElement} */ ($("cost-models")), costs.by_model ?? [], "model");
  });
}

/**
 * @param {HTMLTableElement} table
 * @param {CostRow[]} rows
 * @param {"tenant" | "model"} name the rows' name column
 */
function costTable(table, rows, name) {
  const body = rows.map((row) =>
    el("tr", { dataset: { [name]: row[name] ?? "" } }, el("td", {}, row[name] ?? el("span", { class: "muted" }, "(none)")), el("td", { class: "num" }, fmtNumber(row.jobs)), el("td", { class: "num" }, fmtNumber(row.tokens)), el("td", { class: "num" }, fmtUsd(row.cost_usd))),
  );
  if (body.length === 0) body.push(el("tr", {}, el("td", { colspan: "4", class: "empty" }, "No jobs in this period.")));
  table.tBodies[0].replaceChildren(...body);
  /** @param {"jobs" | "tokens" | "cost_usd"} field */
  const sum = (field) => rows.reduce((total, row) => total + (row[field] ?? 0), 0);
  /** @type {HTMLTableSectionElement} */ (table.tFoot).replaceChildren(
    el("tr", {}, el("th", {}, "Total"), el("th", { class: "num" }, fmtNumber(sum("jobs"))), el("th", { class: "num" }, fmtNumber(sum("tokens"))), el("th", { class: "num" }, fmtUsd(sum("cost_usd")))),
  );
}
