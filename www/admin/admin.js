// The operations console: plain DOM, no framework, no build step. Each view
// asks the admin API (/onejob/v1/admin/…) for its data and builds its part of
// the page with createElement and textContent: nothing the API returns is
// ever parsed as HTML.
//
// The view is chosen by the URL's hash, so links, reloads and the back
// button work:
//
//   #jobs?state=dead&tenant=dev       the jobs list and its filters (&limit=N: page size, 50)
//   #job?tenant=dev&key=K[&user=U]    one job: attempts, events, result, actions
//   #dead-letters[?tenant=dev]        dead letters grouped by cause
//   #costs[?since=86400000]           cost per tenant and per model
//   #savings[?since=…&tenant=dev]     calls avoided and what they saved, next to what was spent
//   #providers                        each provider's breaker, and the routes
//
// Any other hash is "not found" (it rendered a blank page).

const API = "/onejob/v1/admin";
// sessionStorage: the key is forgotten when the tab closes and is never
// shared with other tabs (unlike localStorage).
const KEY_STORAGE = "onejob:admin-key";
const PAGE_SIZE = 50;

const $ = (id) => document.getElementById(id);

// ---------------------------------------------------------------------------
// Building the DOM safely

/**
 * `el("td", { class: "num", title: "…" }, "text", otherNode)`: an element
 * whose attributes are set with setAttribute and whose string children
 * become text nodes (so `<b>` in API data shows as `<b>`, it is not markup).
 * `on…` props are event listeners; `dataset` sets data-* attributes.
 */
function el(tag, props = {}, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(props)) {
    if (value === undefined || value === null || value === false) continue;
    if (name === "class") node.className = value;
    else if (name === "dataset") Object.assign(node.dataset, value);
    else if (name.startsWith("on")) node.addEventListener(name.slice(2), value);
    else node.setAttribute(name, value === true ? "" : String(value));
  }
  append(node, children);
  return node;
}

function append(node, children) {
  for (const child of children.flat(Infinity)) {
    if (child === undefined || child === null || child === false) continue;
    node.append(child instanceof Node ? child : String(child));
  }
  return node;
}

const SVG = "http://www.w3.org/2000/svg";
function svg(tag, attributes = {}, ...children) {
  const node = document.createElementNS(SVG, tag);
  for (const [name, value] of Object.entries(attributes)) node.setAttribute(name, String(value));
  append(node, children);
  return node;
}

// ---------------------------------------------------------------------------
// Formatting: numbers with separators, local date-times, "3 min ago"

const integer = new Intl.NumberFormat();
const dateTime = new Intl.DateTimeFormat(undefined, { dateStyle: "medium", timeStyle: "medium" });
// In tables: no year, to keep the columns narrow (the full date is the cell's title).
const shortDateTime = new Intl.DateTimeFormat(undefined, { month: "short", day: "numeric", hour: "2-digit", minute: "2-digit", second: "2-digit" });

const fmtNumber = (n) => (n === undefined || n === null ? "—" : integer.format(n));

function fmtUsd(value) {
  if (value === undefined || value === null) return "—";
  // Small amounts keep their significant digits ($0.00042), larger ones cents.
  const options = value !== 0 && Math.abs(value) < 1 ? { maximumSignificantDigits: 3 } : { minimumFractionDigits: 2, maximumFractionDigits: 2 };
  return new Intl.NumberFormat(undefined, { style: "currency", currency: "USD", ...options }).format(value);
}

function fmtMs(ms) {
  if (ms === undefined || ms === null) return "—";
  return ms < 1000 ? `${integer.format(ms)} ms` : `${(ms / 1000).toFixed(2)} s`;
}

/** "12 s ago", "3 min ago", "5 h ago", "2 days ago"; "in 4 min" for the future. */
function relative(ms, now = Date.now()) {
  const seconds = Math.round((now - ms) / 1000);
  const abs = Math.abs(seconds);
  if (abs < 5) return seconds >= 0 ? "just now" : "in a moment";
  let span;
  if (abs < 60) span = `${abs} s`;
  else if (abs < 3600) span = `${Math.round(abs / 60)} min`;
  else if (abs < 48 * 3600) span = `${Math.round(abs / 3600)} h`;
  else span = `${Math.round(abs / 86400)} days`;
  return seconds >= 0 ? `${span} ago` : `in ${span}`;
}

/**
 * A <time> with the local date-time and how long ago (kept fresh by tick());
 * `short` leaves the year out, for tables.
 */
function timeCell(ms, { short = false } = {}) {
  if (ms === undefined || ms === null) return el("span", { class: "muted" }, "—");
  const date = new Date(ms);
  return el(
    "time",
    { datetime: date.toISOString(), title: dateTime.format(date), dataset: { ms: String(ms) } },
    el("span", { class: "abs" }, (short ? shortDateTime : dateTime).format(date)),
    el("span", { class: "rel" }, relative(ms)),
  );
}

function tick() {
  for (const time of document.querySelectorAll("time[data-ms] .rel")) time.textContent = relative(Number(time.parentElement.dataset.ms));
}

/** Whether an error class names a failure (a success's class is "none"). */
const hasCause = (errorClass) => Boolean(errorClass) && errorClass !== "none";

/** `in_flight` → "in flight", `lost_race` → "lost race". */
const words = (name) => String(name ?? "—").replaceAll("_", " ");

const badge = (state) => el("span", { class: `badge ${state ?? ""}`, dataset: { state: state ?? "" } }, words(state));

