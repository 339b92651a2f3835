// 1. Jobs: newest first, filtered, a page at a time (`#jobs?state=dead&tenant=dev`;
// `&limit=N`: the page size, 50 by default).
import { JOB_STATES } from "../../states.js";
import { listJobs } from "../api.js";
import { $, el } from "../dom.js";
import { badge, fmtNumber, fmtUsd, fromLocalInput, timeCell, toLocalInput } from "../format.js";
import { href, load, parseRoute, refreshOn } from "../router.js";
import { causeCell, jobRow, labelCells, whoCells } from "../table.js";

const PAGE_SIZE = 50;
/** The filters the form and the hash share (besides the time span). */
const JOB_FILTERS = ["tenant", "user", "state", "model", "error_class"];

const form = () => /** @type {HTMLFormElement} */ ($("job-filters"));
/** @param {string} name */
const field = (name) => /** @type {HTMLInputElement | HTMLSelectElement} */ (form().elements.namedItem(name));
const nextButton = () => /** @type {HTMLButtonElement} */ ($("jobs-next"));

/** Hooks up the filters and the pager (once, at start); the state filter lists every state. */
export function wireJobs() {
  $("f-state").append(...JOB_STATES.map((state) => el("option", {}, state)));
  form().addEventListener("submit", (event) => {
    event.preventDefault();
    location.hash = href("jobs", jobFilters());
  });
  $("f-clear").addEventListener("click", () => (location.hash = href("jobs")));
  refreshOn("jobs-refresh");
  $("jobs-first").addEventListener("click", () => (location.hash = href("jobs", jobFilters())));
  nextButton().addEventListener("click", () => {
    const page = Number(parseRoute().params.get("page") ?? 1) + 1;
    location.hash = href("jobs", { ...jobFilters(), cursor: nextButton().dataset.cursor, page });
  });
}

/** @type {import("../router.js").View} */
export async function showJobs(params, id) {
  for (const name of JOB_FILTERS) field(name).value = params.get(name) ?? "";
  field("since").value = toLocalInput(params.get("since_ms"));
  field("until").value = toLocalInput(params.get("until_ms"));
  const page = Number(params.get("page") ?? 1);
  $("jobs-page").textContent = page > 1 ? `· page ${page}` : "";

  const query = new URLSearchParams();
  for (const name of [...JOB_FILTERS, "since_ms", "until_ms", "cursor"]) {
    const value = params.get(name);
    if (value) query.set(name, value);
  }
  query.set("limit", params.get("limit") ?? String(PAGE_SIZE));

  const next = nextButton();
  next.disabled = true;
  $("jobs-first").hidden = page <= 1;
  await load($("view-jobs"), id, () => listJobs(query), ({ jobs, next_cursor }) => {
    const rows = jobs.map((job) =>
      jobRow(
        job,
        [
          el("td", {}, timeCell(job.created_ms, { short: true })),
          whoCells(job),
          // One span: on a phone the cell is a grid of label and value (admin.css).
          el("td", { class: "state-cell" }, el("span", {}, badge(job.state), job.background ? [" ", el("span", { class: "tag", title: "run by the queue (Prefer: respond-async)" }, "background")] : null)),
          el("td", {}, job.model ?? "—"),
          el("td", {}, job.provider ?? "—"),
          causeCell(job.error_class),
          el("td", { class: "num" }, fmtNumber(job.attempts)),
          el("td", { class: "num" }, fmtNumber(job.tokens)),
          el("td", { class: "num" }, fmtUsd(job.cost_usd)),
        ],
        { state: job.state },
      ),
    );
    if (rows.length === 0) rows.push(el("tr", {}, el("td", { colspan: "11", class: "empty" }, "No jobs match these filters.")));
    const table = /** @type {HTMLTableElement} */ ($("jobs-table"));
    table.tBodies[0].replaceChildren(...rows);
    labelCells(table);
    next.disabled = !next_cursor;
    next.dataset.cursor = next_cursor ?? "";
  });
}

/** The filters in the form, as the jobs view's params (and the page size, `#jobs?limit=N`, kept). */
function jobFilters() {
  /** @type {Record<string, string | null>} */
  const params = Object.fromEntries(JOB_FILTERS.map((name) => [name, field(name).value.trim()]));
  params.since_ms = fromLocalInput(field("since").value);
  params.until_ms = fromLocalInput(field("until").value);
  params.limit = parseRoute().params.get("limit");
  return params;
}
