// Rows and cells the lists share (jobs, dead letters): a row that opens its
// job, the job's who-cells, an error class's cell, and the cards a table
// becomes on a phone.
import { el } from "./dom.js";
import { hasCause } from "./format.js";
import { href } from "./router.js";

/**
 * A job as the lists name it (a user's job needs its user).
 * @typedef {{ tenant: string, key: string, user?: string | null }} ListedJob
 */

/** @param {ListedJob} job */
export const jobHref = (job) => href("job", { tenant: job.tenant, key: job.key, user: job.user });

/**
 * A table row that opens `job`'s page (a click, or Enter when focused); `cells` are its tds.
 * @param {ListedJob} job
 * @param {import("./dom.js").Child[]} cells
 * @param {Record<string, string>} [dataset]
 */
export function jobRow(job, cells, dataset = {}) {
  const open = () => (location.hash = jobHref(job));
  return el(
    "tr",
    { class: "link", tabindex: "0", dataset: { key: job.key, tenant: job.tenant, ...dataset }, onclick: open, onkeydown: (/** @type {KeyboardEvent} */ e) => e.key === "Enter" && open() },
    cells,
  );
}

/**
 * A job's tenant, user and key cells (the key links to its page).
 * @param {ListedJob} job
 */
export const whoCells = (job) => [
  el("td", {}, job.tenant),
  el("td", {}, job.user ?? el("span", { class: "muted" }, "—")),
  el("td", { class: "mono key" }, el("a", { href: jobHref(job), title: job.key }, job.key)),
];

/**
 * An error class's cell: "—" for none.
 * @param {string | null | undefined} errorClass
 */
export const causeCell = (errorClass) => el("td", {}, hasCause(errorClass) ? el("span", { class: "cause" }, errorClass) : el("span", { class: "muted" }, "—"));

/**
 * Names each body cell after its column (data-label): on a phone a row is
 * a card of "label value" lines (admin.css), not 11 columns to scroll.
 * @param {HTMLTableElement} table
 */
export function labelCells(table) {
  const names = [.../** @type {HTMLTableSectionElement} */ (table.tHead).rows[0].cells].map((th) => th.textContent);
  for (const row of table.tBodies[0].rows) {
    if (row.cells.length !== names.length) continue;
    [...row.cells].forEach((td, i) => (td.dataset.label = names[i] ?? ""));
  }
}
