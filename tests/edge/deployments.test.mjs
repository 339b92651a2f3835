// Deployments that differ from the default: a malformed configuration, an
// upstream that refuses connections, tenants sharing one isolate's retry
// budgets. Each runs its own worker.
import assert from "node:assert/strict";
import { describe, test } from "node:test";

import { DEV_KEY, TENANT_B_KEY, assertProblem, chat, newKey, sleep, startStack, triageInput, waitFor } from "../support/harness.mjs";
import { freePort } from "../support/worker.mjs";

/** Runs `body` against a stack started with `options`, then stops it. */
async function withStack(options, body) {
  const stack = await startStack(options);
  try {
    await body(stack);
  } finally {
    await stack.stop();
  }
}

describe("a malformed configuration reaches no caller", () => {
  const cases = [
    // An operator pasted a raw bearer key instead of its digest (bug 2).
    ["TENANTS with a raw key", { TENANTS: JSON.stringify({ "sk-raw-tenant-key-0123456789": "acme" }) }, "sk-raw"],
    ["UPSTREAM that is not a URL", { UPSTREAM: "sk-upstream-secret-in-the-wrong-variable" }, "sk-upstream"],
    // 2^32 + 1 once became 1 attempt (bug 11).
    ["MAX_ATTEMPTS past u32", { MAX_ATTEMPTS: "4294967297" }, "4294967297"],
    ["UPSTREAM_TIMEOUT_MS past u64", { UPSTREAM_TIMEOUT_MS: "18446744073709551616" }, "18446744073709551616"],
  ];
  for (const [name, vars, secret] of cases) {
    test(`${name}: 500 gateway-misconfigured, no detail in the body`, async () => {
      await withStack({ vars, logLevel: "log" }, async (stack) => {
        for (const answer of [await stack.post(newKey(), chat("x")), await stack.post(newKey(), chat("x"), { token: null })]) {
          const problem = assertProblem(answer, 500, "gateway-misconfigured");
          assert.ok(!answer.text.includes(secret), answer.text);
          assert.doesNotMatch(problem.detail, /TENANTS|UPSTREAM|MAX_ATTEMPTS|TIMEOUT/);
        }
        assert.equal(stack.llm.allCalls().length, 0);
        await sleep(300); // the log reaches wrangler's output a moment later
        assert.match(stack.worker.output(), /gateway misconfigured: .+/, "the operator's log says what is wrong");
      });
    });
  }
});

test("no UPSTREAM (nor PROVIDERS): 500 gateway-misconfigured on every route, never the demo provider", async () => {
  // A deployment that forgot its provider once answered every caller from
  // the built-in demo. UPSTREAM "" is unset (it overrides dev.vars.example's
  // UPSTREAM=demo); the demo model is asked for, so only the demo could answer.
  await withStack({ vars: { UPSTREAM: "" }, logLevel: "log" }, async (stack) => {
    assertProblem(await stack.post(newKey(), chat("x", { model: "demo" })), 500, "gateway-misconfigured");
    assertProblem(await stack.run("triage", newKey(), triageInput("T-NO-UPSTREAM")), 500, "gateway-misconfigured");
    assert.equal(stack.llm.allCalls().length, 0);
    // The log reaches wrangler's output a moment later (longer on a loaded machine).
    const logged = /gateway misconfigured: UPSTREAM must be set: "demo" \(development\) or the provider's http\(s\) base URL, or set PROVIDERS/;
    await waitFor("the misconfiguration in the worker's log", () => ({ ok: logged.test(stack.worker.output()) }));
  });
});

