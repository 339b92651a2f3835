// A streamed answer (`text/event-stream`) whose body survives a dropped
// connection. The engine's EventSplitter cuts whole SSE events, byte for byte.
import { discardBody } from "./http.js";

/**
 * `response` with a body that resumes itself: the caller gets whole SSE
 * events only, counted; when reading fails, the events after those are asked
 * for (`…/stream?from=N`) and the same body goes on. A clean end is the end:
 * the gateway itself ends an interrupted stream with an error event.
 */
export function resumable(EventSplitter, response, { reopen, read, signal }) {
  let reader = response.body.getReader();
  let splitter = new EventSplitter();
  let delivered = 0;
  let cancelled = false;
  const body = new ReadableStream({
    async pull(controller) {
      for (;;) {
        let chunk;
        try {
          chunk = await reader.read();
        } catch (error) {
          if (signal?.aborted) throw signal.reason;
          if (cancelled) return;
          const next = await reopen(delivered, error);
          if (cancelled) return discardBody(next);
          reader = next.body.getReader();
          // The partial event is sent again, whole, by the new stream.
          splitter.free();
          splitter = new EventSplitter();
          continue;
        }
        if (chunk.done) {
          // Whatever follows the last blank line, as it came.
          const rest = splitter.rest();
          splitter.free();
          if (rest.length && !cancelled) controller.enqueue(rest);
          try {
            controller.close();
          } catch {
            // Already closed by a cancel.
          }
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
      return reader.cancel(reason);
    },
  });
  return new Response(body, { status: response.status, statusText: response.statusText, headers: response.headers });
}
