// One turn of a retry loop (a send's, a stream's reopening, a background
// job's polls): core decides from the last try's answer, the shell waits.
import { discardBody, retryHeaders } from "./http.js";
import { sleep } from "./wait.js";

/** @typedef {import("../onejob.js").Attempts} Attempts */
/** @typedef {import("./send.js").Sending} Sending */
/**
 * Whose tries these are (for the events) and the signal that ends a wait.
 * @typedef {{ intent: string, key: string, signal: AbortSignal | undefined }} Whose
 */

/** What `Engine.next` returns besides a delay: hand the answer over. */
export const DELIVER = -1;

/**
 * Core decides from the last try's answer (`response`; none when it failed
 * on the way) and the `sent` tries so far. Resolves to `[step, why]`: step
 * is DELIVER, another negative (stop: out of attempts or budget, or a final
 * answer), or a delay already waited out, the answer's body released first
 * (its connection freed) and a `backoff` event emitted. `why` is core's
 * reason, after `about`.
 * @param {Sending} sending
 * @param {Attempts} attempts
 * @param {Response | undefined} response
 * @param {number} sent
 * @param {Whose} whose
 * @param {string} [about]
 * @returns {Promise<[number, string]>}
 */
export async function step(sending, attempts, response, sent, whose, about = "") {
  const status = response?.status ?? 0;
  const next = sending.core().next(attempts, status, retryHeaders(response), Date.now(), sent < sending.retry.maxAttempts);
  const why = about + attempts.reason;
  if (next >= 0) {
    if (response) discardBody(response);
    await backOff(sending, whose, next, why, attempts.serverAsked);
  }
  return [next, why];
}

/**
 * Says why and how long it waits (a `backoff` event), then waits; the caller's signal ends the wait at once.
 * @param {Sending} sending
 * @param {Whose} whose
 * @param {number} delayMs
 * @param {string} reason
 * @param {boolean} serverAsked
 */
export function backOff(sending, { intent, key, signal }, delayMs, reason, serverAsked) {
  sending.events.emit("backoff", intent, key, { delayMs, reason, serverAsked });
  return sleep(delayMs, signal);
}
