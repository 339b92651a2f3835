// OpenTelemetry traces and structured log lines (issue 21): against a fake
// OTLP collector over real HTTP (tests/support/fake-otlp.mjs), the worker
// exports one SERVER span per job request (replayed or not) and a CLIENT
// span per attempt, with the GenAI semantic conventions' attribute names;
// a caller's traceparent is honoured, passed upstream and returned; a
// collector that is down, hanging or failing never changes an answer; no
// key or body leaves in any exported byte. And one JSON log line per job
// transition and per attempt in the worker's output.
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { after, before, describe, test } from "node:test";

import { DEV_KEY, chat, contentFault, freePort, newKey, sleep, startStack, triageInput } from "../support/harness.mjs";

const PRIMARY_SECRET = "sk-primary-telemetry-secret";
const SERVER = 2;
const CLIENT = 3;

const hex = (bytes) => randomBytes(bytes).toString("hex");
/** A caller's traceparent: a fresh trace and span, sampled. */
const callerTrace = () => ({ traceId: hex(16), spanId: hex(8) });
const traceparentOf = ({ traceId, spanId }) => `00-${traceId}-${spanId}-01`;
const parseTraceparent = (header) => {
  const match = /^00-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$/.exec(header ?? "");
  assert.ok(match, `a traceparent: ${header}`);
  return { traceId: match[1], spanId: match[2], flags: match[3] };
};

/** The spans of trace `traceId` once `count` have arrived (and a little more, to catch extras). */
async function traceOf(otlp, traceId, count) {
  await otlp.waitForSpans((spans) => spans.filter((s) => s.traceId === traceId).length >= count, { what: `${count} spans of ${traceId}` });
  await sleep(300);
  return otlp.spans().filter((s) => s.traceId === traceId);
}

/** Lines of the worker's output that are onejob JSON log lines of `kind`. */
function logLines(stack, kind) {
  return stack.worker
    .output()
    .split("\n")
    .map((line) => line.slice(line.indexOf("{")))
    .filter((line) => line.startsWith(`{"onejob":"${kind}"`))
    .map((line) => JSON.parse(line));
}

