// Which view shows: the URL's hash names it, so links, reloads and the back
// button work (`#job?tenant=dev&key=K`). Rendering a view, loading its data,
// and the outcome of an operator's action are here too.
import { ApiError } from "./api.js";
import { $, el } from "./dom.js";
import { adminKey, showSignedIn, showSignIn } from "./session.js";

/**
 * A view: shows itself for the hash's `params`. `id` is the render's number:
 * an answer that arrives once a newer render has started is dropped (isCurrent).
 * @typedef {(params: URLSearchParams, id: number) => void | Promise<void>} View
 */

/** @type {Record<string, View>} */
let views = {};

// Each render has a number; a view whose answer arrives after the user has
// moved on (a newer render) drops it.
let renderId = 0;

/**
 * Starts the console: `views` by name (index.html has a `view-{name}`
 * section for each, and "not-found"); renders on every hash change.
 * @param {Record<string, View>} named
 */
export async function start(named) {
  views = named;
  addEventListener("hashchange", render);
  await render();
}

/**
 * Whether render `id` is still the latest.
 * @param {number} id
 */
export const isCurrent = (id) => id === renderId;

/** `#job?tenant=dev&key=K` → { name: "job", params }. */
export function parseRoute() {
  const hash = location.hash.slice(1);
  const at = hash.indexOf("?");
  const name = at < 0 ? hash : hash.slice(0, at);
  return { name: name || "jobs", params: new URLSearchParams(at < 0 ? "" : hash.slice(at + 1)) };
}

/**
 * A link to view `name` with `params` (empty ones left out).
 * @param {string} name
 * @param {Record<string, string | number | null | undefined>} [params]
 */
export function href(name, params = {}) {
  const query = new URLSearchParams(
    /** @type {[string, string][]} */ (Object.entries(params).filter(([, v]) => v !== undefined && v !== null && v !== "")),
  ).toString();
  return `#${name}${query ? `?${query}` : ""}`;
}

/** Shows the view the hash names (or the sign-in form). */
export async function render() {
  const id = ++renderId;
  if (!adminKey()) return showSignIn();
  showSignedIn();
  const { name, params } = parseRoute();
  // A mistyped hash, or a job's page without its tenant or key: say so
  // (an unknown name showed the jobs list, a bare #job a blank page).
  const known = views[name] && name !== "not-found" && (name !== "job" || (params.get("tenant") && params.get("key")));
  const view = known ? name : "not-found";
  for (const section of /** @type {NodeListOf<HTMLElement>} */ (document.querySelectorAll(".view"))) section.hidden = section.id !== `view-${view}`;
  for (const tab of /** @type {NodeListOf<HTMLElement>} */ (document.querySelectorAll("[data-tab]"))) {
    const active = tab.dataset.tab === (view === "job" ? "jobs" : view);
    tab.classList.toggle("active", active);
    if (active) tab.setAttribute("aria-current", "page");
    else tab.removeAttribute("aria-current");
  }
  await views[view](params, id);
}

/**
 * Runs `fetcher` for the view in `section`, then `draw`s its answer. The
 * section's data-state says "loading", "ready" or "error" (tests wait on
 * it); an error shows the problem's title and detail in the section.
 * @template T
 * @param {HTMLElement} section
 * @param {number} id the render's
 * @param {() => Promise<T>} fetcher
 * @param {(data: T) => void} draw
 */
export async function load(section, id, fetcher, draw) {
  section.dataset.state = "loading";
  // Which route the state is about: tests wait for data-hash to be location.hash.
  delete section.dataset.hash;
  const problem = /** @type {HTMLElement} */ (section.querySelector("[data-role=problem]"));
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
 * @type {{ view: string, kind: "ok" | "error", text: string, hash?: string, until?: number } | null}
 */
let flash = null;

/**
 * The last action's outcome, if it is `view`'s and still fresh.
 * @param {string} view
 */
export function flashFor(view) {
  if (flash?.view !== view || flash.hash !== location.hash || Date.now() > (flash.until ?? 0)) return null;
  return el("p", { class: `outcome ${flash.kind}`, dataset: { role: "outcome" } }, flash.text);
}

/**
 * Runs an operator action from `button`: disabled while it runs, its outcome
 * (or problem) flashed on `view`, then the page rendered again.
 * @param {HTMLButtonElement} button
 * @param {string} view
 * @param {() => Promise<string>} action resolves to what it did, in words
 */
export async function act(button, view, action) {
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

/**
 * Hooks up a section's Refresh button: renders the view again.
 * @param {string} id the button's
 */
export const refreshOn = (id) => $(id).addEventListener("click", () => render());
