// A background job (`Prefer: respond-async`), followed to its end.
import { discardBody, gateway, initFor, serverDelay, tryOnce } from "./http.js";
import { FINISHED } from "./states.js";
import { backOff } from "./step.js";

/**
 * Polls a background job (`GET /onejob/v1/jobs/{key}`) until it has
 * finished: each wait is the job's `Retry-After`, or full-jitter backoff
 * when it gives none or cannot be reached. Polls are not attempts: the job
 * runs in the gateway's queue.
 * @param {import("./send.js").Sending} sending
 * @param {import("./request.js").Outgoing} request the request that was accepted
 * @param {import("./step.js").Whose} whose
 * @param {number} accepted the 202's own wait (`Retry-After`), or -1
 */
export async function followJob(sending, request, whose, accepted) {
  const why = "background job queued or running";
  const url = `${gateway(request.url, sending.endpoint)}/onejob/v1/jobs/${whose.key}`;
  const init = initFor({ ...request, method: "GET", body: null }, whose.key, sending.token);
  let asked = accepted;
  for (let polls = 1; ; polls++) {
    const core = sending.core();
    const delay = asked >= 0 ? asked : core.jitter(polls);
    await backOff(sending, whose, delay, why, asked >= 0);
    const { response } = await tryOnce(url, init, whose.signal);
    if (!response) {
      asked = -1;
    } else if (response.ok) {
      asked = serverDelay(core, response);
      const view = await response.json();
      // Finished, or waiting for an operator (nothing will run it again):
      // asking again gives its answer.
      if (FINISHED.includes(view?.state) || view?.waiting_for_operator === true) return;
    } else if (response.status >= 400 && response.status < 500) {
      // Gone (past retention) or refused: asking again decides.
      discardBody(response);
      return;
    } else {
      asked = serverDelay(core, response);
      discardBody(response);
    }
  }
}