describe("OpenTelemetry traces of job requests", () => {
  let stack;
  let primary, backup;
  const post = (key, body, headers = {}) => stack.post(key, body, { headers });
  const keys = [];
  const prompts = [];
  const traced = (key, content, extra) => {
    keys.push(key);
    prompts.push(content);
    return chat(content, extra);
  };

  before(async () => {
    stack = await startStack({
      otlp: true,
      logLevel: "log",
      providers: [{ name: "primary", key: PRIMARY_SECRET }, { name: "backup" }],
      routes: {
        "gpt-test": { providers: [{ provider: "primary", model: "primary-model" }, { provider: "backup", model: "backup-model" }] },
        hedged: {
          providers: [{ provider: "primary", model: "primary-hedged" }, { provider: "backup", model: "backup-hedged" }],
          hedge_after_ms: 1000,
        },
      },
      vars: { BREAKER_FAILURES: "0", UPSTREAM_TIMEOUT_MS: "10000", OTEL_SERVICE_NAME: "onejob-test", JOB_LOGS: "json" },
    });
    ({ primary, backup } = stack.fakes);
  });
  after(async () => {
    await stack?.stop();
  });

  test("a first call: a SERVER span, its CLIENT attempt span, GenAI attributes; the traceparent comes back", async () => {
    const key = newKey();
    const { res, text } = await post(key, traced(key, `first call ${key}`));
    assert.equal(res.status, 200, text);
    const returned = parseTraceparent(res.headers.get("traceparent"));
    const spans = await traceOf(stack.otlp, returned.traceId, 2);
    assert.equal(spans.length, 2, JSON.stringify(spans.map((s) => s.name)));
    const server = spans.find((s) => s.kind === SERVER);
    const client = spans.find((s) => s.kind === CLIENT);
    assert.equal(server.spanId, returned.spanId, "the answer's traceparent names the request span");
    assert.equal(server.parentSpanId, undefined, "no caller trace: a root span");
    assert.equal(server.name, "POST /v1/chat/completions");
    assert.equal(server.resource["service.name"], "onejob-test");
    assert.equal(server.attrs["onejob.replayed"], false);
    assert.equal(server.attrs["onejob.job.state"], "completed");
    assert.equal(server.attrs["onejob.attempt"], 1);
    assert.equal(server.attrs["onejob.upstream_calls"], 1);
    assert.equal(server.attrs["http.response.status_code"], 200);
    assert.equal(server.attrs["gen_ai.operation.name"], "chat");
    assert.equal(server.attrs["gen_ai.request.model"], "gpt-test");
    assert.equal(server.attrs["gen_ai.response.model"], "primary-model");
    assert.match(server.attrs["onejob.key.digest"], /^[0-9a-f]{16}$/);
    assert.equal(client.parentSpanId, server.spanId);
    assert.equal(client.name, "chat primary-model");
    assert.equal(client.attrs["gen_ai.provider.name"], "openai");
    assert.equal(client.attrs["gen_ai.system"], "openai");
    assert.equal(client.attrs["gen_ai.request.model"], "primary-model");
    assert.equal(client.attrs["gen_ai.usage.input_tokens"], 10);
    assert.equal(client.attrs["gen_ai.usage.output_tokens"], 5);
    assert.equal(client.attrs["onejob.attempt"], 1);
    assert.equal(client.attrs["onejob.provider"], "primary");
    assert.equal(client.attrs["onejob.attempt.outcome"], "succeeded");
    assert.equal(client.attrs["http.response.status_code"], 200);
    assert.ok(client.start >= server.start && client.end <= server.end, "the attempt lies within the request");
    // The provider's call carried the attempt span as its parent.
    const upstream = primary.calls(key)[0].headers.traceparent;
    assert.deepEqual(parseTraceparent(upstream), { traceId: returned.traceId, spanId: client.spanId, flags: "01" });
  });

  test("a caller's traceparent and tracestate: the request span is its child, the provider sees the attempt's span", async () => {
    const key = newKey();
    const caller = callerTrace();
    const { res } = await post(key, traced(key, `caller trace ${key}`), {
      traceparent: traceparentOf(caller),
      tracestate: "vendor=abc,other=1",
    });
    assert.equal(res.status, 200);
    const returned = parseTraceparent(res.headers.get("traceparent"));
    assert.equal(returned.traceId, caller.traceId, "the caller's trace goes on");
    assert.notEqual(returned.spanId, caller.spanId);
    const spans = await traceOf(stack.otlp, caller.traceId, 2);
    const server = spans.find((s) => s.kind === SERVER);
    const client = spans.find((s) => s.kind === CLIENT);
    assert.equal(server.parentSpanId, caller.spanId);
    assert.equal(server.traceState, "vendor=abc,other=1");
    const call = primary.calls(key)[0];
    assert.equal(call.headers.traceparent, `00-${caller.traceId}-${client.spanId}-01`);
    assert.equal(call.headers.tracestate, "vendor=abc,other=1");
  });

  test("a replay: one SERVER span, onejob.replayed, no attempt span, no upstream call", async () => {
    const key = newKey();
    const body = traced(key, `replay ${key}`);
    const first = await post(key, body);
    assert.equal(first.res.status, 200);
    await sleep(500);
    const caller = callerTrace();
    const again = await post(key, body, { traceparent: traceparentOf(caller) });
    assert.equal(again.res.headers.get("idempotent-replayed"), "true");
    assert.equal(again.text, first.text);
    const spans = await traceOf(stack.otlp, caller.traceId, 1);
    assert.equal(spans.length, 1, JSON.stringify(spans.map((s) => s.name)));
    assert.equal(spans[0].attrs["onejob.replayed"], true);
    assert.ok(["ledger", "cache"].includes(spans[0].attrs["onejob.replay.source"]), spans[0].attrs["onejob.replay.source"]);
    assert.equal(spans[0].attrs["onejob.upstream_calls"], 0);
    assert.equal(spans[0].parentSpanId, caller.spanId);
    assert.equal(primary.calls(key).length, 1);
  });

  test("a coalesced duplicate (same key, concurrent): its own SERVER span, replayed, without attempt spans", async () => {
    const key = newKey();
    primary.script(key, ["delay:1500"]);
    const body = traced(key, `coalesced ${key}`);
    const [a, b] = [callerTrace(), callerTrace()];
    const [ra, rb] = await Promise.all([post(key, body, { traceparent: traceparentOf(a) }), (async () => {
      await sleep(300);
      return post(key, body, { traceparent: traceparentOf(b) });
    })()]);
    assert.equal(ra.res.status, 200);
    assert.equal(rb.text, ra.text);
    assert.equal(primary.calls(key).length, 1, "one upstream call");
    const ran = await traceOf(stack.otlp, a.traceId, 2);
    const waited = await traceOf(stack.otlp, b.traceId, 1);
    assert.equal(ran.length, 2);
    assert.equal(waited.length, 1, "the duplicate made no attempt");
    assert.equal(waited[0].attrs["onejob.replayed"], true);
    assert.equal(waited[0].attrs["onejob.replay.source"], "ledger");
    assert.equal(waited[0].attrs["onejob.key.digest"], ran[0].attrs["onejob.key.digest"], "one job, one digest");
  });

  test("a failover: two attempt spans under one request span, the first a 503 from primary, the second backup's 200", async () => {
    const key = newKey();
    primary.script(key, ["503"]);
    const caller = callerTrace();
    const { res } = await post(key, traced(key, `failover ${key}`), { traceparent: traceparentOf(caller) });
    assert.equal(res.status, 200);
    assert.equal(res.headers.get("onejob-attempt"), "2");
    const spans = await traceOf(stack.otlp, caller.traceId, 3);
    assert.equal(spans.length, 3);
    const server = spans.find((s) => s.kind === SERVER);
    const attempts = spans.filter((s) => s.kind === CLIENT).sort((x, y) => x.attrs["onejob.attempt"] - y.attrs["onejob.attempt"]);
    assert.deepEqual(attempts.map((s) => s.parentSpanId), [server.spanId, server.spanId]);
    assert.deepEqual(attempts.map((s) => s.attrs["onejob.provider"]), ["primary", "backup"]);
    assert.deepEqual(attempts.map((s) => s.attrs["http.response.status_code"]), [503, 200]);
    assert.equal(attempts[0].attrs["error.type"], "unavailable");
    assert.equal(attempts[0].attrs["onejob.attempt.outcome"], "failed");
    assert.equal(attempts[0].status.code, 2, "the failed attempt's status is ERROR");
    assert.equal(attempts[1].attrs["onejob.attempt.outcome"], "succeeded");
    assert.equal(server.attrs["onejob.upstream_calls"], 2);
    assert.equal(server.attrs["gen_ai.response.model"], "backup-model");
    // Each provider saw its own attempt's span.
    assert.equal(primary.calls(key)[0].headers.traceparent, `00-${caller.traceId}-${attempts[0].spanId}-01`);
    assert.equal(backup.calls(key)[0].headers.traceparent, `00-${caller.traceId}-${attempts[1].spanId}-01`);
  });

  test("a hedge: both racers are attempt spans; the loser says lost_race", async () => {
    const key = newKey();
    primary.script(key, ["delay:2500"]);
    backup.script(key, ["delay:300"]);
    const caller = callerTrace();
    const { res } = await post(key, traced(key, `hedge ${key}`, { model: "hedged" }), { traceparent: traceparentOf(caller) });
    assert.equal(res.status, 200);
    const spans = await traceOf(stack.otlp, caller.traceId, 3);
    const attempts = spans.filter((s) => s.kind === CLIENT);
    assert.equal(attempts.length, 2);
    const byProvider = Object.fromEntries(attempts.map((s) => [s.attrs["onejob.provider"], s]));
    assert.equal(byProvider.backup.attrs["onejob.attempt.outcome"], "succeeded");
    assert.equal(byProvider.primary.attrs["onejob.attempt.outcome"], "lost_race");
    assert.equal(byProvider.backup.attrs["gen_ai.request.model"], "backup-hedged");
  });

  test("log lines: one per transition and per attempt, with stable fields and no key", async () => {
    const key = newKey();
    primary.script(key, ["503"]);
    const caller = callerTrace();
    await post(key, traced(key, `logged ${key}`), { traceparent: traceparentOf(caller) });
    const spans = await traceOf(stack.otlp, caller.traceId, 3);
    const digest = spans[0].attrs["onejob.key.digest"];
    await sleep(500);
    const attempts = logLines(stack, "attempt").filter((l) => l.key_digest === digest);
    assert.equal(attempts.length, 2, JSON.stringify(attempts));
    assert.deepEqual(
      attempts.map(({ attempt, provider, model, status, outcome, error_class }) => ({ attempt, provider, model, status, outcome, error_class })),
      [
        { attempt: 1, provider: "primary", model: "primary-model", status: 503, outcome: "failed", error_class: "unavailable" },
        { attempt: 2, provider: "backup", model: "backup-model", status: 200, outcome: "succeeded", error_class: "none" },
      ],
    );
    for (const line of attempts) {
      assert.equal(line.tenant, "dev");
      assert.equal(typeof line.latency_ms, "number");
    }
    assert.equal(attempts[1].input_tokens, 10);
    const transitions = logLines(stack, "transition").filter((l) => l.key_digest === digest);
    // One line per change of state, each starting where the last ended.
    const path = transitions.map((l) => [l.from, l.to]);
    assert.deepEqual(path[0], ["new", "in_flight"], JSON.stringify(path));
    assert.equal(path.at(-1)[1], "completed", JSON.stringify(path));
    for (let i = 1; i < path.length; i++) assert.equal(path[i][0], path[i - 1][1], JSON.stringify(path));
    assert.ok(transitions.every((l) => l.tenant === "dev" && typeof l.version === "number" && typeof l.at_ms === "number"));
    const output = stack.worker.output();
    for (const secret of [...keys, DEV_KEY, PRIMARY_SECRET]) {
      const lines = output.split("\n").filter((l) => l.includes('{"onejob":'));
      assert.ok(!lines.some((l) => l.includes(secret)), `no ${secret} in a log line`);
    }
  });

  test("no key, tenant key, provider key or body in any exported byte", async () => {
    assert.ok(stack.otlp.exports.length > 0);
    for (const { raw, headers, path } of stack.otlp.exports) {
      assert.equal(path, "/v1/traces");
      assert.equal(headers["content-type"], "application/json");
      for (const secret of [...keys, DEV_KEY, PRIMARY_SECRET, ...prompts]) {
        assert.ok(!raw.includes(secret), `an export holds ${secret}`);
      }
    }
  });
});

