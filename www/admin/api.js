// The admin API's client: one function per route the console calls. Every
// call carries the admin key; a change is a POST with its own
// Idempotency-Key. What each route answers is typed in answers.js.
import { adminKey, signOut } from "./session.js";

/** @typedef {import("./answers.js").JobsPage} JobsPage */
/** @typedef {import("./answers.js").AdminJob} AdminJob */
/** @typedef {import("./answers.js").DeadLettersAnswer} DeadLettersAnswer */
/** @typedef {import("./answers.js").CostsAnswer} CostsAnswer */
/** @typedef {import("./answers.js").SavingsAnswer} SavingsAnswer */
/** @typedef {import("./answers.js").ProvidersPage} ProvidersPage */
/** @typedef {import("./answers.js").ReplayReport} ReplayReport */
/**
 * A job by its name (a user's job needs its user).
 * @typedef {{ tenant: string | null, key: string | null, user?: string | null }} JobName
 */

const API = "/onejob/v1/admin";

/**
 * An RFC 9457 problem, as far as the console reads it.
 * @typedef {{ title?: string, detail?: string }} Problem
 */

/** An answer that was not 2xx: `problem` is its RFC 9457 body when it has one. */
export class ApiError extends Error {
  /**
   * `status` 0: the gateway did not answer.
   * @param {number} status
   * @param {Problem | null} problem
   * @param {string} [text] the body, when it is not a problem
   */
  constructor(status, problem, text) {
    super(problemText(status, problem, text));
    this.status = status;
    this.problem = problem;
  }
}

/**
 * @param {number} status
 * @param {Problem | null} problem
 * @param {string} [text]
 */
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
 * Idempotency-Key. Resolves with the parsed JSON (typed by the caller: see
 * answers.js); throws an ApiError. A 401 signs out: the key is not (or no
 * longer) an admin key. A path that starts with /onejob/ is taken as it is
 * (GET /onejob/v1/providers, which an admin key may read, is not under the
 * admin prefix).
 * @param {string} path
 * @param {{ body?: unknown }} [options]
 * @returns {Promise<any>}
 */
async function api(path, { body } = {}) {
  /** @type {Record<string, string>} */
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
    throw new ApiError(0, { detail: /** @type {Error} */ (error).message });
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
// Reading

/**
 * A page of the jobs list, newest first (`query`: its filters and cursor).
 * @param {URLSearchParams} query
 * @returns {Promise<JobsPage>}
 */
export const listJobs = (query) => api(`/jobs?${query}`);

/**
 * One job, with its attempts, events, effects and stored answer.
 * @param {JobName} job
 * @returns {Promise<AdminJob>}
 */
export const getJob = (job) => api(jobPath(job) + userQuery(job.user));

/**
 * The dead letters (of one tenant, or every tenant the key reaches), by cause.
 * @param {string} tenant
 * @returns {Promise<DeadLettersAnswer>}
 */
export const listDeadLetters = (tenant) => api(`/dead-letters${tenant ? `?tenant=${encodeURIComponent(tenant)}` : ""}`);

/**
 * Jobs, tokens and cost per tenant and per model, since `sinceMs` (or every job retained).
 * @param {number | undefined} sinceMs
 * @returns {Promise<CostsAnswer>}
 */
export const getCosts = (sinceMs) => api(`/costs${sinceMs === undefined ? "" : `?since_ms=${sinceMs}`}`);

/**
 * Calls avoided and what they saved, next to what was spent (`query`: since_ms, tenant).
 * @param {URLSearchParams} query
 * @returns {Promise<SavingsAnswer>}
 */
export const getSavings = (query) => api(`/savings?${query}`);

/**
 * Each provider's breaker, and the routes over them.
 * @returns {Promise<ProvidersPage>}
 */
export const getProviders = () => api("/onejob/v1/providers");

// ---------------------------------------------------------------------------
// Acting

/**
 * Replays one dead job (its name) or every dead job of a cause (`{ error_class, tenant? }`);
 * a job whose effects did not all happen gets only those again.
 * @param {{ tenant: string, user?: string, key: string } | { error_class: string, tenant?: string }} selection
 * @returns {Promise<ReplayReport>}
 */
export const replay = (selection) => api("/dead-letters/replay", { body: selection });

/**
 * Settles an unknown job: as succeeded with the provider's response, or by allowing one new attempt.
 * @param {{ tenant: string, user?: string, key: string, action: "succeeded", response: { status: number, body: unknown } } | { tenant: string, user?: string, key: string, action: "retry" }} resolution
 */
export const resolve = (resolution) => api("/jobs/resolve", { body: resolution });

/**
 * Approves the job's effects that wait for an approval.
 * @param {JobName} job
 */
export const approve = (job) => api(`${jobPath(job)}/approve${userQuery(job.user)}`, { body: {} });

/**
 * An operator's action on one effect: send it once more, or mark it done.
 * @param {JobName} job
 * @param {string} effect its name
 * @param {"resend" | "mark_done"} action
 */
export const effectAction = (job, effect, action) =>
  api(`${jobPath(job)}/effects/${encodeURIComponent(effect)}/${action}${userQuery(job.user)}`, { body: {} });

/** @param {JobName} job */
const jobPath = ({ tenant, key }) => `/jobs/${encodeURIComponent(tenant ?? "")}/${encodeURIComponent(key ?? "")}`;

/** @param {string | null | undefined} user */
const userQuery = (user) => (user ? `?user=${encodeURIComponent(user)}` : "");
