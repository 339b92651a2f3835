// Waiting: timers, signals, and the network coming back. Every wait removes
// its listeners and timers when it ends, so long-lived signals (a page-wide
// one, or a send polling a background job) do not collect them.

/** The longest timer hosts keep (2^31 − 1 ms); a longer `setTimeout` fires at once. */
export const MAX_TIMER_MS = 2_147_483_647;

/**
 * Resolves when `ms` have passed, or when `also(resolve)` calls back; rejects
 * with the signal's reason as soon as it aborts. `also` returns its own clean-up.
 * @param {number} ms
 * @param {AbortSignal | undefined} signal
 * @param {(done: () => void) => () => void} also
 * @returns {Promise<void>}
 */
function waitFor(ms, signal, also = () => () => {}) {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    let undo = () => {};
    /** @type {(settle: (value?: any) => void) => (value?: unknown) => void} */
    const end = (settle) => (value) => {
      clearTimeout(timer);
      signal?.removeEventListener("abort", aborted);
      undo();
      settle(value);
    };
    // Listened for only on a signal.
    const aborted = () => end(reject)(/** @type {AbortSignal} */ (signal).reason);
    const timer = setTimeout(end(resolve), Math.min(ms, MAX_TIMER_MS));
    signal?.addEventListener("abort", aborted, { once: true });
    undo = also(end(resolve));
  });
}

/**
 * Sleeps `ms`, or rejects with the signal's reason as soon as it aborts.
 * @param {number} ms
 * @param {AbortSignal | undefined} signal
 */
export const sleep = (ms, signal) => waitFor(ms, signal);

/** Whether the host says it is offline (`navigator.onLine === false`); hosts without the flag never are. */
export const offline = () => globalThis.navigator?.onLine === false;

/**
 * Resolves at the host's next `online` event or after `ms`, whichever is
 * first; rejects with the signal's reason as soon as it aborts.
 * @param {number} ms
 * @param {AbortSignal | undefined} signal
 */
export const online = (ms, signal) =>
  waitFor(ms, signal, (done) => {
    globalThis.addEventListener?.("online", done, { once: true });
    return () => globalThis.removeEventListener?.("online", done);
  });

/**
 * A signal that aborts when either does (`AbortSignal.any`, where the host has it).
 * @param {AbortSignal | undefined} a
 * @param {AbortSignal} b
 */
export function anyOf(a, b) {
  if (!a) return b;
  if (typeof AbortSignal.any === "function") return AbortSignal.any([a, b]);
  const either = new AbortController();
  for (const signal of [a, b]) {
    if (signal.aborted) either.abort(signal.reason);
    else signal.addEventListener("abort", () => either.abort(signal.reason), { once: true });
  }
  return either.signal;
}