/** A datetime-local input's value for `ms` (local time), and back. */
function toLocalInput(ms) {
  if (!ms) return "";
  const d = new Date(Number(ms));
  const pad = (n) => String(n).padStart(2, "0");
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())}T${pad(d.getHours())}:${pad(d.getMinutes())}`;
}
const fromLocalInput = (value) => (value ? String(new Date(value).getTime()) : "");

/** Pretty JSON when `body` is JSON (an object, or a string holding JSON); the text as it is otherwise. */
function pretty(body) {
  if (body === undefined || body === null) return "";
  if (typeof body !== "string") return JSON.stringify(body, null, 2);
  try {
    return JSON.stringify(JSON.parse(body), null, 2);
  } catch {
    return body;
  }
}

// ---------------------------------------------------------------------------
// The admin API

const adminKey = () => sessionStorage.getItem(KEY_STORAGE);

/** An answer that was not 2xx: `problem` is its RFC 9457 body when it has one. */
class ApiError extends Error {
  constructor(status, problem, text) {
    super(problemText(status, problem, text));
    this.status = status;
    this.problem = problem;
  }
}

function problemText(status, problem, text) {
  if (status === 401) return "not an admin key";
  if (status === 403) return "this key does not reach that tenant";
  if (status === 0) return `Network error: ${problem?.detail ?? "the gateway did not answer"}`;
  const title = problem?.title ?? `HTTP ${status}`;
  const detail = problem?.detail ?? (problem ? "" : String(text ?? "").slice(0, 300));
  return detail ? `${title}: ${detail}` : title;
}

/** A fresh operator request key: every click of an action is its own request. */
function newRequestKey() {
  if (crypto.randomUUID) return crypto.randomUUID();
  // Pages served over plain http (not localhost) have no randomUUID: a v4 UUID by hand.
  const b = crypto.getRandomValues(new Uint8Array(16));
  b[6] = (b[6] & 0x0f) | 0x40;
  b[8] = (b[8] & 0x3f) | 0x80;
  const h = [...b].map((x) => x.toString(16).padStart(2, "0")).join("");
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`;
}

/**
 * Calls the admin API: GET, or POST with a JSON `body` and a new
 * Idempotency-Key. Resolves with the parsed JSON; throws an ApiError.
 * A 401 signs out: the key is not (or no longer) an admin key. A path that
 * starts with /onejob/ is taken as it is (GET /onejob/v1/providers, which
 * an admin key may read, is not under the admin prefix).
 */
async function api(path, { body } = {}) {
  const headers = { Authorization: `Bearer ${adminKey()}` };
  if (body !== undefined) {
    headers["Content-Type"] = "application/json";
    headers["Idempotency-Key"] = newRequestKey();
  }
  let res;
  try {
    res = await fetch(path.startsWith("/onejob/") ? path : `${API}${path}`, {
      method: body === undefined ? "GET" : "POST",
      headers,
      body: body === undefined ? undefined : JSON.stringify(body),
      cache: "no-store",
    });
  } catch (error) {
    throw new ApiError(0, { detail: error.message });
  }
  const text = await res.text();
  let data = null;
  try {
    data = text ? JSON.parse(text) : null;
  } catch {}
  if (res.status === 401) signOut("not an admin key");
  if (!res.ok) throw new ApiError(res.status, data, text);
  return data;
}

// ---------------------------------------------------------------------------
// Sign-in and routing

function signOut(message) {
  sessionStorage.removeItem(KEY_STORAGE);
  showSignIn(message);
}

function showSignIn(message) {
  $("console").hidden = true;
  $("sign-in").hidden = false;
  $("sign-out").hidden = true;
  $("who").textContent = "signed out";
  $("who").className = "pill";
  $("sign-in-error").hidden = !message;
  $("sign-in-error").textContent = message ?? "";
  $("admin-key").focus();
}

$("sign-in-form").addEventListener("submit", (event) => {
  event.preventDefault();
  const key = $("admin-key").value.trim();
  if (!key) return;
  sessionStorage.setItem(KEY_STORAGE, key);
  $("admin-key").value = "";
  render();
});
$("sign-out").addEventListener("click", () => signOut());

/** `#job?tenant=dev&key=K` → { name: "job", params }. */
function parseRoute() {
  const hash = location.hash.slice(1);
  const at = hash.indexOf("?");
  const name = at < 0 ? hash : hash.slice(0, at);
  return { name: name || "jobs", params: new URLSearchParams(at < 0 ? "" : hash.slice(at + 1)) };
}

/** A link to view `name` with `params` (empty ones left out). */
function href(name, params = {}) {
  const query = new URLSearchParams(Object.entries(params).filter(([, v]) => v !== undefined && v !== null && v !== "")).toString();
  return `#${name}${query ? `?${query}` : ""}`;
}

const jobHref = (job) => href("job", { tenant: job.tenant, key: job.key, user: job.user });

/** A table row that opens `job`'s page (a click, or Enter when focused); `cells` are its tds. */
function jobRow(job, cells, dataset = {}) {
  const open = () => (location.hash = jobHref(job));
  return el("tr", { class: "link", tabindex: "0", dataset: { key: job.key, tenant: job.tenant, ...dataset }, onclick: open, onkeydown: (e) => e.key === "Enter" && open() }, cells);
}

/** A job's tenant, user and key cells (the key links to its page). */
const whoCells = (job) => [
  el("td", {}, job.tenant),
  el("td", {}, job.user ?? el("span", { class: "muted" }, "—")),
  el("td", { class: "mono key" }, el("a", { href: jobHref(job), title: job.key }, job.key)),
];

