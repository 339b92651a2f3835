// 3. Dead letters (`#dead-letters[?tenant=dev]`): background jobs that used up
// their attempts, grouped by cause, each cause replayable at once; and, apart
// from them, the dead synchronous jobs.
import { ApiError, listDeadLetters, listJobs, replay } from "../api.js";
import { $, el, svg } from "../dom.js";
import { fmtNumber, timeCell } from "../format.js";
import { act, flashFor, href, isCurrent, load, refreshOn } from "../router.js";
import { causeCell, jobRow, labelCells, whoCells } from "../table.js";

/** @typedef {import("../answers.js").DeadLettersAnswer["groups"][number]} Group */

const tenantField = () => /** @type {HTMLInputElement} */ ($("dl-tenant"));

/** Hooks up the tenant filter and Refresh (once, at start). */
export function wireDeadLetters() {
  $("dl-filters").addEventListener("submit", (event) => {
    event.preventDefault();
    location.hash = href("dead-letters", { tenant: tenantField().value.trim() });
  });
  refreshOn("dl-refresh");
}

/** @type {import("../router.js").View} */
export async function showDeadLetters(params, id) {
  const tenant = params.get("tenant") ?? "";
  tenantField().value = tenant;
  const outcome = flashFor("dead-letters");
  $("dl-outcome").hidden = !outcome;
  if (outcome) {
    $("dl-outcome").className = outcome.className;
    $("dl-outcome").textContent = outcome.textContent;
  }
  await load($("view-dead-letters"), id, () => listDeadLetters(tenant), ({ groups, entries }) => {
    const cards = groups.map((group) => groupCard(group, tenant));
    if (cards.length === 0) cards.push(el("div", { class: "card empty" }, "No dead letters. Jobs that use up their attempts appear here, grouped by cause."));
    $("dl-groups").replaceChildren(...cards);
    const rows = entries.map((entry) =>
      jobRow(entry, [
        el("td", {}, timeCell(entry.last_seen_ms, { short: true })),
        whoCells(entry),
        el("td", {}, el("span", { class: "cause" }, entry.error_class)),
        el("td", { class: "num" }, entry.last_status ?? "—"),
        el("td", { class: "detail", title: entry.detail }, entry.detail || "—"),
        el("td", { class: "num" }, fmtNumber(entry.attempts)),
        el("td", {}, timeCell(entry.first_seen_ms, { short: true })),
      ]),
    );
    if (rows.length === 0) rows.push(el("tr", {}, el("td", { colspan: "9", class: "empty" }, "No entries.")));
    const table = /** @type {HTMLTableElement} */ ($("dl-table"));
    table.tBodies[0].replaceChildren(...rows);
    labelCells(table);
  });
  if (isCurrent(id) && $("view-dead-letters").dataset.state === "ready") await deadSyncJobs(tenant, id);
}

/**
 * Dead synchronous jobs: only background jobs are dead-lettered (their
 * caller is gone; a synchronous caller got the error and may send again
 * with its key), so they are not among the entries; the jobs index lists
 * them, newest first.
 * @param {string} tenant
 * @param {number} id the render's
 */
async function deadSyncJobs(tenant, id) {
  const query = new URLSearchParams({ state: "dead", limit: "50", ...(tenant ? { tenant } : {}) });
  let rows;
  try {
    rows = (await listJobs(query)).jobs.filter((job) => !job.background);
  } catch (error) {
    if (!(error instanceof ApiError)) throw error;
    rows = null;
    $("dl-sync-note").textContent = `The dead synchronous jobs could not be listed: ${error.message}`;
  }
  if (!isCurrent(id) || !rows) return;
  const body = rows.map((job) =>
    jobRow(job, [
      el("td", {}, timeCell(job.updated_ms, { short: true })),
      whoCells(job),
      causeCell(job.error_class),
      el("td", {}, job.model ?? "—"),
      el("td", { class: "num" }, fmtNumber(job.attempts)),
    ]),
  );
  if (body.length === 0) body.push(el("tr", {}, el("td", { colspan: "7", class: "empty" }, "No dead synchronous jobs.")));
  const table = /** @type {HTMLTableElement} */ ($("dl-sync"));
  table.tBodies[0].replaceChildren(...body);
  labelCells(table);
  $("dl-sync-note").textContent = `${fmtNumber(rows.length)} from the jobs index${rows.length === 50 ? " (the newest 50)" : ""}.`;
}

/**
 * One cause: its count, a 24 h bar chart of its trend, and a replay of the whole group.
 * @param {Group} group
 * @param {string} tenant the list's filter ("" for every tenant the key reaches)
 */
function groupCard(group, tenant) {
  const button = el("button", { class: "primary", type: "button", dataset: { replay: group.error_class } }, "Replay group");
  button.addEventListener("click", () =>
    act(button, "dead-letters", async () => {
      const answer = await replay({ error_class: group.error_class, ...(tenant ? { tenant } : {}) });
      const replayed = answer.replayed?.length ?? 0;
      const skipped = answer.skipped?.length ?? 0;
      return `Replayed ${fmtNumber(replayed)} job${replayed === 1 ? "" : "s"} of ${group.error_class}${skipped ? `; skipped ${fmtNumber(skipped)} (no longer dead)` : ""}.`;
    }),
  );
  return el(
    "section",
    { class: "card group", dataset: { errorClass: group.error_class, count: String(group.count) } },
    el("div", { class: "card-head" }, el("h3", { class: "cause" }, group.error_class), el("span", { class: "muted" }, "last ", timeCell(group.last_seen_ms))),
    el("div", { class: "count" }, el("span", { class: "big" }, fmtNumber(group.count)), ` dead job${group.count === 1 ? "" : "s"}`),
    trendChart(group.trend ?? []),
    el("div", { class: "actions" }, button, " ", el("a", { href: href("jobs", { state: "dead", error_class: group.error_class, tenant }) }, "its jobs")),
  );
}

/**
 * 24 hourly counts, oldest first, as inline SVG bars (an empty hour is a thin line).
 * @param {number[]} trend
 */
function trendChart(trend) {
  const width = 240;
  const height = 48;
  const slot = width / Math.max(trend.length, 1);
  const max = Math.max(1, ...trend);
  const bars = trend.map((n, i) => {
    const h = n === 0 ? 1 : Math.max(3, (n / max) * (height - 4));
    const hoursAgo = trend.length - i;
    const label = `${fmtNumber(n)} in the hour ${hoursAgo === 1 ? "up to now" : `${hoursAgo} h to ${hoursAgo - 1} h ago`}`;
    return svg("rect", { x: (i * slot + 1).toFixed(1), y: (height - h).toFixed(1), width: (slot - 2).toFixed(1), height: h.toFixed(1), class: n === 0 ? "zero" : "hit" }, svg("title", {}, label));
  });
  return el(
    "figure",
    { class: "trend" },
    svg("svg", { viewBox: `0 0 ${width} ${height}`, preserveAspectRatio: "none", role: "img", "aria-label": `dead letters per hour, last 24 h: ${trend.join(", ")}` }, bars),
    el("figcaption", {}, el("span", {}, "24 h ago"), el("span", {}, `peak ${fmtNumber(Math.max(0, ...trend))}/h`), el("span", {}, "now")),
  );
}
