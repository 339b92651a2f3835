// A fake OpenTelemetry collector over real HTTP: it accepts OTLP/HTTP JSON
// exports (`POST /v1/traces`), counts and stores them, and can fail on
// purpose. The worker under test exports to it exactly as to a real one.
//
//   const otlp = await startFakeOtlp();          // otlp.endpoint: for OTEL_EXPORTER_OTLP_ENDPOINT
//   otlp.mode = "500" | "hang" | "ok";           // answer 500, never answer, or 200 (default)
//   otlp.exports                                 // [{ at, path, headers, raw, body }, …] every POST received
//   otlp.spans()                                 // every span received, flattened (see below)
//   await otlp.waitForSpans((spans) => …)        // until the predicate holds for spans()
//
// A flattened span: { traceId, spanId, parentSpanId, name, kind, start, end,
// status, attrs: { name: value } (intValue as a Number), resource: { … } }.
import http from "node:http";

export async function startFakeOtlp({ mode = "ok" } = {}) {
  const exports = [];
  const hanging = new Set();
  const state = { mode };
  const server = http.createServer(async (req, res) => {
    const chunks = [];
    for await (const chunk of req) chunks.push(chunk);
    const raw = Buffer.concat(chunks).toString("utf8");
    let body;
    try {
      body = JSON.parse(raw);
    } catch {}
    exports.push({ at: Date.now(), path: req.url, method: req.method, headers: req.headers, raw, body });
    if (state.mode === "hang") {
      hanging.add(res);
      return;
    }
    if (state.mode === "500") {
      res.writeHead(500, { "Content-Type": "application/json" }).end('{"error":"collector down"}');
      return;
    }
    res.writeHead(200, { "Content-Type": "application/json" }).end("{}");
  });
  await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
  const endpoint = `http://127.0.0.1:${server.address().port}`;
  const collector = {
    endpoint,
    exports,
    get mode() {
      return state.mode;
    },
    set mode(value) {
      state.mode = value;
    },
    /** Every span of every export, flattened. */
    spans() {
      return exports.flatMap(({ body }) => flatten(body));
    },
    /** Waits until `until(spans())` holds (fails after `timeoutMs` with what came). */
    async waitForSpans(until, { timeoutMs = 10_000, what = "spans" } = {}) {
      const deadline = Date.now() + timeoutMs;
      for (;;) {
        const spans = collector.spans();
        if (until(spans)) return spans;
        if (Date.now() > deadline) {
          throw new Error(`${what}: not within ${timeoutMs} ms; received ${JSON.stringify(spans.map((s) => [s.name, s.attrs["onejob.key.digest"]]))}`);
        }
        await new Promise((r) => setTimeout(r, 100));
      }
    },
    reset() {
      exports.length = 0;
    },
    async close() {
      for (const res of hanging) res.destroy();
      server.closeAllConnections?.();
      await new Promise((resolve) => server.close(resolve));
    },
  };
  return collector;
}

const valueOf = (v) => {
  if (v === undefined || v === null) return undefined;
  if ("stringValue" in v) return v.stringValue;
  if ("intValue" in v) return Number(v.intValue);
  if ("boolValue" in v) return v.boolValue;
  if ("doubleValue" in v) return v.doubleValue;
  return v;
};

const attrsOf = (list = []) => Object.fromEntries(list.map(({ key, value }) => [key, valueOf(value)]));

function flatten(body) {
  if (!body?.resourceSpans) return [];
  return body.resourceSpans.flatMap((rs) =>
    (rs.scopeSpans ?? []).flatMap((ss) =>
      (ss.spans ?? []).map((s) => ({
        traceId: s.traceId,
        spanId: s.spanId,
        parentSpanId: s.parentSpanId,
        traceState: s.traceState,
        name: s.name,
        kind: s.kind,
        start: BigInt(s.startTimeUnixNano),
        end: BigInt(s.endTimeUnixNano),
        status: s.status,
        attrs: attrsOf(s.attributes),
        resource: attrsOf(rs.resource?.attributes),
        scope: ss.scope,
      })),
    ),
  );
}
