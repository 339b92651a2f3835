// A streamed answer whose body failed, asked for again from where it broke.
import { named } from "./errors.js";
import { discardBody, tryOnce } from "./http.js";
import { step } from "./step.js";

/**
 * Asks for the events after those delivered (`url`) with the usual backoff
 * and attempt limits, until the gateway answers `200` (or the rules say stop).
 * @param {import("./send.js").Sending} sending
 * @param {import("./step.js").Whose} whose the signal: the send's or the body's cancel
 * @param {string} url
 * @param {RequestInit} init
 * @param {unknown} lastError why the read failed
 * @returns {Promise<Response>}
 */
export async function reopenStream(sending, whose, url, init, lastError) {
  const attempts = sending.core().attempts();
  /** @type {Response | undefined} */
  let response;
  // The read that failed counts as the first try.
  let sent = 1;
  try {
    for (;;) {
      const [next, why] = await step(sending, attempts, response, sent, whose, "stream interrupted: ");
      if (next < 0) {
        if (response) discardBody(response);
        sending.events.emit("gave_up", whose.intent, whose.key, { reason: why, status: response?.status ?? 0 });
        throw named("OneJobNetworkError", `onejob: ${why}; could not resume it after ${sent} tries`, lastError);
      }
      sent += 1;
      const outcome = await tryOnce(url, init, whose.signal);
      response = outcome.response;
      if (response?.status === 200) return response;
      lastError = outcome.failure;
    }
  } finally {
    attempts.free();
  }
}
