// Turning `fetch(input, init)` arguments into one request onejob can
// fingerprint, persist and re-send, and back.
import { configError } from "./errors.js";

/**
 * A request as onejob fingerprints, persists and re-sends it.
 * @typedef {object} Outgoing
 * @property {string} url absolute
 * @property {string} method upper-case
 * @property {[string, string][]} headers
 * @property {string | null} body
 * @property {AbortSignal | undefined} signal
 */

/**
 * Whether `value` can have properties (the options and `init` apps pass are read field by field).
 * @param {unknown} value
 * @returns {value is Record<string, any>}
 */
export const isObject = (value) => value !== null && (typeof value === "object" || typeof value === "function");

/**
 * A header's value from `[name, value]` pairs, by name in any case.
 * @param {[string, string][]} pairs
 * @param {string} name lower-case
 */
export const header = (pairs, name) => pairs.find(([n]) => n.toLowerCase() === name)?.[1];

/**
 * Turns `fetch(input, init)` arguments into one request onejob can fingerprint, persist and re-send.
 * @param {string | URL} input
 * @param {unknown} init
 * @param {string | undefined} endpoint
 * @returns {Outgoing}
 */
export function normalize(input, init, endpoint) {
  /** @param {string} name */
  const get = (name) => (isObject(init) ? init[name] : undefined);
  // A string, or a `URL` (whose toString() is its href).
  const url = resolve(typeof input === "string" ? input : String(input), endpoint);
  const method = typeof get("method") === "string" ? get("method").toUpperCase() : "GET";
  /** @type {[string, string][]} */
  const headers = [...new Headers(get("headers") ?? undefined)];
  let body = get("body");
  if (body == null) body = null;
  else if (typeof body !== "string") throw configError("fetch body must be a string (onejob fingerprints and persists it)");
  // fetch would throw a TypeError, which must not look like a network error.
  if (body !== null && isBodiless(method)) throw configError("a GET or HEAD request cannot have a body");
  const signal = typeof AbortSignal === "function" && get("signal") instanceof AbortSignal ? get("signal") : undefined;
  return { url, method, headers, body, signal };
}

/** @param {string} method */
export const isBodiless = (method) => method === "GET" || method === "HEAD";

/**
 * An absolute URL: one with a scheme stays as it is; a relative one goes
 * under `endpoint` (its path kept), else resolves against the page's base
 * URL, as `fetch` does.
 * @param {string} raw
 * @param {string | undefined} endpoint
 */
export function resolve(raw, endpoint) {
  try {
    if (/^[a-z][a-z0-9+.-]*:\/\//i.test(raw)) return new URL(raw).href;
    if (endpoint !== undefined) return new URL(raw.startsWith("/") ? endpoint + raw : `${endpoint}/${raw}`).href;
    return new URL(raw, globalThis.document?.baseURI ?? globalThis.location?.href).href;
  } catch {
    throw configError(`not a URL: ${raw}`);
  }
}

/**
 * Reads a `Request` input into plain `[url, init]` form.
 * @param {Request} input
 * @param {unknown} init
 * @returns {Promise<[string, Record<string, any>]>}
 */
export async function unpackRequest(input, init) {
  /** @type {Record<string, any>} */
  const merged = {};
  for (const name of ["method", "headers", "signal"]) {
    const fromInit = isObject(init) ? init[name] : undefined;
    merged[name] = fromInit === undefined ? input[/** @type {"method" | "headers" | "signal"} */ (name)] : fromInit;
  }
  let body = isObject(init) ? init.body : undefined;
  // A GET or HEAD `Request` has no body; reading one gives "", which fetch refuses.
  if (body === undefined && !isBodiless(String(merged.method).toUpperCase())) body = await input.clone().text();
  merged.body = body;
  return [input.url, merged];
}

/**
 * What `resume()` needs after a reload, as the engine stores it; the
 * credential is not stored. The body is kept as fetch sends it: a lone
 * surrogate becomes U+FFFD (JSON.stringify would write it as `\ud800`, which
 * core's strict reader refuses, and the record, its key with it, would be lost).
 * @param {Outgoing} request
 */
export function savedJson({ url, method, headers, body }) {
  const kept = headers.filter(([name]) => !["authorization", "idempotency-key"].includes(name.toLowerCase()));
  if (body !== null) body = body.toWellFormed?.() ?? body.replace(/\p{Cs}/gu, "\ufffd");
  return JSON.stringify({ url, method, headers: kept, body });
}

/**
 * The request `savedJson` wrote.
 * @param {string} text
 * @returns {Outgoing}
 */
export function fromSaved(text) {
  const { url, method, headers, body } = JSON.parse(text);
  return { url, method, headers, body, signal: undefined };
}
