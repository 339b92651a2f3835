// A proxy in front of the gateway that can cut a streamed response in the
// middle of an event, the way a dropped connection does: for the tests of
// the SDK's resumable streams (in Node and in a cross-origin page). It can
// also swallow a whole response, for the tests of the SDK's retries.
import http from "node:http";

/** The end of the `n`-th complete event in `text` (just past its blank line), or -1. */
function eventEnd(text, n) {
  let at = 0;
  for (let i = 0; i < n; i++) {
    const end = text.indexOf("\n\n", at);
    if (end < 0) return -1;
    at = end + 2;
  }
  return at;
}

/**
 * Forwards every request to the gateway, streaming responses as they come.
 * `cutNextStream(k)`: the next text/event-stream response is cut after `k`
 * complete events and half of the next one (the socket is destroyed).
 * `dropNextResponse()`: the next response is read to its end from the
 * gateway (the work is done) and never delivered (the socket is destroyed).
 * `seen` lists each request's method, path, Idempotency-Key and headers.
 */
export async function startCuttingProxy(target) {
  const seen = [];
  let cutAfter = null;
  let cuts = 0;
  let dropNext = false;
  let drops = 0;
  const server = http.createServer((req, res) => {
    seen.push({ method: req.method, path: req.url, key: req.headers["idempotency-key"], headers: { ...req.headers } });
    const forward = http.request(`${target}${req.url}`, { method: req.method, headers: req.headers }, (up) => {
      if (dropNext) {
        dropNext = false;
        up.resume();
        up.on("end", () => {
          drops++;
          res.socket.destroy();
        });
        return;
      }
      res.writeHead(up.statusCode, up.headers);
      res.flushHeaders();
      const cut = /^text\/event-stream/.test(up.headers["content-type"] ?? "") && cutAfter !== null ? cutAfter : null;
      if (cut !== null) cutAfter = null;
      let text = "";
      let written = 0;
      up.on("data", (chunk) => {
        if (cut === null) return res.write(chunk);
        if (written < 0) return; // already cut
        text += chunk.toString("latin1");
        const whole = eventEnd(text, cut);
        const next = whole < 0 ? -1 : eventEnd(text, cut + 1);
        if (next < 0) return; // wait until the event after the cut has arrived
        const stop = whole + Math.floor((next - whole) / 2);
        res.write(Buffer.from(text.slice(written, stop), "latin1"), () => {
          cuts++;
          res.socket.destroy();
          up.destroy();
        });
        written = -1;
      });
      up.on("end", () => written >= 0 && res.end());
      up.on("error", () => res.socket?.destroy());
    });
    forward.on("error", () => res.socket?.destroy());
    req.pipe(forward);
  });
  await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    url: `http://127.0.0.1:${server.address().port}`,
    seen,
    get cuts() {
      return cuts;
    },
    get drops() {
      return drops;
    },
    dropNextResponse() {
      dropNext = true;
    },
    cutNextStream(k) {
      cutAfter = k;
    },
    close: () => {
      server.closeAllConnections();
      return new Promise((resolve) => server.close(resolve));
    },
  };
}