/** An error class's cell: "—" for none. */
const causeCell = (errorClass) => el("td", {}, hasCause(errorClass) ? el("span", { class: "cause" }, errorClass) : el("span", { class: "muted" }, "—"));

const VIEWS = { jobs: showJobs, job: showJob, "dead-letters": showDeadLetters, costs: showCosts, savings: showSavings, providers: showProviders, "not-found": showNotFound };

// Each render has a number; a view whose answer arrives after the user has
// moved on (a newer render) drops it.
let renderId = 0;

async function render() {
  const id = ++renderId;
  if (!adminKey()) return showSignIn();
  $("sign-in").hidden = true;
  $("console").hidden = false;
  $("sign-out").hidden = false;
  $("who").textContent = "signed in as admin";
  $("who").className = "pill ok";
  const { name, params } = parseRoute();
  // A mistyped hash, or a job's page without its tenant or key: say so
  // (an unknown name showed the jobs list, a bare #job a blank page).
  const known = VIEWS[name] && name !== "not-found" && (name !== "job" || (params.get("tenant") && params.get("key")));
  const view = known ? name : "not-found";
  for (const section of document.querySelectorAll(".view")) section.hidden = section.id !== `view-${view}`;
  for (const tab of document.querySelectorAll("[data-tab]")) {
    const active = tab.dataset.tab === (view === "job" ? "jobs" : view);
    tab.classList.toggle("active", active);
    if (active) tab.setAttribute("aria-current", "page");
    else tab.removeAttribute("aria-current");
  }
  await VIEWS[view](params, id);
}

addEventListener("hashchange", render);

/**
 * Runs `fetcher` for the view in `section`, then `draw`s its answer. The
 * section's data-state says "loading", "ready" or "error" (tests wait on
 * it); an error shows the problem's title and detail in the section.
 */
async function load(section, id, fetcher, draw) {
  section.dataset.state = "loading";
  // Which route the state is about: tests wait for data-hash to be location.hash.
  delete section.dataset.hash;
  const problem = section.querySelector("[data-role=problem]");
  problem.hidden = true;
  try {
    const data = await fetcher();
    if (id !== renderId) return;
    draw(data);
    section.dataset.state = "ready";
    section.dataset.hash = location.hash;
  } catch (error) {
    if (id !== renderId) return;
    if (!(error instanceof ApiError)) throw error;
    problem.textContent = error.message;
    problem.hidden = false;
    section.dataset.state = "error";
    section.dataset.hash = location.hash;
  }
}

/**
 * What an action did: shown at the top of its view for a while (the job's
 * page refreshes itself while the job runs), until the user goes elsewhere.
 */
let flash = null;
function flashFor(view) {
  if (flash?.view !== view || flash.hash !== location.hash || Date.now() > flash.until) return null;
  return el("p", { class: `outcome ${flash.kind}`, dataset: { role: "outcome" } }, flash.text);
}

/**
 * Runs an operator action from `button`: disabled while it runs, its outcome
 * (or problem) flashed on `view`, then the page rendered again.
 */
async function act(button, view, action) {
  button.disabled = true;
  try {
    flash = { view, kind: "ok", text: await action() };
  } catch (error) {
    if (!(error instanceof ApiError)) throw error;
    if (error.status === 401) return;
    flash = { view, kind: "error", text: error.message };
  } finally {
    button.disabled = false;
  }
  flash.hash = location.hash;
  flash.until = Date.now() + 20_000;
  await render();
}

// ---------------------------------------------------------------------------
// Not found

function showNotFound() {
  const { name } = parseRoute();
  const section = $("view-not-found");
  $("not-found-text").textContent =
    name === "job"
      ? `Not found: a job's page needs its tenant and key (#job?tenant=…&key=…); "${location.hash}" has ${parseRoute().params.get("tenant") ? "no key" : "no tenant"}.`
      : `Not found: this console has no page "${location.hash}".`;
  section.dataset.state = "ready";
  section.dataset.hash = location.hash;
}

// Open a job by its key (the jobs list is searched by filters, not by key).
$("open-job").addEventListener("submit", (event) => {
  event.preventDefault();
  const form = event.currentTarget.elements;
  location.hash = href("job", { tenant: form.tenant.value.trim(), key: form.key.value.trim(), user: form.user.value.trim() });
});

// ---------------------------------------------------------------------------
// 1. Jobs

const JOB_FILTERS = ["tenant", "user", "state", "model", "error_class"];

async function showJobs(params, id) {
  const form = $("job-filters");
  for (const name of JOB_FILTERS) form.elements[name].value = params.get(name) ?? "";
  form.elements.since.value = toLocalInput(params.get("since_ms"));
  form.elements.until.value = toLocalInput(params.get("until_ms"));
  const page = Number(params.get("page") ?? 1);
  $("jobs-page").textContent = page > 1 ? `· page ${page}` : "";

  const query = new URLSearchParams();
  for (const name of [...JOB_FILTERS, "since_ms", "until_ms", "cursor"]) if (params.get(name)) query.set(name, params.get(name));
  query.set("limit", params.get("limit") ?? String(PAGE_SIZE));

  const next = $("jobs-next");
  next.disabled = true;
  $("jobs-first").hidden = page <= 1;
  await load($("view-jobs"), id, () => api(`/jobs?${query}`), ({ jobs, next_cursor }) => {
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
    $("jobs-table").tBodies[0].replaceChildren(...rows);
    labelCells($("jobs-table"));
    next.disabled = !next_cursor;
    next.dataset.cursor = next_cursor ?? "";
  });
}

