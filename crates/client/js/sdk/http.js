// Reading responses and sending requests, the host's way.
import { header } from "./request.js";

/**
 * The headers core reads to decide a retry, `x-should-retry`, `retry-after-ms`
 * and `Retry-After`, joined by line feeds (no header value holds one), each
 * empty when absent: what `Engine.next` and `Engine.serverDelay` take.
 * @param {Response | undefined} response
 */
export const retryHeaders = (response) =>
  ["x-should-retry", "retry-after-ms", "retry-after"].map((name) => response?.headers.get(name) ?? "").join("\n");

/**
 * How long a response asks to wait (core reads the headers), or -1.
 * @param {import("../onejob.js").Engine} core
 * @param {Response} response
 */
export const serverDelay = (core, response) => core.serverDelay(retryHeaders(response), Date.now());

/**
 * The `init` of one try: the app's headers plus the key and the token (unless
 * the app sent its own `Authorization`).
 * @param {import("./request.js").Outgoing} request
 * @param {string} key
 * @param {string | undefined} token
 */
export function initFor(request, key, token) {
  const headers = new Headers();
  for (const [name, value] of request.headers) headers.append(name, value);
  headers.set("Idempotency-Key", key);
  if (token !== undefined && !header(request.headers, "authorization")) {
    headers.set("Authorization", `Bearer ${token}`);
  }
  /** @type {RequestInit} */
  const init = { method: request.method, headers };
  if (request.body != null) init.body = request.body;
  if (request.signal) init.signal = request.signal;
  return init;
}

/**
 * Where the gateway of `url` answers: the endpoint when `url` is under it, else `url`'s origin.
 * @param {string} url
 * @param {string | undefined} endpoint
 */
export function gateway(url, endpoint) {
  if (endpoint !== undefined && url.startsWith(`${endpoint}/`)) return endpoint;
  return new URL(url).origin;
}

/**
 * A `202` for a background job (`Prefer: respond-async`).
 * @param {Response} response
 */
export const isAcceptedJob = (response) =>
  response.status === 202 && (response.headers.get("Preference-Applied") ?? "").includes("respond-async");

/**
 * Whether `response` is a streamed answer worth resuming.
 * @param {Response} response
 */
export const isEventStream = (response) =>
  response.status === 200 && response.body !== null && (response.headers.get("content-type") ?? "").startsWith("text/event-stream");

/**
 * One fetch: `{ response }`, or `{ failure }` for a request that failed on
 * the way; rejects with the caller's abort reason when it aborted.
 * @param {string} url
 * @param {RequestInit} init
 * @param {AbortSignal | undefined} signal
 * @returns {Promise<{ response: Response, failure?: undefined } | { response?: undefined, failure: unknown }>}
 */
export async function tryOnce(url, init, signal) {
  try {
    return { response: await globalThis.fetch(url, init) };
  } catch (failure) {
    if (signal?.aborted) throw signal.reason;
    return { failure };
  }
}

/**
 * Cancels a response's body nobody will read, so its connection is freed. A
 * failed cancel is of no interest, but must not go unhandled (Node ends the
 * process on an unhandled rejection).
 * @param {Response} response
 */
export function discardBody(response) {
  response.body?.cancel().catch(() => {});
}
