// Waiting: timers, and the network coming back.

/** Sleeps `ms`, or rejects with the signal's reason as soon as it aborts. */
export function sleep(ms, signal) {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const timer = setTimeout(resolve, ms);
    signal?.addEventListener(
      "abort",
      () => {
        clearTimeout(timer);
        reject(signal.reason);
      },
      { once: true },
    );
  });
}

/** Whether the host says it is offline (`navigator.onLine === false`); hosts without the flag never are. */
export const offline = () => globalThis.navigator?.onLine === false;

/**
 * Resolves at the host's next `online` event or after `ms`, whichever is
 * first; rejects with the signal's reason as soon as it aborts.
 */
export function online(ms, signal) {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    globalThis.addEventListener?.("online", resolve, { once: true });
    setTimeout(resolve, ms);
    signal?.addEventListener("abort", () => reject(signal.reason), { once: true });
  });
}