/**
 * Names each body cell after its column (data-label): on a phone a row is
 * a card of "label value" lines (admin.css), not 11 columns to scroll.
 */
function labelCells(table) {
  const names = [...table.tHead.rows[0].cells].map((th) => th.textContent);
  for (const row of table.tBodies[0].rows) {
    if (row.cells.length !== names.length) continue;
    [...row.cells].forEach((td, i) => (td.dataset.label = names[i]));
  }
}

/** The filters in the form, as the jobs view's params (and the page size, `#jobs?limit=N`, kept). */
function jobFilters() {
  const form = $("job-filters");
  const params = Object.fromEntries(JOB_FILTERS.map((name) => [name, form.elements[name].value.trim()]));
  params.since_ms = fromLocalInput(form.elements.since.value);
  params.until_ms = fromLocalInput(form.elements.until.value);
  params.limit = parseRoute().params.get("limit");
  return params;
}

$("job-filters").addEventListener("submit", (event) => {
  event.preventDefault();
  location.hash = href("jobs", jobFilters());
});
$("f-clear").addEventListener("click", () => (location.hash = href("jobs")));
$("jobs-refresh").addEventListener("click", () => render());
$("jobs-first").addEventListener("click", () => (location.hash = href("jobs", jobFilters())));
$("jobs-next").addEventListener("click", () => {
  const page = Number(parseRoute().params.get("page") ?? 1) + 1;
  location.hash = href("jobs", { ...jobFilters(), cursor: $("jobs-next").dataset.cursor, page });
});

// ---------------------------------------------------------------------------
// 2. One job

/** States in which the job is still moving: its page refreshes itself. */
const MOVING = ["pending", "in_flight", "failed"];
/** Attempts whose answer was not used (a hedge's loser, a late report). */
const UNUSED = ["lost_race", "discarded"];

async function showJob(params, id) {
  const section = $("view-job");
  const job = { tenant: params.get("tenant"), key: params.get("key"), user: params.get("user") };
  const body = $("job-body");
  // Another job than the one shown: clear the page (a refresh of the same job keeps it until the answer).
  const shown = JSON.stringify(job);
  if (body.dataset.shown !== shown) body.replaceChildren();
  body.dataset.shown = shown;
  const query = job.user ? `?user=${encodeURIComponent(job.user)}` : "";
  const path = `/jobs/${encodeURIComponent(job.tenant ?? "")}/${encodeURIComponent(job.key ?? "")}${query}`;
  await load(section, id, () => api(path), (view) => {
    const outcome = flashFor("job");
    body.replaceChildren(
      ...[outcome, jobSummary(view), jobActions(view), jobEffects(view), jobAttempts(view), jobEvents(view), jobResult(view)].filter(Boolean),
    );
    // While it runs, look again in a moment (nothing to lose on this page then).
    if (MOVING.includes(view.state) || view.attempts.some((a) => a.outcome === "running")) {
      setTimeout(() => id === renderId && render(), 2000);
    }
  });
  if (id === renderId && section.dataset.state === "error") body.replaceChildren();
}

function jobSummary(job) {
  // The model asked for when the view has it; else the models the attempts called.
  const model = job.model ?? [...new Set(job.attempts.map((a) => a.model).filter(Boolean))].join(", ");
  const facts = [
    ["Tenant", job.tenant],
    ["User", job.user ?? "—"],
    ["Key", el("span", { class: "mono" }, job.key)],
    ["State", badge(job.state)],
    ["Model", model || "—"],
    ["Mode", job.background ? `background (${fmtNumber(job.enqueued ?? 0)} queue message${job.enqueued === 1 ? "" : "s"})` : "sync"],
    ["Attempts", `${fmtNumber(job.attempts.length)} of ${fmtNumber(job.max_attempts)} allowed`],
    ["Completed by", job.completed_by ? `attempt ${job.completed_by}` : "—"],
    ["Created", timeCell(job.created_ms)],
    ["Updated", timeCell(job.updated_ms)],
    ["Lease until", timeCell(job.lease_until_ms)],
    ["Expires", timeCell(job.expires_ms)],
    ["Fingerprint", el("span", { class: "mono" }, job.fingerprint ?? "—")],
    ["Version", fmtNumber(job.version)],
  ];
  return el(
    "section",
    { class: "card", id: "job-summary" },
    el("div", { class: "card-head" }, el("h1", { class: "mono title" }, job.key), badge(job.state)),
    el("dl", { class: "facts" }, facts.map(([name, value]) => [el("dt", {}, name), el("dd", {}, value)])),
  );
}

