// Integration tests of the edge against the real Workers runtime (workerd via
// `wrangler dev`, real Durable Objects and KV) and a fake LLM server over real
// HTTP. Every test runs twice: with the KV cache of finished results on, and
// with it off, so every replay also comes from the Ledger's own storage. Each
// test uses its own idempotency keys, so the tests of one mode share a worker.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";

import {
  DEV_KEY,
  TENANT_B_KEY,
  assertProblem,
  chat,
  newKey,
  sleep,
  startStack,
  upstreamKey,
} from "../support/harness.mjs";

const UPSTREAM_TIMEOUT_MS = 1500;
const UNKNOWN_LEASE_MS = 3000;
const MAX_ATTEMPTS = 4;

for (const cache of ["kv", "off"]) {
  let stack;
  let llm;
  const post = (...args) => stack.post(...args);
  const getJob = (...args) => stack.getJob(...args);

  describe(`edge gateway (RESULT_CACHE=${cache})`, () => {
    before(async () => {
      stack = await startStack({
        vars: {
          RESULT_CACHE: cache,
          UPSTREAM_TIMEOUT_MS: String(UPSTREAM_TIMEOUT_MS),
          UNKNOWN_LEASE_MS: String(UNKNOWN_LEASE_MS),
          MAX_ATTEMPTS: String(MAX_ATTEMPTS),
          BACKOFF_BASE_MS: "50",
          BACKOFF_CAP_MS: "400",
          MAX_BODY_BYTES: "4096",
        },
      });
      llm = stack.llm;
    });

    after(async () => {
      await stack?.stop();
    });

    test("1. the same request twice: one upstream call, a byte-identical replay", async () => {
      const key = newKey();
      const first = await post(key, chat("hello"));
      assert.equal(first.res.status, 200);
      assert.equal(first.res.headers.get("idempotency-key"), key);
      assert.equal(first.res.headers.get("onejob-job-state"), "completed");
      assert.equal(first.res.headers.get("onejob-attempt"), "1");
      assert.equal(first.res.headers.get("idempotent-replayed"), null);
      const second = await post(key, chat("hello"));
      assert.equal(second.res.status, 200);
      assert.equal(second.res.headers.get("idempotent-replayed"), "true");
      assert.equal(second.text, first.text);
      assert.equal(llm.calls(key).length, 1);
      const { body: job } = await getJob(key);
      assert.equal(job.state, "completed");
      assert.equal(job.attempts.length, 1);
      assert.equal(job.attempts[0].outcome, "succeeded");
      assert.deepEqual(job.attempts[0].usage, { prompt_tokens: 10, completion_tokens: 5, total_tokens: 15 });
    });

    test("2. 100 concurrent duplicates: exactly one upstream call, 100 identical bodies", async () => {
      const key = newKey();
      // Well inside UPSTREAM_TIMEOUT_MS even on a loaded machine (at 800 ms
      // a busy runtime timed the call out); duplicates that arrive after
      // the answer are replays, which the assertions count the same.
      llm.script(key, ["delay:300"]);
      const results = await Promise.all(Array.from({ length: 100 }, () => post(key, chat("concurrent"))));
      assert.deepEqual(new Set(results.map((r) => r.res.status)), new Set([200]));
      assert.equal(new Set(results.map((r) => r.text)).size, 1);
      assert.equal(results.filter((r) => r.res.headers.get("idempotent-replayed") === null).length, 1);
      assert.equal(llm.calls(key).length, 1);
    });

    test("3. same key, other payload: 422; reordered keys or respelled numbers: the same job", async () => {
      const key = newKey();
      const first = await post(key, null, { raw: '{"model":"gpt-test","temperature":1,"messages":[{"role":"user","content":"x"}]}' });
      assert.equal(first.res.status, 200);
      const same = await post(key, null, { raw: '{"messages":[{"content":"x","role":"user"}],"temperature":1.0e0,"model":"gpt-test"}' });
      assert.equal(same.res.status, 200);
      assert.equal(same.res.headers.get("idempotent-replayed"), "true");
      assert.equal(same.text, first.text);
      const other = await post(key, chat("y"));
      const problem = assertProblem(other, 422, "idempotency-key-reused");
      assert.equal(problem.key, key);
      assert.equal(other.res.headers.get("x-should-retry"), "false");
      assert.equal(llm.calls(key).length, 1);
    });

    test("4. upstream hangs: job unknown; 409 inside the lease; one new attempt after it", async () => {
      const key = newKey();
      llm.script(key, ["hang", "ok"]);
      const first = await post(key, chat("slow"));
      assertProblem(first, 504, "upstream-timeout");
      assert.equal(first.res.headers.get("onejob-job-state"), "unknown");
      assert.equal((await getJob(key)).body.state, "unknown");

      const inside = await post(key, chat("slow"));
      assertProblem(inside, 409, "outcome-unknown");
      const retryAfter = Number(inside.res.headers.get("retry-after"));
      assert.ok(retryAfter >= 1 && retryAfter <= UNKNOWN_LEASE_MS / 1000, `Retry-After ${retryAfter}`);
      assert.equal(inside.res.headers.get("x-should-retry"), "true");
      assert.equal(llm.calls(key).length, 1, "no new attempt inside the lease");

      await sleep(Number(inside.res.headers.get("retry-after-ms")) + 100);
      const afterLease = await post(key, chat("slow"));
      assert.equal(afterLease.res.status, 200, afterLease.text);
      assert.equal(afterLease.res.headers.get("onejob-attempt"), "2");
      assert.equal(llm.calls(key).length, 2);
      const { body: job } = await getJob(key);
      assert.equal(job.state, "completed");
      assert.deepEqual(job.attempts.map((a) => a.outcome), ["unknown", "succeeded"]);
      assert.equal(job.attempts[0].error_class, "timeout_after_send");
      assert.equal(job.completed_by, 2);
    });

    test("5a. 503 then 200: one job, two attempts, the client sees the 200", async () => {
      const key = newKey();
      llm.script(key, ["503", "ok"]);
      const { res, text } = await post(key, chat("flaky"));
      assert.equal(res.status, 200, text);
      assert.equal(res.headers.get("onejob-attempt"), "2");
      assert.equal(llm.calls(key).length, 2);
      const { body: job } = await getJob(key);
      assert.deepEqual(job.attempts.map((a) => [a.outcome, a.status]), [["failed", 503], ["succeeded", 200]]);
    });

    test("5b. 429 with Retry-After: 2: the next upstream call comes at least 2 s later", async () => {
      const key = newKey();
      llm.script(key, ["429:2", "ok"]);
      const { res } = await post(key, chat("rate limited"));
      assert.equal(res.status, 200);
      const [first, second] = llm.calls(key);
      assert.ok(second.at - first.at >= 2000, `waited ${second.at - first.at} ms`);
      const { body: job } = await getJob(key);
      assert.equal(job.attempts[0].error_class, "rate_limited");
    });

    test("6. upstream 400 and content_filter: stored, replayed, never retried", async () => {
      for (const fault of ["400", "content_filter"]) {
        const key = newKey();
        llm.script(key, [`${fault}*`]);
        const first = await post(key, chat(fault));
        const second = await post(key, chat(fault));
        assert.equal(first.res.status, fault === "400" ? 400 : 200);
        assert.equal(second.res.status, first.res.status);
        assert.equal(second.text, first.text);
        assert.equal(second.res.headers.get("idempotent-replayed"), "true");
        // A finished job's answer is final, fresh or replayed (bug 1).
        assert.equal(first.res.headers.get("x-should-retry"), "false", fault);
        assert.equal(second.res.headers.get("x-should-retry"), "false", fault);
        assert.equal(llm.calls(key).length, 1, fault);
        const { body: job } = await getJob(key);
        assert.equal(job.state, "completed");
        assert.equal(job.attempts[0].outcome, "rejected");
        assert.equal(job.attempts[0].error_class, fault === "400" ? "client_error" : "content_filter");
      }
    });

    test("7. always 503: never more upstream calls than the attempt cap, then dead and replayed", async () => {
      const key = newKey();
      llm.script(key, ["503*"]);
      const first = await post(key, chat("down"));
      assert.equal(first.res.status, 503);
      assert.equal(first.res.headers.get("onejob-job-state"), "dead");
      // Dead is final: a 503 that says "do not retry" (bug 1), fresh and replayed.
      assert.equal(first.res.headers.get("x-should-retry"), "false");
      assert.equal(first.res.headers.get("retry-after"), null);
      for (let i = 0; i < 5; i++) {
        const again = await post(key, chat("down"));
        assert.equal(again.res.status, 503);
        assert.equal(again.text, first.text);
        assert.equal(again.res.headers.get("idempotent-replayed"), "true");
        assert.equal(again.res.headers.get("x-should-retry"), "false");
        assert.equal(again.res.headers.get("onejob-job-state"), "dead");
      }
      assert.equal(llm.calls(key).length, MAX_ATTEMPTS);
      const { body: job } = await getJob(key);
      assert.equal(job.state, "dead");
      assert.equal(job.attempts.length, MAX_ATTEMPTS);
      assert.ok(job.attempts.every((a) => a.outcome === "failed" && a.status === 503));
    });

    test("8. tenants are isolated: same key, separate jobs; B cannot read A's", async () => {
      const key = newKey();
      const a = await post(key, chat("tenant A secret"));
      assert.equal(a.res.status, 200);
      const bRead = await getJob(key, TENANT_B_KEY);
      assert.equal(bRead.status, 404);
      assert.equal(bRead.body.type, "/onejob/problems/job-not-found");
      const b = await post(key, chat("tenant B question"), { token: TENANT_B_KEY });
      assert.equal(b.res.status, 200);
      assert.equal(b.res.headers.get("idempotent-replayed"), null, "B's request is B's own first call");
      assert.notEqual(b.text, a.text);
      assert.equal(llm.calls(key, "dev").length, 1);
      assert.equal(llm.calls(key, "tenant-b").length, 1);
      // Same payload as A, B's key space: still B's own job, never A's response.
      const bSame = await post(key, chat("tenant A secret"), { token: TENANT_B_KEY });
      assertProblem(bSame, 422, "idempotency-key-reused");
      assert.equal((await getJob(key)).body.attempts.length, 1);
      assert.equal((await getJob(key, TENANT_B_KEY)).body.attempts.length, 1);
    });

    test("9. bad input: the right status, a problem body, and nothing stored", async () => {
      const cases = [
        ["no key", undefined, {}, 400, "missing-idempotency-key"],
        ["key too short", "short-key", {}, 400, "invalid-idempotency-key"],
        ["key too long", "k".repeat(256), {}, 400, "invalid-idempotency-key"],
        ["key with a control character", "abcdefgh\tijklmnop", {}, 400, "invalid-idempotency-key"],
        ["key with a space", "abcdefgh ijklmnop", {}, 400, "invalid-idempotency-key"],
        ["body over the limit", newKey(), { raw: JSON.stringify(chat("x".repeat(5000))) }, 413, "payload-too-large"],
        ["invalid JSON", newKey(), { raw: '{"model": "gpt-test",' }, 400, "invalid-json"],
        ["duplicate JSON names", newKey(), { raw: '{"a":1,"a":2}' }, 400, "invalid-json"],
        ["no credential", newKey(), { token: null }, 401, "unauthorized"],
        ["wrong credential", newKey(), { token: "not-a-tenant-key" }, 401, "unauthorized"],
        ["not JSON", newKey(), { raw: "hello", headers: { "Content-Type": "text/plain" } }, 415, "unsupported-media-type"],
      ];
      for (const [name, key, options, status, slug] of cases) {
        const result = await post(key, chat(name), options);
        const problem = assertProblem(result, status, slug);
        assert.ok(problem.detail, name);
        if (key && key.length >= 16 && key.length <= 255 && !/[\u0000-\u0020]/.test(key)) {
          assert.equal((await getJob(key)).status, 404, `${name}: nothing stored`);
          assert.equal(llm.calls(key).length, 0, name);
        }
      }
      const wrongMethod = await fetch(`${stack.url}/v1/chat/completions`, {
        method: "PUT",
        headers: { Authorization: `Bearer ${DEV_KEY}`, "Idempotency-Key": newKey() },
        body: "{}",
      });
      assertProblem({ res: wrongMethod, text: await wrongMethod.text() }, 405, "method-not-allowed");
      assert.equal(wrongMethod.headers.get("allow"), "POST, OPTIONS");
    });

    test("10. a finished job survives a runtime restart: replayed with no upstream call", async () => {
      const key = newKey();
      const first = await post(key, chat("durable"));
      assert.equal(first.res.status, 200);
      await stack.restart();
      const again = await post(key, chat("durable"));
      assert.equal(again.res.status, 200);
      assert.equal(again.text, first.text);
      assert.equal(again.res.headers.get("idempotent-replayed"), "true");
      assert.equal(llm.calls(key).length, 1);
      assert.equal((await getJob(key)).body.state, "completed");
    });

    test("CORS: the preflight allows what the SDKs ask for, is cached, and responses expose onejob's headers", async () => {
      // What the official openai and @anthropic-ai/sdk packages send from a browser (bug 3).
      const asked = [
        "authorization", "content-type", "idempotency-key", "x-stainless-os", "x-stainless-arch", "x-stainless-lang",
        "x-stainless-runtime", "x-stainless-runtime-version", "x-stainless-package-version", "x-stainless-timeout",
        "x-stainless-retry-count", "anthropic-version", "anthropic-dangerous-direct-browser-access",
      ];
      const preflight = (requested) =>
        fetch(`${stack.url}/v1/chat/completions`, {
          method: "OPTIONS",
          headers: {
            Origin: "https://app.example",
            "Access-Control-Request-Method": "POST",
            ...(requested ? { "Access-Control-Request-Headers": requested } : {}),
          },
        });
      const res = await preflight(asked.join(","));
      assert.equal(res.status, 204);
      const allowed = res.headers.get("access-control-allow-headers").toLowerCase().split(/\s*,\s*/);
      for (const name of asked) assert.ok(allowed.includes(name), `${name} allowed: ${allowed}`);
      assert.equal(res.headers.get("access-control-allow-origin"), "*");
      assert.match(res.headers.get("access-control-allow-methods"), /POST/);
      assert.equal(res.headers.get("access-control-max-age"), "86400");
      // Not a header name, or too many: only the fixed list is allowed.
      const bad = await preflight("x-ok, bad header, x(y)");
      assert.doesNotMatch(bad.headers.get("access-control-allow-headers"), /x-ok|bad/);
      const many = await preflight(Array.from({ length: 65 }, (_, i) => `x-h${i}`).join(","));
      assert.doesNotMatch(many.headers.get("access-control-allow-headers"), /x-h1/);
      const plain = await preflight();
      assert.match(plain.headers.get("access-control-allow-headers"), /Idempotency-Key/);
      const { res: answered } = await post(newKey(), chat("cors"));
      const exposed = answered.headers.get("access-control-expose-headers");
      for (const name of ["Idempotency-Key", "Idempotent-Replayed", "OneJob-Job-State", "OneJob-Attempt", "Retry-After", "retry-after-ms", "x-should-retry"]) {
        assert.ok(exposed.split(", ").includes(name), `${name} exposed: ${exposed}`);
      }
    });

    test("the provider gets a tenant-scoped key, never the client's own", async () => {
      const key = newKey();
      assert.equal((await post(key, chat("a"))).res.status, 200);
      assert.equal((await post(key, chat("b"), { token: TENANT_B_KEY })).res.status, 200);
      const sent = llm.allCalls().filter((c) => [upstreamKey(key, "dev"), upstreamKey(key, "tenant-b")].includes(c.headers["idempotency-key"]));
      assert.equal(sent.length, 2);
      const [a, b] = sent.map((c) => c.headers["idempotency-key"]);
      assert.notEqual(a, b, "two tenants, two keys upstream (bug 4)");
      assert.ok(llm.allCalls().every((c) => c.headers["idempotency-key"] !== key), "the raw key never leaves");
    });

    test("a 5 MB answer is stored in chunks and replayed byte for byte, also after a restart", async () => {
      const key = newKey();
      llm.script(key, ["big:5000000"]);
      const first = await post(key, chat("big"));
      assert.equal(first.res.status, 200);
      assert.ok(first.text.length > 5_000_000);
      const replay = await post(key, chat("big"));
      assert.equal(replay.res.headers.get("idempotent-replayed"), "true");
      assert.equal(replay.text, first.text);
      await stack.restart();
      const afterRestart = await post(key, chat("big"));
      assert.equal(afterRestart.res.status, 200);
      assert.equal(afterRestart.text, first.text, "identical after a restart (bug 6)");
      assert.equal(llm.calls(key).length, 1);
    });

    test("the query string is part of the request's identity and reaches the provider", async () => {
      const key = newKey();
      const path = "/v1/chat/completions?api-version=2024-10-21";
      const first = await post(key, chat("azure"), { path });
      assert.equal(first.res.status, 200, first.text);
      assert.equal(llm.calls(key)[0].path, "/v1/chat/completions?api-version=2024-10-21", "forwarded (bug 10)");
      const same = await post(key, chat("azure"), { path });
      assert.equal(same.res.headers.get("idempotent-replayed"), "true");
      const otherVersion = await post(key, chat("azure"), { path: "/v1/chat/completions?api-version=2025-01-01" });
      assertProblem(otherVersion, 422, "idempotency-key-reused");
      assert.equal(llm.calls(key).length, 1);
    });

    test("Prefer: wait=0 answers a duplicate of a running request with 409 at once", async () => {
      const key = newKey();
      llm.script(key, ["delay:1000"]);
      const running = post(key, chat("long"));
      await sleep(300);
      const started = Date.now();
      const duplicate = await post(key, chat("long"), { headers: { Prefer: "wait=0" } });
      assert.ok(Date.now() - started < 1000, "did not wait");
      assertProblem(duplicate, 409, "request-in-progress");
      assert.equal(duplicate.res.headers.get("x-should-retry"), "true");
      assert.ok(Number(duplicate.res.headers.get("retry-after")) >= 1);
      assert.equal((await running).res.status, 200);
      assert.equal(llm.calls(key).length, 1);
    });

    test("500 is retried once only; the next request with the key runs the next attempt", async () => {
      const key = newKey();
      llm.script(key, ["500", "500", "ok"]);
      const first = await post(key, chat("server error"));
      assert.equal(first.res.status, 500);
      assert.equal(first.res.headers.get("onejob-job-state"), "failed");
      assert.equal(first.res.headers.get("x-should-retry"), "true");
      assert.equal(llm.calls(key).length, 2);
      const second = await post(key, chat("server error"));
      assert.equal(second.res.status, 200);
      assert.equal(second.res.headers.get("onejob-attempt"), "3");
      assert.equal(llm.calls(key).length, 3);
    });

    test("upstream drops the connection after reading the request: unknown, not retried", async () => {
      const key = newKey();
      llm.script(key, ["reset"]);
      const first = await post(key, chat("reset"));
      assertProblem(first, 504, "upstream-timeout");
      assert.equal(llm.calls(key).length, 1);
      const { body: job } = await getJob(key);
      assert.equal(job.state, "unknown");
      assert.equal(job.attempts[0].error_class, "dropped_after_send");
    });
  });
}
