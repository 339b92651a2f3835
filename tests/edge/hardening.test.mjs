// The contract and security bugs independent checks found (the bug issue of
// wave 7), each pinned against the real runtime (workerd under `wrangler
// dev`, real Durable Objects, Queues and D1) and fakes over real HTTP that
// count what reaches them: a provider's key never leaves its base URL, every
// JSON body is read strictly and bounded on the bytes read, operator routes
// refuse malformed keys and filters with 400s, wrong methods get 405 with
// `Allow`, the operator's view counts queue messages, cancel answers as
// documented, and "allow one new attempt" does what the console says. (The
// Ledger's drive lock, released when a drive fails, is pinned by the edge's
// own unit tests: ledger/lock.rs.)
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";

import {
  DEV_KEY,
  RESPOND_ASYNC,
  assertProblem,
  chat,
  newKey,
  providerKeyVar,
  sleep,
  startFakeLlm,
  startStack,
  triageType,
} from "../support/harness.mjs";

/** The provider's key: it must reach the fake only under its base URL. */
const PROVIDER_KEY = "sk-scoped-provider-key-0001";
const MAX_BODY_BYTES = 8 * 1024 * 1024;

describe("hardening (wave 7 bug issue)", () => {
  let stack;
  let llm;
  before(async () => {
    // The provider lives under a path of its host (`/scoped/v1`), as a
    // proxy or a multi-tenant host would serve it: a request that resolves
    // outside it would carry the key to another path on that host.
    llm = await startFakeLlm({ name: "scoped" });
    const baseUrl = llm.baseUrl.replace(/\/v1$/, "/scoped/v1");
    stack = await startStack({
      llm,
      vars: {
        PROVIDERS: JSON.stringify([{ name: "scoped", kind: "openai", base_url: baseUrl, api_key: providerKeyVar("scoped") }]),
        ROUTES: JSON.stringify({ "*": { providers: [{ provider: "scoped" }] } }),
        [providerKeyVar("scoped")]: PROVIDER_KEY,
        UPSTREAM_TIMEOUT_MS: "1000",
        UNKNOWN_LEASE_MS: "1000",
        MAX_BODY_BYTES: String(MAX_BODY_BYTES),
        JOB_TYPES: JSON.stringify({ triage_once: triageType({ once_per: null, effects: [] }) }),
      },
    });
  });
  after(async () => {
    await stack?.stop();
    await llm?.close();
  });

  /** Every request the fake provider received so far. */
  const providerCalls = () => llm.allCalls().length;
  const admin = (...args) => stack.admin(...args);
  const check = (body, { headers = {}, raw } = {}) =>
    fetch(`${stack.url}/onejob/v1/providers/check`, {
      method: "POST",
      headers: { Authorization: "Bearer onejob-dev-admin-key", "Content-Type": "application/json", ...headers },
      body: raw ?? JSON.stringify(body),
    }).then(async (res) => ({ res, text: await res.text() }));

  test("1. the provider check refuses a sample path that leaves the base URL, and non-object samples, before any call", async () => {
    const before = providerCalls();
    for (const path of [
      "/v1/../../x",
      "/v1/../../../steal",
      "/v1/chat/../../x",
      "/v1/%2e%2e/%2e%2e/x",
      "/v1/.%2E/x",
      "/v1/chat%2F..%2F..%2Fx",
      "/v1//evil/x",
      "/v1/a\\..\\..\\x",
      "/v1/./chat/completions",
    ]) {
      const refused = await check({ model: "gpt-test", samples: [chat("probe")], path });
      const problem = assertProblem(refused, 400, "invalid-query");
      assert.match(problem.detail, /^path: /, path);
    }
    for (const samples of [["a string"], [1], [[chat("nested")]], [chat("ok"), null]]) {
      const refused = await check({ model: "gpt-test", samples });
      assertProblem(refused, 400, "invalid-query");
    }
    assert.equal(providerCalls(), before, "no refused check reached the provider");
    // Every call that ever reached the fake carried the key under its base URL.
    const good = await check({ model: "gpt-test", samples: [chat("a fine sample")] });
    assert.equal(good.res.status, 200, good.text);
    assert.equal(providerCalls(), before + 1);
    for (const call of llm.allCalls()) assert.ok(call.path.startsWith("/scoped/v1/"), call.path);
  });

  test("1b. a proxied request whose path could resolve outside the base URL is refused, not forwarded", async () => {
    const before = providerCalls();
    for (const path of ["/v1/chat%2F..%2F..%2Fx", "/v1/chat%2fcompletions", "/v1/a%5c..%5cx", "/v1//x"]) {
      const refused = await stack.post(newKey(), chat("escape"), { path });
      assertProblem(refused, 400, "invalid-query");
    }
    assert.equal(providerCalls(), before);
  });

  test("2. operator and check bodies are read strictly: duplicate names, lone surrogates, 1e400 → 400; a wrong type → 415; a chunked body over the limit → 413", async () => {
    const key = newKey();
    const strict = [
      `{"tenant":"dev","key":"${key}","action":"retry","action":"succeeded"}`,
      `{"tenant":"dev\\ud800","key":"${key}","action":"retry"}`,
      `{"tenant":"dev","key":"${key}","action":"succeeded","response":{"status":200,"body":{"n":1e400}}}`,
      `{"tenant":"dev","key":"${key}","action":"retry",}`,
    ];
    for (const raw of strict) {
      const res = await fetch(`${stack.url}/onejob/v1/admin/jobs/resolve`, {
        method: "POST",
        headers: { Authorization: "Bearer onejob-dev-admin-key", "Content-Type": "application/json", "Idempotency-Key": newKey() },
        body: raw,
      });
      assertProblem({ res, text: await res.text() }, 400, "invalid-json");
    }
    // The replay route and the provider check read the same way.
    const replay = await fetch(`${stack.url}/onejob/v1/admin/dead-letters/replay`, {
      method: "POST",
      headers: { Authorization: "Bearer onejob-dev-admin-key", "Content-Type": "application/json", "Idempotency-Key": newKey() },
      body: `{"tenant":"dev","tenant":"other","key":"${key}"}`,
    });
    assertProblem({ res: replay, text: await replay.text() }, 400, "invalid-json");
    const before = providerCalls();
    assertProblem(await check(null, { raw: `{"model":"gpt-test","model":"x","samples":[{"messages":[]}]}` }), 400, "invalid-json");
    assertProblem(await check(null, { raw: `{"model":"gpt-test","samples":[{"n":1e400}]}` }), 400, "invalid-json");
    assertProblem(await check({ model: "gpt-test", samples: [chat("x")] }, { headers: { "Content-Type": "text/plain" } }), 415, "unsupported-media-type");
    const asForm = await admin("/onejob/v1/admin/jobs/resolve", {
      body: { tenant: "dev", key, action: "retry" },
      key: newKey(),
      headers: { "Content-Type": "application/x-www-form-urlencoded" },
    });
    assertProblem(asForm, 415, "unsupported-media-type");
    // A chunked body (no Content-Length) is counted as it arrives.
    for (const route of ["/onejob/v1/providers/check", "/onejob/v1/admin/jobs/resolve"]) {
      const chunk = new TextEncoder().encode(" ".repeat(1024 * 1024));
      let sent = 0;
      const body = new ReadableStream({
        pull(controller) {
          if (sent >= MAX_BODY_BYTES + 2 * chunk.length) return controller.close();
          sent += chunk.length;
          controller.enqueue(chunk);
        },
      });
      const res = await fetch(`${stack.url}${route}`, {
        method: "POST",
        headers: { Authorization: "Bearer onejob-dev-admin-key", "Content-Type": "application/json", "Idempotency-Key": newKey() },
        body,
        duplex: "half",
      });
      assertProblem({ res, text: await res.text() }, 413, "payload-too-large");
    }
    assert.equal(providerCalls(), before, "no refused check reached the provider");
  });

  test("3. operator routes answer 400 for a malformed job key, in the path or the body, never 500", async () => {
    const badKeys = ["short", "k".repeat(10_000), "bad key with spaces!!", "nul\u0000-in-the-middle-of-it", "é-not-ascii-0123456789"];
    for (const bad of badKeys) {
      const encoded = encodeURIComponent(bad);
      for (const [route, method] of [
        [`/onejob/v1/admin/jobs/dev/${encoded}`, "GET"],
        [`/onejob/v1/admin/jobs/dev/${encoded}/enqueue`, "POST"],
        [`/onejob/v1/admin/jobs/dev/${encoded}/approve`, "POST"],
        [`/onejob/v1/admin/jobs/dev/${encoded}/effects/email/resend`, "POST"],
      ]) {
        const answer = await admin(route, { method, key: newKey() });
        assertProblem(answer, 400, "invalid-idempotency-key");
      }
      const resolve = await admin("/onejob/v1/admin/jobs/resolve", { body: { tenant: "dev", key: bad, action: "retry" }, key: newKey() });
      assertProblem(resolve, 400, "invalid-idempotency-key");
      const replay = await admin("/onejob/v1/admin/dead-letters/replay", { body: { tenant: "dev", key: bad }, key: newKey() });
      assertProblem(replay, 400, "invalid-idempotency-key");
    }
    // A malformed tenant or user is a 400 too.
    assertProblem(await admin(`/onejob/v1/admin/jobs/${"t".repeat(300)}/${newKey()}`), 400, "invalid-query");
    assertProblem(await admin(`/onejob/v1/admin/jobs/dev/${newKey()}?user=${"u".repeat(300)}`), 400, "invalid-query");
    // A well-formed key that names no job is still a 404.
    assertProblem(await admin(`/onejob/v1/admin/jobs/dev/${newKey()}`), 404, "job-not-found");
  });

  test("4. malformed operator query filters answer 400 naming the parameter", async () => {
    for (const [route, param] of [
      ["/onejob/v1/admin/costs?since_ms=abc", "since_ms"],
      ["/onejob/v1/admin/costs?since_ms=-5", "since_ms"],
      ["/onejob/v1/admin/jobs?since_ms=abc", "since_ms"],
      ["/onejob/v1/admin/jobs?until_ms=1e3", "until_ms"],
      ["/onejob/v1/admin/jobs?limit=0", "limit"],
      ["/onejob/v1/admin/jobs?limit=1000", "limit"],
      ["/onejob/v1/admin/jobs?limit=ten", "limit"],
      ["/onejob/v1/admin/jobs?cursor=garbage", "cursor"],
      ["/onejob/v1/admin/jobs?state=finished", "state"],
      ["/onejob/v1/admin/jobs?error_class=nope", "error_class"],
      ["/onejob/v1/admin/jobs?limit=5&limit=6", "limit"],
      ["/onejob/v1/admin/jobs?sinse_ms=5", "sinse_ms"],
      ["/onejob/v1/admin/dead-letters?error_class=nope", "error_class"],
    ]) {
      const problem = assertProblem(await admin(route), 400, "invalid-query");
      assert.match(problem.detail, new RegExp(`\\b${param}\\b`), route);
    }
    // Well-formed ones (and empty values, as a form sends them) still work.
    for (const route of [
      "/onejob/v1/admin/costs?since_ms=0",
      "/onejob/v1/admin/jobs?state=completed&limit=200&since_ms=&model=",
      "/onejob/v1/admin/dead-letters?error_class=unknown",
    ]) {
      const answer = await admin(route);
      assert.equal(answer.status, 200, `${route}: ${answer.text}`);
    }
  });

  test("5. a wrong method answers 405 with Allow on job, provider, problem and operator routes", async () => {
    const key = newKey();
    const cases = [
      [`/onejob/v1/jobs/${key}`, "POST", DEV_KEY, "GET"],
      [`/onejob/v1/jobs/${key}/stream`, "POST", DEV_KEY, "GET"],
      [`/onejob/v1/jobs/${key}/cancel`, "GET", DEV_KEY, "POST"],
      [`/onejob/v1/jobs/${key}/approve`, "GET", DEV_KEY, "POST"],
      ["/onejob/v1/providers", "POST", DEV_KEY, "GET"],
      ["/onejob/v1/providers/check", "GET", "onejob-dev-admin-key", "POST"],
      ["/onejob/v1/run/triage_once", "GET", DEV_KEY, "POST"],
      ["/onejob/problems/not-found", "POST", DEV_KEY, "GET"],
      ["/onejob/v1/admin/jobs", "POST", "onejob-dev-admin-key", "GET"],
      ["/onejob/v1/admin/costs", "DELETE", "onejob-dev-admin-key", "GET"],
      ["/onejob/v1/admin/dead-letters", "PUT", "onejob-dev-admin-key", "GET"],
      ["/onejob/v1/admin/dead-letters/replay", "GET", "onejob-dev-admin-key", "POST"],
      ["/onejob/v1/admin/jobs/resolve", "GET", "onejob-dev-admin-key", "POST"],
      [`/onejob/v1/admin/jobs/dev/${key}`, "POST", "onejob-dev-admin-key", "GET"],
      [`/onejob/v1/admin/jobs/dev/${key}/enqueue`, "GET", "onejob-dev-admin-key", "POST"],
    ];
    for (const [route, method, token, allowed] of cases) {
      const res = await fetch(`${stack.url}${route}`, { method, headers: { Authorization: `Bearer ${token}` } });
      assertProblem({ res, text: await res.text() }, 405, "method-not-allowed");
      assert.equal(res.headers.get("allow"), `${allowed}, OPTIONS`, `${method} ${route}`);
    }
    // An unknown operator route is still a 404.
    assertProblem(await admin("/onejob/v1/admin/nothing-here"), 404, "not-found");
  });

  test("9. the operator's view of a background job counts its queue messages as the tenant's view does", async () => {
    const key = newKey();
    const accepted = await stack.post(key, chat(`${key} background`), { headers: RESPOND_ASYNC });
    assert.equal(accepted.res.status, 202, accepted.text);
    const done = await stack.waitForJob(key, (job) => job.state === "completed");
    assert.ok(done.enqueued >= 1, JSON.stringify(done));
    const view = await admin(`/onejob/v1/admin/jobs/dev/${encodeURIComponent(key)}`);
    assert.equal(view.status, 200, view.text);
    assert.equal(view.body.background, true);
    assert.equal(view.body.enqueued, done.enqueued);
  });

  test("12. cancel: a finished job whose answer did not stream answers 409 not-cancellable; a finished stream 200", async () => {
    const key = newKey();
    const first = await stack.post(key, chat(`${key} plain`));
    assert.equal(first.res.status, 200, first.text);
    const cancel = (k) =>
      fetch(`${stack.url}/onejob/v1/jobs/${encodeURIComponent(k)}/cancel`, { method: "POST", headers: { Authorization: `Bearer ${DEV_KEY}` } }).then(
        async (res) => ({ res, text: await res.text() }),
      );
    assertProblem(await cancel(key), 409, "not-cancellable");
    // A streamed answer that has ended: cancelling it changes nothing, 200.
    const streamed = newKey();
    llm.script(streamed, ["sse:2:10"]);
    const stream = await stack.post(streamed, chat(`${streamed} streamed`, { stream: true }));
    assert.equal(stream.res.status, 200, stream.text);
    await stack.waitForJob(streamed, (job) => job.state === "completed");
    const again = await cancel(streamed);
    assert.equal(again.res.status, 200, again.text);
    assert.equal(JSON.parse(again.text).state, "completed");
  });

  test("11. 'allow one new attempt' on a caller's unknown job: failed with one attempt allowed, run by the next request with its key", async () => {
    const key = newKey();
    llm.script(key, ["hang", "ok"]);
    const first = await stack.post(key, chat(`${key} unknown`));
    assertProblem(first, 504, "upstream-timeout");
    assert.equal((await stack.getJob(key)).body.state, "unknown");
    const resolved = await admin("/onejob/v1/admin/jobs/resolve", { body: { tenant: "dev", key, action: "retry" }, key: newKey() });
    assert.equal(resolved.status, 200, resolved.text);
    assert.equal(resolved.body.state, "failed");
    // Nothing is sent on the gateway's own: it keeps no caller's request.
    await sleep(1500);
    assert.equal(llm.calls(key).length, 1);
    const next = await stack.post(key, chat(`${key} unknown`));
    assert.equal(next.res.status, 200, next.text);
    assert.equal(next.res.headers.get("onejob-attempt"), "2");
    assert.equal(llm.calls(key).length, 2);
  });
});