/** The operator actions that apply to the job's state. */
function jobActions(job) {
  const who = { tenant: job.tenant, ...(job.user ? { user: job.user } : {}), key: job.key };
  const card = el("section", { class: "card", id: "job-actions" }, el("h2", {}, "Operator actions"));
  if (job.state === "dead") {
    const replay = el("button", { class: "primary", id: "replay", type: "button" }, "Replay");
    replay.addEventListener("click", () =>
      act(replay, "job", async () => {
        const answer = await api("/dead-letters/replay", { body: who });
        if (answer.replayed?.length) return "Replayed: the job runs again under the same key, with a fresh allowance of attempts.";
        const why = answer.skipped?.[0]?.reason ?? answer.skipped?.[0]?.detail;
        return `Skipped: the job was not replayed${why ? ` (${words(why)})` : " (it is no longer dead)"}.`;
      }),
    );
    card.append(
      el("p", { class: "lead" }, "This job used up its attempts. A replay gives it a fresh allowance under the same key; callers waiting on the key get the new result."),
      replay,
    );
  } else if (job.state === "unknown") {
    const response = el("textarea", { id: "resolve-body", rows: "7", spellcheck: "false", placeholder: '{"id": "chatcmpl-…", "object": "chat.completion", "choices": [ … ]}' });
    const error = el("p", { class: "problem", hidden: true });
    response.addEventListener("input", () => (error.hidden = true));
    const resolve = el("button", { class: "primary", id: "resolve", type: "button" }, "Resolve as succeeded");
    const retry = el("button", { id: "allow-attempt", type: "button" }, "Allow one new attempt");
    resolve.addEventListener("click", () => {
      let parsed;
      try {
        parsed = JSON.parse(response.value);
      } catch (e) {
        error.textContent = `The response is not JSON: ${e.message}`;
        error.hidden = false;
        return;
      }
      act(resolve, "job", async () => {
        await api("/jobs/resolve", { body: { ...who, action: "succeeded", response: { status: 200, body: parsed } } });
        return "Resolved as succeeded: callers of this key now get the response you gave.";
      });
    });
    retry.addEventListener("click", () =>
      act(retry, "job", async () => {
        await api("/jobs/resolve", { body: { ...who, action: "retry" } });
        // A caller's own job is not re-sent by onejob (it keeps no caller's
        // request): its next request with the key runs the attempt.
        return job.background
          ? "One new attempt allowed: the queue runs the job again now."
          : "One new attempt allowed: the next request with this key runs it (onejob does not re-send a caller's request on its own).";
      }),
    );
    card.append(
      el("p", { class: "lead" }, `The last attempt's outcome is unknown: the provider may have answered (and billed) it. If you found the answer (in the provider's dashboard or logs), paste it and resolve the job; otherwise allow one new attempt, at the risk of paying twice${job.background ? " (the queue runs it at once)" : " (it runs when the caller next sends the request with this key)"}.`),
      el("label", { for: "resolve-body" }, "The provider's response (JSON body, sent with status 200)"),
      response,
      error,
      el("div", { class: "actions" }, resolve, " ", retry),
    );
  } else if (job.effects?.some((e) => ["dead", "unknown"].includes(e.state))) {
    const replay = el("button", { class: "primary", id: "replay-effects", type: "button" }, "Replay the effects that did not happen");
    replay.addEventListener("click", () =>
      act(replay, "job", async () => {
        await api("/dead-letters/replay", { body: who });
        return "Replayed: only the dead or unknown effects go again, once each; the answer is not asked for again.";
      }),
    );
    card.append(
      el("p", { class: "lead" }, "The answer was delivered, but some effect did not happen (partial success). A replay sends only those effects."),
      replay,
    );
  } else if (job.effects?.some((e) => e.state === "awaiting_approval")) {
    // The approver sees what is about to be written or sent, then approves.
    const waiting = job.effects.filter((e) => e.state === "awaiting_approval");
    const approve = el("button", { class: "primary", id: "approve", type: "button" }, waiting.length === 1 ? `Approve ${waiting[0].name}` : `Approve all ${waiting.length}`);
    approve.addEventListener("click", () =>
      act(approve, "job", async () => {
        await api(`/jobs/${encodeURIComponent(job.tenant)}/${encodeURIComponent(job.key)}/approve${job.user ? `?user=${encodeURIComponent(job.user)}` : ""}`, { body: {} });
        return `Approved: ${waiting.map((e) => e.name).join(", ")} ${waiting.length === 1 ? "runs" : "run"} once.`;
      }),
    );
    append(card, [
      el("p", { class: "lead" }, `The answer is in; ${waiting.length === 1 ? "an effect waits" : `${waiting.length} effects wait`} for an operator's approval before ${waiting.length === 1 ? "it runs" : "they run"}.`),
      waiting.map((effect) => [
        el("h3", { class: "approval-head" }, `${effect.name} `, el("span", { class: "muted" }, `(${effect.kind}) will send:`)),
        effect.approval?.expires_ms ? el("p", { class: "muted" }, "Approve until ", timeCell(effect.approval.expires_ms)) : null,
        el("pre", { class: "body", dataset: { effect: effect.name } }, pretty(effect.payload)),
      ]),
      el("div", { class: "actions" }, approve),
    ]);
  } else {
    card.append(el("p", { class: "muted" }, `None for a ${words(job.state)} job: replay is for dead jobs, resolving for unknown ones.`));
  }
  return card;
}