describe("a collector that is slow, down or failing never changes an answer", () => {
  const ROUNDS = 8;
  let off, on, down;
  before(async () => {
    // At the log level that would show job log lines: JOB_LOGS is unset here.
    off = await startStack({ logLevel: "log" });
    on = await startStack({ otlp: true, vars: { OTEL_EXPORTER_OTLP_HEADERS: "x-api-key=collector%20secret" } });
    down = await startStack({ vars: { OTEL_EXPORTER_OTLP_ENDPOINT: `http://127.0.0.1:${await freePort()}` } });
  });
  after(async () => {
    await off?.stop();
    await on?.stop();
    await down?.stop();
  });

  /** ROUNDS first calls and their replays: statuses, bodies, median latency (ms). */
  async function rounds(stack, label) {
    const results = [];
    const times = [];
    for (let i = 0; i < ROUNDS; i++) {
      const key = newKey();
      const body = chat(`the same question ${i}`);
      const t0 = performance.now();
      const first = await stack.post(key, body);
      times.push(performance.now() - t0);
      const again = await stack.post(key, body);
      results.push([first.res.status, first.text, again.res.status, again.text === first.text]);
    }
    times.sort((a, b) => a - b);
    const median = times[Math.floor(times.length / 2)];
    console.log(`telemetry latency, ${label}: median ${median.toFixed(1)} ms, max ${times.at(-1).toFixed(1)} ms over ${ROUNDS} first calls`);
    return { results, median };
  }

  test("collector off, ok, answering 500, hanging, down: the same statuses and bodies (latency printed)", async () => {
    const baseline = await rounds(off, "telemetry off");
    on.otlp.mode = "ok";
    const ok = await rounds(on, "collector ok");
    assert.deepEqual(ok.results, baseline.results);
    assert.ok(on.otlp.exports.length > 0, "spans were exported");
    assert.equal(on.otlp.exports[0].headers["x-api-key"], "collector secret", "OTEL_EXPORTER_OTLP_HEADERS, percent-decoded");
    on.otlp.mode = "500";
    const failing = await rounds(on, "collector answering 500");
    assert.deepEqual(failing.results, baseline.results);
    on.otlp.mode = "hang";
    const before = on.otlp.exports.length;
    const hanging = await rounds(on, "collector hanging");
    assert.deepEqual(hanging.results, baseline.results);
    assert.ok(on.otlp.exports.length > before, "the exports reached the hanging collector");
    const closed = await rounds(down, "collector down (closed port)");
    assert.deepEqual(closed.results, baseline.results);
  });

  test("with telemetry off, no traceparent comes back and the provider gets none", async () => {
    const key = newKey();
    const { res } = await off.post(key, chat(`untraced ${key}`), { headers: { traceparent: traceparentOf(callerTrace()) } });
    assert.equal(res.status, 200);
    assert.equal(res.headers.get("traceparent"), null);
    assert.equal(off.llm.calls(key)[0].headers.traceparent, undefined);
  });

  test("without JOB_LOGS, no job log line is printed (they are off by default)", async () => {
    const key = newKey();
    assert.equal((await off.post(key, chat(`unlogged ${key}`))).res.status, 200);
    await sleep(500);
    const lines = off.worker.output().split("\n").filter((l) => l.includes('{"onejob":'));
    assert.deepEqual(lines, []);
  });
});

