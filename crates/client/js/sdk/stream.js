// A streamed answer (`text/event-stream`) whose body survives a dropped
// connection. The engine's EventSplitter cuts whole SSE events, byte for byte.
import { discardBody } from "./http.js";

/** @typedef {import("../onejob.js").EventSplitter} EventSplitter */

/**
 * `response` with a body that resumes itself: the caller gets whole SSE
 * events only, counted; when reading fails, `reopen(delivered, error, stop)`
 * asks for the events after those (`…/stream?from=N`) and the same body goes
 * on. A clean end is the end: the gateway itself ends an interrupted stream
 * with an error event. `read()` is called once the whole answer is here;
 * `signal` is the send's; `stop` aborts when the caller cancels the body.
 * @param {typeof import("../onejob.js").EventSplitter} EventSplitter
 * @param {Response} response a 200 with a body (isEventStream)
 * @param {{
 *   reopen: (delivered: number, error: unknown, stop: AbortSignal) => Promise<Response>,
 *   read: () => void,
 *   signal: AbortSignal | undefined,
 * }} how
 * @returns {Response}
 */
export function resumable(EventSplitter, response, { reopen, read, signal }) {
  // A 200's body (what isEventStream checked; reopen answers a 200 too).
  let reader = /** @type {ReadableStream<Uint8Array>} */ (response.body).getReader();
  /**
   * Cuts the events. Undefined once released, which is typed away: that
   * happens when the body ends, fails or is cancelled, and no pull reads it
   * after (each checks `cancelled` after every await).
   * @type {EventSplitter}
   */
  let splitter = new EventSplitter();
  let delivered = 0;
  let cancelled = false;
  const stop = new AbortController();
  /** The splitter's wasm memory goes back at once when the body is done with. */
  const release = () => {
    splitter?.free();
    splitter = /** @type {never} */ (undefined);
  };
  const body = new ReadableStream({
    async pull(controller) {
      for (;;) {
        let chunk;
        try {
          chunk = await reader.read();
        } catch (error) {
          if (cancelled) return;
          let next;
          try {
            if (signal?.aborted) throw signal.reason;
            next = await reopen(delivered, error, stop.signal);
          } catch (failure) {
            if (cancelled) return;
            release();
            throw failure;
          }
          if (cancelled) return discardBody(next);
          reader = /** @type {ReadableStream<Uint8Array>} */ (next.body).getReader();
          // The partial event is sent again, whole, by the new stream.
          splitter.free();
          splitter = new EventSplitter();
          continue;
        }
        if (cancelled) return;
        if (chunk.done) {
          // Whatever follows the last blank line, as it came.
          const rest = splitter.rest();
          release();
          if (rest.length) controller.enqueue(rest);
          controller.close();
          read();
          return;
        }
        const events = splitter.push(chunk.value);
        if (splitter.events > 0) {
          delivered += splitter.events;
          // The whole answer is here (SDKs often cancel the body right after).
          if (splitter.ended) read();
          controller.enqueue(events);
          return;
        }
      }
    },
    cancel(reason) {
      cancelled = true;
      stop.abort(reason);
      release();
      return reader.cancel(reason).catch(() => {});
    },
  });
  return new Response(body, { status: response.status, statusText: response.statusText, headers: response.headers });
}