/** One row per attempt, with a bar on a shared time axis from the job's creation. */
function jobAttempts(job) {
  const card = el("section", { class: "card wide", id: "job-attempts" }, el("h2", {}, "Attempts"));
  if (job.attempts.length === 0) return append(card, [el("p", { class: "muted" }, "No attempt yet.")]);
  const now = Date.now();
  // Where an attempt's bar ends: when it reported; now while it runs; and an
  // attempt that never reported (a hedge's loser left running) at the job's
  // last change.
  const stopOf = (a) => a.ended_ms ?? (a.outcome === "running" ? now : Math.max(a.started_ms, job.updated_ms ?? a.started_ms));
  const start = Math.min(job.created_ms, ...job.attempts.map((a) => a.started_ms));
  const end = Math.max(start + 1, ...job.attempts.map(stopOf));
  const pct = (ms) => `${(((ms - start) / (end - start)) * 100).toFixed(2)}%`;
  const rows = job.attempts.map((a) => {
    const unused = UNUSED.includes(a.outcome);
    const stop = stopOf(a);
    const bar = el("div", { class: `bar ${a.outcome}`, title: `${fmtMs(a.started_ms - start)} → ${a.ended_ms ? fmtMs(a.ended_ms - start) : a.outcome === "running" ? "still running" : "no report"}` });
    bar.style.left = pct(a.started_ms);
    bar.style.width = `max(3px, calc(${pct(stop)} - ${pct(a.started_ms)}))`;
    const details = [
      a.status ? `HTTP ${a.status}` : a.ended_ms ? "no HTTP status" : a.outcome === "running" ? "running" : "no answer recorded",
      a.latency_ms !== undefined && a.latency_ms !== null ? fmtMs(a.latency_ms) : null,
      a.usage ? `${fmtNumber(a.usage.total_tokens)} tokens (${fmtNumber(a.usage.prompt_tokens)} in, ${fmtNumber(a.usage.completion_tokens)} out)` : a.ended_ms ? "no usage" : null,
      a.streamed ? `streamed${a.first_byte_ms ? `, first byte after ${fmtMs(a.first_byte_ms - a.started_ms)}` : ""}` : null,
    ].filter(Boolean);
    return el(
      "li",
      { class: `attempt${unused ? " unused" : ""}`, dataset: { outcome: a.outcome, number: String(a.number) } },
      el("span", { class: "n" }, `#${a.number}`),
      el("span", { class: "who" }, el("strong", {}, a.provider), a.model ? el("span", { class: "muted model" }, a.model) : null),
      el("div", { class: "track" }, bar),
      el("span", { class: "details" }, details.join(" · "), hasCause(a.error_class) ? [" · ", el("span", { class: "cause" }, a.error_class)] : null),
      el(
        "span",
        { class: "outcome-cell" },
        el("span", { class: `badge ${a.outcome}` }, words(a.outcome)),
        unused ? el("span", { class: "not-used", title: "Its answer was audited (and may have been paid for) but never given to anyone" }, "not used") : null,
      ),
    );
  });
  // The time axis under the bars, in the bars' column.
  const axis = el("div", { class: "axis" }, el("span", {}, "job created"), el("span", {}, `+${fmtMs(end - start)}`));
  rows.push(el("li", { class: "axis-row", "aria-hidden": "true" }, el("span"), el("span"), axis, el("span"), el("span")));
  return append(card, [el("ol", { class: "attempts" }, rows)]);
}

/**
 * A job type's effects: state, attempts, receipt, approvals and
 * reconciliations, with the operator's actions on the ones that need one.
 */
function jobEffects(job) {
  if (!job.effects?.length) return null;
  const base = `/jobs/${encodeURIComponent(job.tenant)}/${encodeURIComponent(job.key)}`;
  const query = job.user ? `?user=${encodeURIComponent(job.user)}` : "";
  const card = el("section", { class: "card wide", id: "job-effects" }, el("h2", {}, `Effects — ${words(job.effects_state ?? "")}`));
  const rows = job.effects.map((effect) => {
    const actions = el("td", {});
    const button = (label, run) => {
      const b = el("button", { type: "button", dataset: { effectAction: label } }, label);
      b.addEventListener("click", () => act(b, "job", run));
      actions.append(b, " ");
    };
    if (effect.state === "awaiting_approval") {
      button("Approve", async () => {
        await api(`${base}/approve${query}`, { body: {} });
        return `Approved: ${effect.name} runs once.`;
      });
    }
    if (["dead", "unknown"].includes(effect.state)) {
      button("Resend", async () => {
        await api(`${base}/effects/${encodeURIComponent(effect.name)}/resend${query}`, { body: {} });
        return `Resent: ${effect.name} goes once more (with its own retries).`;
      });
    }
    if (["dead", "unknown", "conflict"].includes(effect.state)) {
      button("Mark done", async () => {
        await api(`${base}/effects/${encodeURIComponent(effect.name)}/mark_done${query}`, { body: {} });
        return `Marked done: ${effect.name} will not be sent again.`;
      });
    }
    const events = effect.events.map((e) => `${words(e.what)}${e.by ? ` by ${e.by}` : ""}`).join(", ");
    const last = effect.attempts.at(-1);
    // Once approved, the `approved` event says by whom.
    const approval =
      effect.state === "awaiting_approval" && effect.approval
        ? el("div", { class: "muted" }, `approval until ${new Date(effect.approval.expires_ms).toLocaleString()}`)
        : "";
    return el(
      "tr",
      { dataset: { effect: effect.name, state: effect.state } },
      el("td", {}, el("strong", {}, effect.name), " ", el("span", { class: "muted" }, effect.kind)),
      el("td", {}, el("span", { class: `badge ${effect.state === "done" ? "completed" : effect.state}` }, words(effect.state)), effect.reconciled ? " (reconciled)" : ""),
      el("td", { class: "num" }, `${effect.attempts.length} of ${effect.max_attempts}`, last?.detail ? el("div", { class: "muted" }, last.detail) : ""),
      el("td", { class: "mono muted", title: effect.delivery_id }, effect.receipt ? JSON.stringify(effect.receipt).slice(0, 120) : "—"),
      el("td", {}, events || "—", approval),
      actions,
    );
  });
  const head = el("tr", {}, ...["Effect", "State", "Attempts", "Receipt", "Events", ""].map((h) => el("th", {}, h)));
  const table = el("table", { class: "effects cards" }, el("thead", {}, head), el("tbody", {}, rows));
  labelCells(table);
  return append(card, [table]);
}

/**
 * The job's operator events and, with them, what operators did to its
 * effects (an approval, a resend, a mark done): the job's own events do not
 * record those; each effect's events do, with who and when.
 */