describe("traces of streamed answers and of job types' effects", () => {
  let stack;
  before(async () => {
    stack = await startStack({ otlp: true, mail: true });
    stack.llm.scriptAll([`${contentFault({ category: "billing", priority: "high", summary: "Charged twice." })}*`]);
  });
  after(async () => {
    await stack?.stop();
  });

  test("a streamed answer: the attempt span is exported once the stream has ended, with its outcome", async () => {
    const key = newKey();
    stack.llm.script(key, ["sse:3:100"]);
    const caller = callerTrace();
    const res = await fetch(`${stack.url}/v1/chat/completions`, {
      method: "POST",
      headers: { Authorization: `Bearer ${DEV_KEY}`, "Content-Type": "application/json", "Idempotency-Key": key, traceparent: traceparentOf(caller) },
      body: JSON.stringify(chat(`stream ${key}`, { stream: true })),
    });
    assert.equal(res.status, 200);
    assert.equal(parseTraceparent(res.headers.get("traceparent")).traceId, caller.traceId);
    const text = await res.text();
    assert.match(text, /\[DONE\]/);
    const spans = await traceOf(stack.otlp, caller.traceId, 2);
    const client = spans.find((s) => s.kind === CLIENT);
    assert.equal(client.attrs["onejob.streamed"], true);
    assert.equal(client.attrs["onejob.attempt.outcome"], "succeeded", JSON.stringify(client.attrs));
    assert.equal(stack.llm.calls(key)[0].headers.traceparent, `00-${caller.traceId}-${client.spanId}-01`);
  });

  test("a job type's run: a span per effect under the request span", async () => {
    const key = newKey();
    const caller = callerTrace();
    const input = triageInput(`T-${hex(6)}`);
    const run = await stack.run("triage", key, input, { headers: { traceparent: traceparentOf(caller) } });
    assert.equal(run.status, 200, run.text);
    const spans = await traceOf(stack.otlp, caller.traceId, 4);
    const server = spans.find((s) => s.kind === SERVER);
    assert.equal(server.name, "POST /onejob/v1/run/triage");
    assert.equal(server.attrs["onejob.job_type"], "triage");
    const effects = spans.filter((s) => s.name.startsWith("effect "));
    assert.deepEqual(effects.map((s) => s.attrs["onejob.effect.name"]).sort(), ["email", "record"]);
    for (const effect of effects) {
      assert.equal(effect.parentSpanId, server.spanId);
      assert.equal(effect.attrs["onejob.effect.state"], "done");
    }
    const raw = stack.otlp.exports.map((e) => e.raw).join("\n");
    assert.ok(!raw.includes(input.customer_email), "no effect payload exported");
    assert.ok(!raw.includes(key));
  });
});