test("a job type lacking its settings is off alone (issue 34): every other route answers, its runs get a problem naming the type and the settings", async () => {
  // A deployment of the demo's triage type without MAIL_URL and MAIL_SECRET,
  // the settings only that type uses, once answered every request 500
  // gateway-misconfigured, /v1 included. "" is unset (it overrides
  // dev.vars.example's values; a blank setting is an unset one).
  await withStack({ vars: { MAIL_URL: "", MAIL_RECEIPT_URL: "", MAIL_SECRET: "" }, logLevel: "log" }, async (stack) => {
    const key = newKey();
    const proxied = await stack.post(key, chat("the gateway still answers"));
    assert.equal(proxied.res.status, 200, proxied.text);
    assert.equal(stack.llm.calls(key).length, 1);
    assert.equal((await stack.getJob(key)).status, 200, "a job's route");
    const models = await fetch(`${stack.url}/v1/models`, { headers: { Authorization: `Bearer ${DEV_KEY}` } });
    assert.equal(models.status, 200, await models.text());
    const admin = await stack.admin("/onejob/v1/admin/dead-letters");
    assert.equal(admin.status, 200, `the operator API: ${admin.text}`);

    const run = await stack.run("triage", newKey(), triageInput("T-OFF"));
    const problem = assertProblem(run, 503, "job-type-not-configured");
    assert.equal(
      problem.detail,
      "job type triage is not configured in this deployment: it needs the variable MAIL_URL and the secret MAIL_SECRET, which are not set",
    );
    assert.equal(run.res.headers.get("x-should-retry"), "false", "asking again cannot help until the operator sets them");
    // Nothing else of the configuration: no value, no other setting's name.
    assert.doesNotMatch(run.text, /TICKETS|MAIL_RECEIPT_URL|demo:inbox|onejob-dev-mail-secret|UPSTREAM/);
    // A caller without credentials learns nothing of it; an unknown type is still unknown.
    assertProblem(await stack.run("triage", newKey(), triageInput("T-OFF"), { token: null }), 401, "unauthorized");
    assertProblem(await stack.run("no_such_type", newKey(), {}), 404, "unknown-job-type");
    assert.equal(stack.llm.allCalls().length, 1, "no run reached the provider");
    // The operator's log says which type is off, and why.
    const logged = /job type triage is not configured in this deployment: it needs the variable MAIL_URL and the secret MAIL_SECRET/;
    await waitFor("the disabled type in the worker's log", () => ({ ok: logged.test(stack.worker.output()) }));
  });
});

test("a refused connection: workerd cannot tell it from a dropped one, so the outcome is unknown and nothing is resent", async () => {
  // workerd reports "Network connection lost" for both (see crates/edge/src/upstream/http.rs):
  // the gateway takes the safe side, one attempt and an unknown outcome.
  const closed = await freePort();
  await withStack({ vars: { MAX_ATTEMPTS: "3" }, upstream: `http://127.0.0.1:${closed}/v1` }, async (stack) => {
    const key = newKey();
    const answer = await stack.post(key, chat("refused"));
    assertProblem(answer, 504, "upstream-timeout");
    assert.equal(answer.res.headers.get("onejob-job-state"), "unknown");
    assert.ok(!answer.text.includes(String(closed)), "the upstream's address stays in the log");
    const { body: job } = await stack.getJob(key);
    assert.deepEqual(job.attempts.map((a) => [a.outcome, a.error_class]), [["unknown", "dropped_after_send"]]);
  });
});

test("UNKNOWN_POLICY=block: an unknown outcome is never advertised as retryable", async () => {
  await withStack({ vars: { UNKNOWN_POLICY: "block", UPSTREAM_TIMEOUT_MS: "500" } }, async (stack) => {
    const key = newKey();
    stack.llm.script(key, ["hang"]);
    const first = await stack.post(key, chat("blocked"));
    assertProblem(first, 504, "upstream-timeout");
    assert.equal(first.res.headers.get("x-should-retry"), "false");
    assert.equal(first.res.headers.get("retry-after"), null);
    const again = await stack.post(key, chat("blocked"));
    assertProblem(again, 409, "outcome-blocked");
    assert.equal(again.res.headers.get("x-should-retry"), "false");
    assert.equal(stack.llm.calls(key).length, 1);
  });
});

test("one tenant's failures cannot spend another tenant's retries (bug 16)", async () => {
  await withStack({ vars: { MAX_ATTEMPTS: "4", BACKOFF_BASE_MS: "1", BACKOFF_CAP_MS: "5" } }, async (stack) => {
    // Tenant B: 40 jobs of 3 retries each (5 tokens a retry) drain a 500-token budget.
    const failing = Array.from({ length: 40 }, () => newKey());
    for (const key of failing) stack.llm.script(key, ["503*"], "tenant-b");
    const answers = await Promise.all(failing.map((key) => stack.post(key, chat("down"), { token: TENANT_B_KEY })));
    assert.ok(answers.every((a) => a.res.status === 503));
    const bCalls = failing.reduce((n, key) => n + stack.llm.calls(key, "tenant-b").length, 0);
    assert.ok(bCalls < 40 * 4, `B's budget ran out: ${bCalls} calls`);
    // Tenant A's first failure is still retried.
    const key = newKey();
    stack.llm.script(key, ["503", "ok"]);
    const a = await stack.post(key, chat("fine"));
    assert.equal(a.res.status, 200, a.text);
    assert.equal(stack.llm.calls(key).length, 2);
  });
});