function jobEvents(job) {
  const card = el("section", { class: "card", id: "job-events" }, el("h2", {}, "Operator events"));
  const onEffects = (job.effects ?? []).flatMap((effect) => effect.events.filter((e) => e.by).map((e) => ({ at_ms: e.at_ms, action: e.what, by: e.by, effect: effect.name })));
  const events = [...(job.events ?? []), ...onEffects].sort((a, b) => a.at_ms - b.at_ms);
  if (!events.length) return append(card, [el("p", { class: "muted" }, "No operator has acted on this job.")]);
  const items = events.map((e) =>
    el(
      "li",
      { dataset: { action: e.action, effect: e.effect } },
      timeCell(e.at_ms),
      el("span", {}, el("strong", {}, words(e.action)), e.effect ? [" ", el("span", { class: "tag" }, e.effect)] : null, " by ", e.by),
      e.request ? el("span", { class: "mono muted", title: "the operator request's Idempotency-Key" }, e.request) : null,
    ),
  );
  return append(card, [el("ol", { class: "events" }, items)]);
}

function jobResult(job) {
  const card = el("section", { class: "card", id: "job-result" }, el("h2", {}, "Stored result"));
  const result = job.result;
  if (!result) return append(card, [el("p", { class: "muted" }, "None: the job has no final answer.")]);
  return append(card, [
    el("p", {}, el("span", { class: `badge ${result.status < 300 ? "completed" : "dead"}` }, `HTTP ${result.status}`), " ", el("span", { class: "mono muted" }, result.content_type ?? "")),
    el("pre", { class: "body" }, pretty(result.body)),
  ]);
}

// ---------------------------------------------------------------------------
// 3. Dead letters

async function showDeadLetters(params, id) {
  const tenant = params.get("tenant") ?? "";
  $("dl-tenant").value = tenant;
  const outcome = flashFor("dead-letters");
  $("dl-outcome").hidden = !outcome;
  if (outcome) {
    $("dl-outcome").className = outcome.className;
    $("dl-outcome").textContent = outcome.textContent;
  }
  const query = tenant ? `?tenant=${encodeURIComponent(tenant)}` : "";
  await load($("view-dead-letters"), id, () => api(`/dead-letters${query}`), ({ groups, entries }) => {
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
    $("dl-table").tBodies[0].replaceChildren(...rows);
    labelCells($("dl-table"));
  });
  if (id === renderId && $("view-dead-letters").dataset.state === "ready") await deadSyncJobs(tenant, id);
}

/**
 * Dead synchronous jobs: only background jobs are dead-lettered (their
 * caller is gone; a synchronous caller got the error and may send again
 * with its key), so they are not among the entries; the jobs index lists
 * them, newest first.
 */
async function deadSyncJobs(tenant, id) {
  const query = new URLSearchParams({ state: "dead", limit: "50", ...(tenant ? { tenant } : {}) });
  let rows;
  try {
    rows = (await api(`/jobs?${query}`)).jobs.filter((job) => !job.background);
  } catch (error) {
    if (!(error instanceof ApiError)) throw error;
    rows = null;
    $("dl-sync-note").textContent = `The dead synchronous jobs could not be listed: ${error.message}`;
  }
  if (id !== renderId || !rows) return;
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
  $("dl-sync").tBodies[0].replaceChildren(...body);
  labelCells($("dl-sync"));
  $("dl-sync-note").textContent = `${fmtNumber(rows.length)} from the jobs index${rows.length === 50 ? " (the newest 50)" : ""}.`;
}

