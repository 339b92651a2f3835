// One intent's send: it tries, tells the answer apart (kindOf), and core
// decides after each answer whether to deliver it, wait and try again, or
// give up. The record is saved before every try, so a reload finds it.
// (A function, not a class: its state is a few locals, and the bundle
// mangles locals but not a class's fields.)
import { named } from "./errors.js";
import { followJob } from "./follow.js";
import { discardBody, gateway, initFor, isAcceptedJob, isEventStream, serverDelay, tryOnce } from "./http.js";
import { reopenStream } from "./reopen.js";
import { DELIVER, step } from "./step.js";
import { resumable } from "./stream.js";
import { anyOf, offline, online } from "./wait.js";

/** @typedef {import("../onejob.js").Engine} Engine */
/** @typedef {import("../onejob.js").Intent} Intent */
/** @typedef {import("./request.js").Outgoing} Outgoing */
/** @typedef {import("./step.js").Whose} Whose */

/**
 * What every send of one client shares (the client makes it once).
 * @typedef {object} Sending
 * @property {() => Engine} core the client's engine (retry policy and budget)
 * @property {ReturnType<typeof import("./options.js").readOptions>["retry"]} retry the retry options
 * @property {import("./events.js").Events} events
 * @property {import("./store.js").IntentStore} store
 * @property {string | undefined} endpoint
 * @property {string | undefined} token
 * @property {typeof import("../onejob.js").EventSplitter} EventSplitter
 */

/** A try that got no answer: the request failed on the way. */
const LOST = 0;
/** A `202` for a background job: followed to its end, then asked for again. */
const ACCEPTED = 1;
/** Any other answer: core judges it. */
const ANSWER = 2;

/**
 * What a try came back with, as the send tells it apart.
 * @param {Response | undefined} response
 */
export const kindOf = (response) => (!response ? LOST : isAcceptedJob(response) ? ACCEPTED : ANSWER);

/**
 * The retry loop of one intent: resolves to the answer to hand out, or
 * rejects. `request` carries the send's own signal; `stored`: whether the
 * store already holds the record.
 * @param {Sending} sending
 * @param {Intent} record
 * @param {Outgoing} request
 * @param {boolean} stored
 * @returns {Promise<Response>}
 */
export async function send(sending, record, request, stored) {
  const [intent, key, signal] = [record.id, record.key, request.signal];
  /** @type {Whose} */
  const whose = { intent, key, signal };
  const { events, store, retry } = sending;
  let attempts;
  /** Tries counted so far (one lost while offline is not). */
  let sent = 0;
  /** Background jobs accepted (202) so far: each is followed to its end, then asked for again. */
  let accepted = 0;
  let lastNetworkError;
  // While the browser says it is offline, the send waits for `online`
  // instead of spending attempts; all such waits share one deadline.
  const offlineDeadline = Date.now() + retry.offlineWaitMs;
  /**
   * Persists the record's JSON; a full store or quota becomes a warning. The
   * first save makes room for a record the store lacks; later ones overwrite it.
   * @param {string} text
   */
  const save = (text) => {
    try {
      for (const d of store.save(intent, text, !stored)) events.warning(d.intent, d.reason);
    } catch (reason) {
      events.warning(intent, `intent not persisted: ${reason}`);
    }
    stored = true;
  };
  /**
   * The record says so (resume() can ask again with the same key), a
   * `gave_up` event, and the error to throw.
   * @param {string} why
   * @param {number} status
   * @param {unknown} [cause]
   */
  const giveUp = (why, status, cause) => {
    save(record.giveUp(Date.now()));
    events.emit("gave_up", intent, key, { reason: why, status });
    return named("OneJobNetworkError", `onejob: gave up after ${sent} attempts: ${why}; resume() can ask again with the same key`, cause);
  };
  try {
    attempts = sending.core().attempts();
    for (;;) {
      // Online (the usual case), nothing is awaited before the fetch.
      if (offline()) await waitWhileOffline(sending, whose, offlineDeadline, () => save(record.json()));
      save(record.attempt(Date.now()));
      sent += 1;
      events.emit("attempt", intent, key, { attempt: record.attempts });
      // An abort during the fetch leaves the record as saved just above
      // (or forgotten meanwhile): the request may have reached the gateway.
      const { response, failure } = await tryOnce(request.url, initFor(request, key, sending.token), signal);
      const kind = kindOf(response);
      if (kind === ACCEPTED) {
        // Followed until it has finished, then asked for again with the same
        // key, which replays its result. (A job whose end cannot be read, its
        // view refused say, would otherwise be followed forever.)
        discardBody(/** @type {Response} */ (response));
        accepted += 1;
        if (accepted > retry.maxAttempts) throw giveUp("a background job was accepted, but its end could not be read", 202);
        await followJob(sending, request, whose, serverDelay(sending.core(), /** @type {Response} */ (response)));
        continue;
      }
      if (kind === LOST) {
        // The network went away under the request: the try is not counted,
        // the same key goes again once back online.
        if (offline() && Date.now() < offlineDeadline) {
          sent -= 1;
          continue;
        }
        // Lost before or after reaching the gateway: with the same key a
        // resend is safe either way.
        lastNetworkError = failure;
      } else if (response?.headers.get("Idempotent-Replayed") === "true") {
        events.emit("replayed", intent, key, { status: response.status });
      }
      const [next, why] = await step(sending, attempts, response, sent, whose);
      if (next === DELIVER && response) return deliver(sending, whose, request, response);
      if (next >= 0) continue;
      // Out of attempts or budget (a final answer always has a response).
      const gaveUp = giveUp(why, response?.status ?? 0, lastNetworkError);
      if (response) return response;
      throw gaveUp;
    }
  } finally {
    attempts?.free();
    record.free();
  }
}

/**
 * Hands the answer over. Delivered, nothing is left to remember: the next
 * identical submission is a new intent with a new key. A stream is delivered
 * once it has been read to its end: until then a reload's resume() sends it
 * again with the same key, and a broken read asks for the rest.
 * @param {Sending} sending
 * @param {Whose} whose
 * @param {Outgoing} request
 * @param {Response} response
 */
function deliver(sending, { intent, key, signal }, request, response) {
  sending.events.emit("settled", intent, key, { status: response.status });
  if (!isEventStream(response)) {
    sending.store.discard(intent);
    return response;
  }
  const url = `${gateway(request.url, sending.endpoint)}/onejob/v1/jobs/${key}/stream?from=`;
  const init = initFor({ ...request, method: "GET", body: null }, key, sending.token);
  return resumable(sending.EventSplitter, response, {
    reopen: (from, error, stop) => {
      const either = anyOf(signal, stop);
      return reopenStream(sending, { intent, key, signal: either }, url + from, { ...init, signal: either }, error);
    },
    read: () => sending.store.discard(intent),
    signal,
  });
}

/**
 * Waits while the browser reports offline for its `online` event, until
 * `deadline` at most; the caller's signal ends the wait at once. Calls
 * `save` before it waits: a reload meanwhile finds the intent.
 * @param {Sending} sending
 * @param {Whose} whose
 * @param {number} deadline
 * @param {() => void} save
 */
async function waitWhileOffline(sending, { intent, key, signal }, deadline, save) {
  const started = Date.now();
  if (!offline() || started >= deadline) return;
  save();
  sending.events.emit("offline", intent, key, {});
  while (offline() && Date.now() < deadline) await online(deadline - Date.now(), signal);
  sending.events.emit("online", intent, key, { waitedMs: Date.now() - started });
}
