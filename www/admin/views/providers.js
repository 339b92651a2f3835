// 6. Providers (`#providers`): each provider's circuit breaker, and the
// routes over them (GET /onejob/v1/providers, which an admin key may read).
import { getProviders } from "../api.js";
import { $, el } from "../dom.js";
import { badge, dateTime, fmtMs, fmtNumber, timeCell, words } from "../format.js";
import { load, refreshOn } from "../router.js";
import { labelCells } from "../table.js";

/** @typedef {import("../answers.js").ProviderHealth} ProviderHealth */
/** @typedef {import("../answers.js").Route} Route */

/** Hooks up Refresh (once, at start). */
export function wireProviders() {
  refreshOn("providers-refresh");
}

/** @type {import("../router.js").View} */
export async function showProviders(params, id) {
  await load($("view-providers"), id, getProviders, ({ providers, routes }) => {
    const now = Date.now();
    const rows = providers.map((p) => providerRow(p, now));
    if (rows.length === 0) rows.push(el("tr", {}, el("td", { colspan: "10", class: "empty" }, "No providers.")));
    const table = /** @type {HTMLTableElement} */ ($("providers-table"));
    table.tBodies[0].replaceChildren(...rows);
    labelCells(table);
    const routeRows = routes.map(routeRow);
    if (routeRows.length === 0) routeRows.push(el("tr", {}, el("td", { colspan: "4", class: "empty" }, "No routes.")));
    const routesTable = /** @type {HTMLTableElement} */ ($("routes-table"));
    routesTable.tBodies[0].replaceChildren(...routeRows);
    labelCells(routesTable);
  });
}

/**
 * @param {ProviderHealth} p
 * @param {number} now
 */
function providerRow(p, now) {
  const probe = !p.breaker
    ? el("span", { class: "muted" }, "— (no breaker: always called)")
    : p.state === "open"
      ? el("span", { title: dateTime.format(new Date(now + p.retry_after_ms)) }, `in ${fmtMs(p.retry_after_ms)}`)
      : p.state === "half_open"
        ? "a probe is out now"
        : el("span", { class: "muted" }, "— (closed: calls go through)");
  const transitions = p.transitions.length
    ? el("ol", { class: "transitions" }, p.transitions.map((t) => el("li", {}, `${words(t.from)} → ${words(t.to)} `, timeCell(t.at_ms, { short: true }))))
    : el("span", { class: "muted" }, "none");
  return el(
    "tr",
    { dataset: { provider: p.name, state: p.state } },
    el("td", {}, el("strong", {}, p.name)),
    el("td", {}, p.kind),
    el("td", {}, p.breaker ? "yes" : "no"),
    el("td", {}, badge(p.state)),
    el("td", { class: "num" }, fmtNumber(p.consecutive_failures)),
    el("td", { class: "num" }, fmtNumber(p.calls)),
    el("td", { class: "num" }, fmtNumber(p.failures)),
    el("td", { class: "num" }, `${(p.error_rate * 100).toFixed(1)}%`),
    el("td", {}, probe),
    el("td", {}, transitions),
  );
}

/** @param {Route} r */
const routeRow = (r) =>
  el(
    "tr",
    { dataset: { model: r.model } },
    el("td", { class: "mono" }, r.model),
    el("td", {}, r.providers.map((s) => `${s.provider}${s.model ? ` (${s.model})` : ""}`).join(" → ")),
    el("td", {}, r.hedge_after_ms === null || r.hedge_after_ms === undefined ? el("span", { class: "muted" }, "—") : `after ${fmtMs(r.hedge_after_ms)}`),
    el("td", {}, r.contract ? "yes" : "no"),
  );