/** One cause: its count, a 24 h bar chart of its trend, and a replay of the whole group. */
function groupCard(group, tenant) {
  const replay = el("button", { class: "primary", type: "button", dataset: { replay: group.error_class } }, "Replay group");
  replay.addEventListener("click", () =>
    act(replay, "dead-letters", async () => {
      const answer = await api("/dead-letters/replay", { body: { error_class: group.error_class, ...(tenant ? { tenant } : {}) } });
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
    el("div", { class: "actions" }, replay, " ", el("a", { href: href("jobs", { state: "dead", error_class: group.error_class, tenant }) }, "its jobs")),
  );
}

/** 24 hourly counts, oldest first, as inline SVG bars (an empty hour is a thin line). */
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

$("dl-filters").addEventListener("submit", (event) => {
  event.preventDefault();
  location.hash = href("dead-letters", { tenant: $("dl-tenant").value.trim() });
});
$("dl-refresh").addEventListener("click", () => render());

// ---------------------------------------------------------------------------
// 4. Cost

const DAY_MS = 86_400_000;

async function showCosts(params, id) {
  const span = params.get("since") ?? String(DAY_MS);
  $("cost-since").value = span;
  const query = span === "all" ? "" : `?since_ms=${Date.now() - Number(span)}`;
  await load($("view-costs"), id, () => api(`/costs${query}`), (costs) => {
    $("cost-window").textContent = costs.since_ms ? `Since ${dateTime.format(new Date(costs.since_ms))}.` : "Every job still retained.";
    // Which prices: the bundled table's date, and the models PRICES prices instead.
    const prices = costs.prices;
    $("cost-prices").textContent = prices
      ? `Prices: onejob's bundled list prices as of ${prices.bundled_as_of}${prices.overridden?.length ? `; PRICES sets ${prices.overridden.join(", ")}` : ""}. A job is costed when it is indexed, with the prices of that time.`
      : "";
    costTable($("cost-tenants"), costs.by_tenant ?? [], "tenant");
    costTable($("cost-models"), costs.by_model ?? [], "model");
  });
}

function costTable(table, rows, name) {
  const body = rows.map((row) =>
    el("tr", { dataset: { [name]: row[name] ?? "" } }, el("td", {}, row[name] ?? el("span", { class: "muted" }, "(none)")), el("td", { class: "num" }, fmtNumber(row.jobs)), el("td", { class: "num" }, fmtNumber(row.tokens)), el("td", { class: "num" }, fmtUsd(row.cost_usd))),
  );
  if (body.length === 0) body.push(el("tr", {}, el("td", { colspan: "4", class: "empty" }, "No jobs in this period.")));
  table.tBodies[0].replaceChildren(...body);
  const sum = (field) => rows.reduce((total, row) => total + (row[field] ?? 0), 0);
  table.tFoot.replaceChildren(
    el("tr", {}, el("th", {}, "Total"), el("th", { class: "num" }, fmtNumber(sum("jobs"))), el("th", { class: "num" }, fmtNumber(sum("tokens"))), el("th", { class: "num" }, fmtUsd(sum("cost_usd")))),
  );
}

// ---------------------------------------------------------------------------
// 5. Savings: GET /onejob/v1/admin/savings

const HOUR_MS = 3_600_000;
const KINDS = [
  ["kv_replay", "KV replays"],
  ["ledger_replay", "Ledger replays"],
  ["coalesced", "Coalesced"],
  ["keyless_join", "Keyless joins"],
];

async function showSavings(params, id) {
  const span = params.get("since") ?? String(DAY_MS);
  const tenant = params.get("tenant") ?? "";
  $("savings-since").value = span;
  $("savings-tenant").value = tenant;
  const now = Date.now();
  const since = span === "all" ? 0 : now - Number(span);
  const query = new URLSearchParams({ since_ms: String(since), ...(tenant ? { tenant } : {}) });
  await load($("view-savings"), id, () => api(`/savings?${query}`), (report) => {
    // The API counts whole hours: from the start of since's hour.
    const from = report.since_ms ?? since;
    $("savings-window").textContent = from ? `Since ${dateTime.format(new Date(from))} (counted per hour).` : "Every count still kept.";
    const prices = report.prices;
    $("savings-prices").textContent = prices
      ? `Prices: onejob's bundled list prices as of ${prices.bundled_as_of}${prices.overridden?.length ? `; PRICES sets ${prices.overridden.join(", ")}` : ""}.`
      : "";
    $("savings-totals").replaceChildren(...savingsTiles(report.totals));
    $("savings-chart").replaceChildren(savingsChart(report.series ?? [], from || firstBucket(report.series ?? []), now));
    savingsTable($("savings-tenants"), report.by_tenant ?? [], "tenant");
    savingsTable($("savings-models"), report.by_model ?? [], "model");
  });
}

const firstBucket = (series) => (series.length ? series[0].bucket_ms : Date.now() - DAY_MS);

/** The totals as tiles: calls avoided (and their share of all answers), tokens, saved and spent. */
function savingsTiles(t) {
  const answered = t.upstream_calls_avoided + t.jobs;
  const share = answered ? `${Math.round((t.upstream_calls_avoided / answered) * 100)}% of ${fmtNumber(answered)} answers` : "no answers yet";
  const byKind = KINDS.map(([kind], i) => `${fmtNumber(t.answered_without_call[kind])} ${["from KV", "from the Ledger", "coalesced", "keyless"][i]}`).join(" · ");
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

$("savings-filters").addEventListener("submit", (event) => {
  event.preventDefault();
  location.hash = href("savings", { since: $("savings-since").value, tenant: $("savings-tenant").value.trim() });
});
$("savings-since").addEventListener("change", () => (location.hash = href("savings", { since: $("savings-since").value, tenant: $("savings-tenant").value.trim() })));
$("savings-refresh").addEventListener("click", () => render());

// ---------------------------------------------------------------------------
// 6. Providers: GET /onejob/v1/providers (an admin key may read it)

async function showProviders(params, id) {
  await load($("view-providers"), id, () => api("/onejob/v1/providers"), ({ providers, routes }) => {
    const now = Date.now();
    const rows = providers.map((p) => {
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
    });
    if (rows.length === 0) rows.push(el("tr", {}, el("td", { colspan: "10", class: "empty" }, "No providers.")));
    $("providers-table").tBodies[0].replaceChildren(...rows);
    labelCells($("providers-table"));
    const routeRows = routes.map((r) =>
      el(
        "tr",
        { dataset: { model: r.model } },
        el("td", { class: "mono" }, r.model),
        el("td", {}, r.providers.map((s) => `${s.provider}${s.model ? ` (${s.model})` : ""}`).join(" → ")),
        el("td", {}, r.hedge_after_ms === null || r.hedge_after_ms === undefined ? el("span", { class: "muted" }, "—") : `after ${fmtMs(r.hedge_after_ms)}`),
        el("td", {}, r.contract ? "yes" : "no"),
      ),
    );
    if (routeRows.length === 0) routeRows.push(el("tr", {}, el("td", { colspan: "4", class: "empty" }, "No routes.")));
    $("routes-table").tBodies[0].replaceChildren(...routeRows);
    labelCells($("routes-table"));
  });
}

$("providers-refresh").addEventListener("click", () => render());

$("cost-since").addEventListener("change", () => (location.hash = href("costs", { since: $("cost-since").value })));
$("cost-refresh").addEventListener("click", () => render());

// ---------------------------------------------------------------------------

setInterval(tick, 15_000);
await render();
document.body.dataset.ready = "true";
