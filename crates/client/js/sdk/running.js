import { discardBody } from "./http.js";

/**
 * A caller waiting for the send's result; `forget` removes its abort listener.
 * @typedef {{ resolve: (response: Response) => void, reject: (reason: unknown) => void, forget?: () => void }} Waiter
 */

/**
 * One send shared by every submission of an intent (double clicks join the
 * request already running). Each caller may abort its own wait at once; the
 * network request and any backoff stop only when every caller that could
 * abort has, so one impatient caller cannot cancel another's result.
 *
 * The result goes to the callers still waiting: every one but the last gets a
 * clone of the response, the last gets the response itself. So each body is
 * read or cancelled by its own caller alone. (Keeping the original unread and
 * handing out clones made `body.cancel()` wait forever: by the Streams rules a
 * cancelled clone waits for its unread sibling, and the `openai` package
 * cancels a body before each of its retries.)
 */
export class Running {
  /** @param {AbortController} controller */
  constructor(controller) {
    this.controller = controller;
    /**
     * Callers waiting, in the order they joined: `{ resolve, reject }`.
     * @type {Waiter[]}
     */
    this.waiting = [];
    /** Callers with a signal that has not aborted. */
    this.abortable = 0;
    /** A caller without a signal joined: the send can no longer be aborted. */
    this.pinned = false;
  }

  /**
   * A caller's view of the send: its response, or the caller's own abort reason as soon as its `signal` aborts.
   * @param {AbortSignal | undefined} signal
   * @returns {Promise<Response>}
   */
  join(signal) {
    if (!signal) {
      this.pinned = true;
      return this.#wait();
    }
    this.abortable += 1;
    // Callers check their signal first, but an `onEvent` handler run on the
    // way (an `offline` or `warning` event) may have aborted it since.
    if (signal.aborted) {
      this.#release(signal.reason);
      return Promise.reject(signal.reason);
    }
    // Set by #wait at once (a promise's executor runs synchronously).
    /** @type {Waiter} */
    let entry = /** @type {never} */ (undefined);
    const promise = this.#wait((e) => (entry = e));
    const aborted = () => {
      const at = this.waiting.indexOf(entry);
      if (at >= 0) {
        this.waiting.splice(at, 1);
        entry.reject(signal.reason);
      }
      this.#release(signal.reason);
    };
    signal.addEventListener("abort", aborted, { once: true });
    // A caller that got an error has nothing left to abort. (One that got a
    // response keeps its listener: aborting then still stops the body, as
    // with fetch.)
    entry.forget = () => signal.removeEventListener("abort", aborted);
    return promise;
  }

  /**
   * Hands the send's result to every caller still waiting; with nobody left,
   * the body is cancelled so the connection is freed. Called once, by the
   * send itself, in the same step that unregisters it.
   * @param {{ response: Response, error?: undefined } | { response?: undefined, error: unknown }} result
   */
  settle({ response, error }) {
    const waiting = this.waiting;
    this.waiting = [];
    if (!response) {
      for (const { reject, forget } of waiting) {
        forget?.();
        reject(error);
      }
      return;
    }
    const last = waiting.pop();
    if (!last) {
      // Everyone aborted, which usually errors the body already.
      discardBody(response);
      return;
    }
    // Clone before the original changes hands: a read body cannot be cloned.
    for (const { resolve, reject } of waiting) {
      try {
        resolve(response.clone());
      } catch (error) {
        reject(error);
      }
    }
    last.resolve(response);
  }

  /**
   * @param {(entry: Waiter) => void} [register]
   * @returns {Promise<Response>}
   */
  #wait(register) {
    return new Promise((resolve, reject) => {
      const entry = { resolve, reject };
      this.waiting.push(entry);
      register?.(entry);
    });
  }

  /**
   * One caller stopped waiting; abort the send when nobody who could is left.
   * Called at most once per signalled `join` (the listener is `once`), after
   * its count went up: the count never goes below 0.
   * @param {unknown} reason
   */
  #release(reason) {
    this.abortable -= 1;
    if (this.abortable === 0 && !this.pinned) this.controller.abort(reason);
  }
}
