// Several providers under one job (issue 10): failover to the next provider
// of a route, hedged requests that race two providers, output contracts, a
// circuit breaker per provider, and Anthropic's Messages API through the
// gateway. The worker runs under `wrangler dev` with PROVIDERS and ROUTES;
// every provider is a fake LLM of its own over real HTTP, so each test
// counts the calls every provider got.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";

import {
  DEV_KEY,
  FAKE_USAGE,
  assertProblem,
  chat,
  contentFault,
  freePort,
  message,
  newKey,
  sleep,
  startStack,
  waitFor,
} from "../support/harness.mjs";

const MAX_ATTEMPTS = 4;
const PRIMARY_SECRET = "sk-primary-provider-secret";
const CLAUDE_SECRET = "sk-ant-provider-secret";
const ANTHROPIC_VERSION = "2023-06-01";
const BASE_VARS = { MAX_ATTEMPTS: String(MAX_ATTEMPTS), BACKOFF_BASE_MS: "50", BACKOFF_CAP_MS: "200" };

/** The named fields of each attempt, for one readable deepEqual. */
const audit = (job, fields = ["provider", "model", "outcome", "status", "error_class"]) =>
  job.attempts.map((a) => Object.fromEntries(fields.map((f) => [f, a[f]])));

/** The events of an SSE text: [{ event, data }]. */
const sseEvents = (text) =>
  text
    .split("\n\n")
    .filter((block) => block.trim())
    .map((block) => {
      const event = block.match(/^event: (.*)$/m)?.[1];
      const data = block.match(/^data: (.*)$/m)?.[1];
      return { event, data: data && data !== "[DONE]" ? JSON.parse(data) : data };
    });

/** Every call each fake of `stack` got for `key`: { name: n }. */
const callsPerProvider = (stack, key) => Object.fromEntries(Object.entries(stack.fakes).map(([name, fake]) => [name, fake.calls(key).length]));

/** Where each (from, to) of `expected` occurs in order among `transitions`. */
function assertTransitions(transitions, expected) {
  const seen = transitions.map((t) => `${t.from}->${t.to}`);
  let at = 0;
  for (const [from, to] of expected) {
    const found = seen.indexOf(`${from}->${to}`, at);
    assert.ok(found >= 0, `transition ${from} -> ${to} after #${at} in ${JSON.stringify(transitions)}`);
    at = found + 1;
  }
  for (let i = 1; i < transitions.length; i++) assert.ok(transitions[i].at_ms >= transitions[i - 1].at_ms, "transitions in time order");
}

/** Asserts the providers view names no URL and no key; returns its providers by name. */
function providersByName(view, secrets = []) {
  assert.equal(view.status, 200, view.text);
  for (const banned of ["127.0.0.1", "localhost", "http://", "base_url", "api_key", ...secrets]) {
    assert.ok(!view.text.includes(banned), `the providers view shows no ${banned}: ${view.text}`);
  }
  return Object.fromEntries(view.body.providers.map((p) => [p.name, p]));
}

const SCHEMA = {
  type: "object",
  properties: {
    category: { type: "string", enum: ["billing", "bug", "other"] },
    priority: { type: "integer", minimum: 1, maximum: 5 },
    summary: { type: "string", minLength: 1, maxLength: 20 },
    tags: { type: "array", items: { type: "string" } },
    version: { const: 1 },
  },
  required: ["category", "priority"],
  additionalProperties: false,
};

/**
 * The jobs index's row of `key` (tenant dev, created since `sinceMs`) once
 * `until(row)` holds: the index is written after the responses.
 */
async function indexedRow(stack, key, sinceMs, until) {
  return waitFor(`the index row of ${key}`, async () => {
    const { status, body } = await stack.admin(`/onejob/v1/admin/jobs?tenant=dev&since_ms=${sinceMs}`);
    const row = status === 200 ? body.jobs.find((j) => j.key === key) : undefined;
    return { ok: row !== undefined && until(row), value: row ?? body };
  }, 15_000);
}

/**
 * Waits until the hedge's loser (the attempt of `provider`) has been
 * audited, then asserts it was, once: `lost_race` with an end, a latency,
 * its status and usage, and nothing changes it afterwards.
 */
async function assertLoserAudited(stack, key, provider, { status, usage }) {
  const job = await waitFor(`the ${provider} attempt audited lost_race`, async () => {
    const { body } = await stack.getJob(key);
    const late = body.attempts?.find((a) => a.provider === provider);
    return { ok: late?.outcome === "lost_race" && late.ended_ms !== undefined && late.ended_ms !== null, value: body };
  }, 20_000);
  const lost = job.attempts.find((a) => a.provider === provider);
  assert.equal(job.state, "completed");
  assert.equal(job.attempts.length, 2);
  assert.equal(job.attempts.filter((a) => a.outcome === "lost_race").length, 1);
  assert.notEqual(job.completed_by, lost.number);
  assert.equal(lost.status, status);
  assert.deepEqual(lost.usage, usage);
  assert.equal(lost.latency_ms, lost.ended_ms - lost.started_ms);
  await sleep(500);
  assert.deepEqual((await stack.getJob(key)).body.attempts, job.attempts, "audited once: nothing changes it later");
  return job;
}

describe("providers under one job: routes, failover, hedging, contracts, Anthropic", () => {
  let stack;
  let primary, backup, third, claude;
  const post = (...args) => stack.post(...args);
  const getJob = (...args) => stack.getJob(...args);
  /** POST /v1/messages with the tenant key as `x-api-key`, as Anthropic's clients send it. */
  const postMessages = (key, body, { headers = {}, token = null } = {}) => {
    const all = { "x-api-key": DEV_KEY, "anthropic-version": ANTHROPIC_VERSION, ...headers };
    for (const name of Object.keys(all)) if (all[name] === undefined) delete all[name];
    return post(key, body, { token, path: "/v1/messages", headers: all });
  };

  before(async () => {
    const closedPort = await freePort(); // nothing listens there: a connect error
    stack = await startStack({
      providers: [
        { name: "primary", key: PRIMARY_SECRET },
        { name: "backup" },
        { name: "third" },
        { name: "dead", baseUrl: `http://127.0.0.1:${closedPort}/v1` },
        { name: "builtin", kind: "demo" },
        { name: "claude", kind: "anthropic", key: CLAUDE_SECRET },
      ],
      routes: {
        "gpt-test": { providers: [{ provider: "primary", model: "primary-model" }, { provider: "backup", model: "backup-model" }] },
        "dead-first": { providers: [{ provider: "dead" }, { provider: "backup" }] },
        "demo-second": { providers: [{ provider: "primary" }, { provider: "builtin", model: "demo" }] },
        hedged: {
          providers: [{ provider: "primary", model: "primary-hedged" }, { provider: "backup", model: "backup-hedged" }],
          hedge_after_ms: 1000,
        },
        contract: { providers: [{ provider: "primary" }, { provider: "backup" }], contract: { required_keys: ["category"] } },
        "contract-3": {
          providers: [{ provider: "primary" }, { provider: "backup" }, { provider: "third" }],
          contract: { required_keys: ["category"] },
        },
        schema: { providers: [{ provider: "primary" }, { provider: "backup" }], contract: { schema: SCHEMA } },
        "claude-test": { providers: [{ provider: "claude" }] },
        "claude-contract": { providers: [{ provider: "claude" }], contract: { required_keys: ["category"] } },
      },
      // The breaker is off here (its own stacks below test it): failures in
      // one test must not make another skip a provider.
      vars: { ...BASE_VARS, BREAKER_FAILURES: "0", UPSTREAM_TIMEOUT_MS: "10000" },
    });
    ({ primary, backup, third, claude } = stack.fakes);
  });

  after(async () => {
    await stack?.stop();
  });

  test("1a. primary 503: attempt 2 goes to the backup with the backup's model; one job; the duplicate replays it", async () => {
    const key = newKey();
    primary.script(key, ["503"]);
    const first = await post(key, chat(`${key} failover`));
    assert.equal(first.res.status, 200, first.text);
    assert.equal(JSON.parse(first.text).id, "chatcmpl-backup", "the client gets the backup's answer");
    assert.equal(first.res.headers.get("onejob-attempt"), "2");
    assert.deepEqual(callsPerProvider(stack, key), { primary: 1, backup: 1, third: 0, claude: 0 });
    const [toPrimary] = primary.calls(key);
    const [toBackup] = backup.calls(key);
    assert.equal(toPrimary.model, "primary-model", "the route's model at the primary");
    assert.equal(toBackup.model, "backup-model", "the route's model at the backup");
    assert.deepEqual(JSON.parse(toBackup.body).messages, chat(`${key} failover`).messages, "only the model is rewritten");
    assert.equal(toPrimary.headers.authorization, `Bearer ${PRIMARY_SECRET}`, "the primary's own key");
    assert.equal(toBackup.headers.authorization, undefined, "no key for a provider without api_key");
    for (const call of [toPrimary, toBackup]) {
      assert.ok(Object.values(call.headers).every((v) => !String(v).includes(DEV_KEY)), "the tenant key never reaches a provider");
    }

    const { body: job } = await getJob(key);
    assert.equal(job.state, "completed");
    assert.equal(job.completed_by, 2);
    assert.deepEqual(audit(job), [
      { provider: "primary", model: "primary-model", outcome: "failed", status: 503, error_class: "unavailable" },
      { provider: "backup", model: "backup-model", outcome: "succeeded", status: 200, error_class: job.attempts[1].error_class },
    ]);
    assert.deepEqual(job.attempts[1].usage, FAKE_USAGE);

    const again = await post(key, chat(`${key} failover`));
    assert.equal(again.res.headers.get("idempotent-replayed"), "true");
    assert.equal(again.text, first.text);
    assert.deepEqual(callsPerProvider(stack, key), { primary: 1, backup: 1, third: 0, claude: 0 }, "no new call");
  });

  test("1b. a permanent error at the primary is the answer: no failover, replayed with no new call", async () => {
    for (const fault of ["400", "401", "403", "404", "422", "content_filter"]) {
      const key = newKey();
      primary.script(key, [`${fault}*`]);
      const first = await post(key, chat(`${key} permanent ${fault}`));
      assert.equal(first.res.status, fault === "content_filter" ? 200 : Number(fault), `${fault}: ${first.text}`);
      const second = await post(key, chat(`${key} permanent ${fault}`));
      assert.equal(second.res.status, first.res.status, fault);
      assert.equal(second.text, first.text, fault);
      assert.equal(second.res.headers.get("idempotent-replayed"), "true", fault);
      assert.deepEqual(callsPerProvider(stack, key), { primary: 1, backup: 0, third: 0, claude: 0 }, `${fault}: no failover`);
      const { body: job } = await getJob(key);
      assert.equal(job.state, "completed", fault);
      assert.deepEqual(audit(job, ["provider", "outcome"]), [{ provider: "primary", outcome: "rejected" }], fault);
      if (fault === "400") assert.equal(job.attempts[0].error_class, "client_error");
      if (fault === "content_filter") assert.equal(job.attempts[0].error_class, "content_filter");
    }
  });

  test("1c. a provider that refuses the connection: on workerd that is an unknown outcome, so no failover inside its lease", async () => {
    // workerd reports a refused connection and one dropped after the request
    // left with the same error ("Network connection lost"): the gateway cannot
    // prove the request never reached the provider, so the outcome is unknown
    // and the job waits out its lease instead of paying a second provider.
    // (The breaker still counts it: a provider that keeps refusing is skipped.)
    const key = newKey();
    const { res, text } = await post(key, chat(`${key} connect`, { model: "dead-first" }));
    assertProblem({ res, text }, 504, "upstream-timeout");
    assert.equal(backup.calls(key).length, 0, "no second provider is paid while the first may have the request");
    const { body: job } = await getJob(key);
    assert.equal(job.state, "unknown");
    assert.deepEqual(audit(job, ["provider", "outcome", "error_class"]), [
      { provider: "dead", outcome: "unknown", error_class: "dropped_after_send" },
    ]);
    const again = await post(key, chat(`${key} connect`, { model: "dead-first" }));
    assertProblem(again, 409, "outcome-unknown");
    assert.equal(backup.calls(key).length, 0);
  });

  test("1d. a demo-kind provider as the fallback answers with the route's model", async () => {
    const key = newKey();
    primary.script(key, ["503"]);
    const { res, text } = await post(key, chat(`${key} demo fallback`, { model: "demo-second" }));
    assert.equal(res.status, 200, text);
    assert.match(JSON.parse(text).id, /^chatcmpl-demo-/);
    assert.equal(primary.calls(key).length, 1);
    assert.equal(primary.calls(key)[0].model, "demo-second", "no model in the route: the request's model, unchanged");
    const { body: job } = await getJob(key);
    assert.deepEqual(audit(job, ["provider", "model", "outcome"]), [
      { provider: "primary", model: "demo-second", outcome: "failed" },
      { provider: "builtin", model: "demo", outcome: "succeeded" },
    ]);
  });

  test("2a. hedge, reverse-order finish: the backup (hedged at 1 s, 500 ms) wins at ~1.5 s; the primary (3 s) is audited lost_race, never replayed", async () => {
    const key = newKey();
    primary.script(key, ["delay:3000"]);
    backup.script(key, ["delay:500"]);
    const started = Date.now();
    const first = await post(key, chat(`${key} hedge reverse`, { model: "hedged" }));
    const elapsed = Date.now() - started;
    assert.equal(first.res.status, 200, first.text);
    assert.equal(JSON.parse(first.text).id, "chatcmpl-backup", "the first final answer wins");
    assert.ok(elapsed >= 1400 && elapsed < 2900, `answered after ${elapsed} ms (hedge at 1000 + 500; the primary would be 3000)`);
    assert.deepEqual(callsPerProvider(stack, key), { primary: 1, backup: 1, third: 0, claude: 0 });
    const gap = backup.calls(key)[0].at - primary.calls(key)[0].at;
    assert.ok(gap >= 900 && gap < 2000, `the hedge started ${gap} ms after the first attempt`);
    assert.equal(primary.calls(key)[0].model, "primary-hedged");
    assert.equal(backup.calls(key)[0].model, "backup-hedged");

    // The primary answers at 3 s: audited with its usage, not used.
    const job = await waitFor("the primary's attempt audited lost_race", async () => {
      const { body } = await getJob(key);
      const late = body.attempts?.find((a) => a.provider === "primary");
      return { ok: late?.outcome === "lost_race" && late.usage, value: body };
    });
    const won = job.attempts.find((a) => a.provider === "backup");
    const lost = job.attempts.find((a) => a.provider === "primary");
    assert.equal(job.state, "completed");
    assert.equal(job.attempts.length, 2);
    assert.equal(won.outcome, "succeeded");
    assert.equal(job.completed_by, won.number, "the job's result is the backup's");
    assert.deepEqual(lost.usage, FAKE_USAGE, "the losing answer's tokens are audited");
    assert.equal(lost.status, 200);

    const again = await post(key, chat(`${key} hedge reverse`, { model: "hedged" }));
    assert.equal(again.res.status, 200);
    assert.equal(again.res.headers.get("idempotent-replayed"), "true");
    assert.equal(again.text, first.text, "still the backup's body after the primary answered");
    assert.equal((await getJob(key)).body.completed_by, won.number, "the result never changes");
    assert.deepEqual(callsPerProvider(stack, key), { primary: 1, backup: 1, third: 0, claude: 0 });
  });

  test("2b. hedge, mirror: the primary (1.3 s) wins; the backup (hedged at 1 s, answers 2 s later) is audited lost_race", async () => {
    const key = newKey();
    primary.script(key, ["delay:1300"]);
    backup.script(key, ["delay:2000"]);
    const started = Date.now();
    const first = await post(key, chat(`${key} hedge mirror`, { model: "hedged" }));
    const elapsed = Date.now() - started;
    assert.equal(first.res.status, 200, first.text);
    assert.equal(JSON.parse(first.text).id, "chatcmpl-primary");
    assert.ok(elapsed >= 1200 && elapsed < 2800, `answered after ${elapsed} ms (the backup would be ~3000)`);
    assert.equal(backup.calls(key).length, 1, "the hedge started at 1 s, before the primary answered");

    const job = await waitFor("the backup's attempt audited lost_race", async () => {
      const { body } = await getJob(key);
      const late = body.attempts?.find((a) => a.provider === "backup");
      return { ok: late?.outcome === "lost_race" && late.usage, value: body };
    });
    const won = job.attempts.find((a) => a.provider === "primary");
    assert.equal(won.outcome, "succeeded");
    assert.equal(job.completed_by, won.number);
    assert.deepEqual(job.attempts.find((a) => a.provider === "backup").usage, FAKE_USAGE);
    const again = await post(key, chat(`${key} hedge mirror`, { model: "hedged" }));
    assert.equal(again.text, first.text);
    assert.deepEqual(callsPerProvider(stack, key), { primary: 1, backup: 1, third: 0, claude: 0 });
  });

  test("2c. a streamed request on a hedged route is never hedged, even when its first byte comes after the hedge delay", async () => {
    const key = newKey();
    primary.script(key, ["sse:3:50:1500"]);
    const { res, text } = await post(key, chat(`${key} hedge stream`, { model: "hedged", stream: true }));
    assert.equal(res.status, 200, text);
    assert.ok(text.endsWith("data: [DONE]\n\n"), text);
    assert.deepEqual(callsPerProvider(stack, key), { primary: 1, backup: 0, third: 0, claude: 0 });
  });

  test("2d. a hedge's fast permanent error (a fallback's revoked key) does not beat the primary's good answer still coming", async () => {
    const key = newKey();
    primary.script(key, ["delay:1600"]);
    backup.script(key, ["401"]);
    const first = await post(key, chat(`${key} hedge fast 401`, { model: "hedged" }));
    assert.equal(first.res.status, 200, first.text);
    assert.equal(JSON.parse(first.text).id, "chatcmpl-primary", "the good answer wins");
    assert.deepEqual(callsPerProvider(stack, key), { primary: 1, backup: 1, third: 0, claude: 0 });
    const { body: job } = await getJob(key);
    assert.equal(job.completed_by, 1);
    const [a, b] = audit(job, ["provider", "outcome", "status"]);
    assert.deepEqual(a, { provider: "primary", outcome: "succeeded", status: 200 });
    assert.equal(b.provider, "backup");
    assert.equal(b.status, 401);
    assert.ok(["lost_race", "discarded"].includes(b.outcome), b.outcome);
    const again = await post(key, chat(`${key} hedge fast 401`, { model: "hedged" }));
    assert.equal(again.text, first.text, "the 401 is never replayed");
  });

  test("2e. a body that is not a JSON object on a route that renames the model is forwarded as it is (no crash)", async () => {
    for (const raw of ["[1]", '"text"', "5"]) {
      const key = newKey();
      const { res, text } = await post(key, null, { raw });
      // No model: the `*` route is not configured here, so no route serves it.
      assertProblem({ res, text }, 400, "no-route");
    }
    // The gateway still answers (the Ledgers are alive).
    const key = newKey();
    const { res } = await post(key, chat(`${key} after odd bodies`));
    assert.equal(res.status, 200);
  });

  test("2f. a hedge's loser is audited once with its end, status and usage, and the jobs index and cost view count its tokens", async () => {
    const sinceMs = Date.now();
    const key = newKey();
    primary.script(key, ["delay:2500"]);
    backup.script(key, ["delay:200"]);
    const first = await post(key, chat(`${key} hedge index`, { model: "hedged" }));
    assert.equal(JSON.parse(first.text).id, "chatcmpl-backup", first.text);
    await assertLoserAudited(stack, key, "primary", { status: 200, usage: FAKE_USAGE });
    // Both calls were paid for: the job's row counts both, once.
    const both = 2 * FAKE_USAGE.total_tokens;
    const row = await indexedRow(stack, key, sinceMs, (r) => r.tokens === both);
    assert.deepEqual([row.state, row.attempts, row.tokens], ["completed", 2, both]);
    const { body: costs } = await stack.admin(`/onejob/v1/admin/costs?tenant=dev&since_ms=${sinceMs}`);
    assert.deepEqual(costs.by_model.map((m) => [m.model, m.jobs, m.tokens]), [["hedged", 1, both]]);
    assert.deepEqual(callsPerProvider(stack, key), { primary: 1, backup: 1, third: 0, claude: 0 });
  });

  test("2g. a hedge's loser that never answers is audited when its timeout (10 s) ends it: lost_race, no status, no usage", async () => {
    const key = newKey();
    primary.script(key, ["hang"]);
    backup.script(key, ["ok"]);
    const first = await post(key, chat(`${key} hedge hang`, { model: "hedged" }));
    assert.equal(JSON.parse(first.text).id, "chatcmpl-backup", first.text);
    const job = await assertLoserAudited(stack, key, "primary", { status: null, usage: null });
    assert.equal(job.attempts.find((a) => a.provider === "primary").error_class, "timeout_after_send");
    assert.deepEqual(callsPerProvider(stack, key), { primary: 1, backup: 1, third: 0, claude: 0 });
  });

  test("1e. a backoff is owed to the provider that asked for it: after a 429 with Retry-After: 2, no attempt goes back to it within 2 s", async () => {
    const key = newKey();
    primary.script(key, ["429:2", "ok"]);
    backup.script(key, ["503*"]);
    const started = Date.now();
    const { res, text } = await post(key, chat(`${key} owed backoff`));
    // The backup (owed only its short backoff) takes every other attempt; the cap ends the job first.
    assert.equal(res.status, 503, text);
    assert.deepEqual(callsPerProvider(stack, key), { primary: 1, backup: MAX_ATTEMPTS - 1, third: 0, claude: 0 });
    const [b1] = backup.calls(key);
    assert.ok(b1.at - primary.calls(key)[0].at < 1000, "the fallback is called at once, not after the primary's Retry-After");
    assert.ok(Date.now() - started < 2000, "the job did not wait out the primary's Retry-After for its other provider");
    const { body: job } = await getJob(key);
    assert.equal(job.state, "dead");
  });

  test("3f. provider check: an admin of every tenant runs a route's samples at each provider and learns which are safe fallbacks", async () => {
    const check = (token) =>
      fetch(`${stack.url}/onejob/v1/providers/check`, {
        method: "POST",
        headers: { Authorization: `Bearer ${token}`, "Content-Type": "application/json" },
        body: JSON.stringify({ model: "contract", samples: [chat("sample one"), chat("sample two")] }),
      });
    const asTenant = await check(DEV_KEY);
    assertProblem({ res: asTenant, text: await asTenant.text() }, 401, "unauthorized");
    primary.scriptAll([`${contentFault({ category: "billing" })}*`]);
    backup.scriptAll([`${contentFault("Sure! It is billing.")}*`]);
    try {
      const res = await check("onejob-dev-admin-key");
      const report = JSON.parse(await res.text());
      assert.equal(res.status, 200, JSON.stringify(report));
      assert.equal(report.contract, true);
      const byName = Object.fromEntries(report.providers.map((p) => [p.name, p]));
      assert.equal(byName.primary.safe, true, JSON.stringify(byName.primary));
      assert.equal(byName.backup.safe, false);
      assert.deepEqual(byName.backup.results.map((r) => r.contract), ["the answer's content is not JSON", "the answer's content is not JSON"]);
      assert.ok(!JSON.stringify(report).includes("127.0.0.1"), "no base URL in the report");
    } finally {
      primary.scriptAll([]);
      backup.scriptAll([]);
    }
  });

  test("3a. output contract: answers lacking a required key are not accepted; with the cap spent the job is dead and replays 502 output-contract", async () => {
    const key = newKey();
    primary.script(key, ["503*"]);
    backup.script(key, [`${contentFault({ priority: "high" })}*`]);
    const first = await post(key, chat(`${key} contract`, { model: "contract" }));
    const problem = assertProblem(first, 502, "output-contract");
    assert.ok(problem.detail.length > 0);
    assert.equal(first.res.headers.get("onejob-job-state"), "dead");
    assert.equal(first.res.headers.get("x-should-retry"), "false", "dead is final");
    // p, b, p, b: the route wraps around within the attempt cap.
    assert.deepEqual(callsPerProvider(stack, key), { primary: 2, backup: 2, third: 0, claude: 0 });
    const { body: job } = await getJob(key);
    assert.equal(job.state, "dead");
    assert.deepEqual(audit(job, ["provider", "outcome", "status", "error_class"]), [
      { provider: "primary", outcome: "failed", status: 503, error_class: "unavailable" },
      { provider: "backup", outcome: "failed", status: 200, error_class: "contract" },
      { provider: "primary", outcome: "failed", status: 503, error_class: "unavailable" },
      { provider: "backup", outcome: "failed", status: 200, error_class: "contract" },
    ]);
    const again = await post(key, chat(`${key} contract`, { model: "contract" }));
    assert.equal(again.res.status, 502);
    assert.equal(again.text, first.text);
    assert.equal(again.res.headers.get("idempotent-replayed"), "true");
    assert.deepEqual(callsPerProvider(stack, key), { primary: 2, backup: 2, third: 0, claude: 0 }, "no new call");
  });

  test("3b. output contract: the third provider's answer that meets it wins", async () => {
    const key = newKey();
    const good = { category: "billing", note: "extra keys are fine" };
    primary.script(key, ["503"]);
    backup.script(key, [contentFault({ priority: "high" })]);
    third.script(key, [contentFault(good)]);
    const first = await post(key, chat(`${key} contract 3`, { model: "contract-3" }));
    assert.equal(first.res.status, 200, first.text);
    const answer = JSON.parse(first.text);
    assert.equal(answer.id, "chatcmpl-third");
    assert.deepEqual(JSON.parse(answer.choices[0].message.content), good);
    assert.deepEqual(callsPerProvider(stack, key), { primary: 1, backup: 1, third: 1, claude: 0 });
    const { body: job } = await getJob(key);
    assert.equal(job.completed_by, 3);
    assert.deepEqual(audit(job, ["provider", "outcome", "error_class"]), [
      { provider: "primary", outcome: "failed", error_class: "unavailable" },
      { provider: "backup", outcome: "failed", error_class: "contract" },
      { provider: "third", outcome: "succeeded", error_class: job.attempts[2]?.error_class },
    ]);
    assert.notEqual(job.attempts[2].error_class, "contract");
  });

  test("3c. output contract: a plain or ```json-fenced answer that meets it is accepted at once; prose is not", async () => {
    const cases = [
      ['{"category":"bug"}', true],
      ['\n```json\n{"category": "bug", "priority": 2}\n```\n', true],
      ["The category is bug.", false],
      ['```json\n{"priority": 2}\n```', false],
      ['["category"]', false],
    ];
    for (const [content, accepted] of cases) {
      const key = newKey();
      primary.script(key, [contentFault(content)]);
      backup.script(key, [contentFault({ category: "other" })]);
      const { res, text } = await post(key, chat(`${key} contract fenced`, { model: "contract" }));
      assert.equal(res.status, 200, `${content}: ${text}`);
      assert.equal(JSON.parse(text).id, accepted ? "chatcmpl-primary" : "chatcmpl-backup", content);
      assert.deepEqual(callsPerProvider(stack, key), { primary: 1, backup: accepted ? 0 : 1, third: 0, claude: 0 }, content);
      if (!accepted) assert.equal((await getJob(key)).body.attempts[0].error_class, "contract", content);
    }
  });

  test("3d. output contract by JSON Schema: type, properties, required, items, enum, const, additionalProperties, lengths, bounds", async () => {
    const cases = [
      [{ category: "billing", priority: 2 }, true],
      [{ category: "bug", priority: 5, summary: "x", tags: ["a", "b"], version: 1 }, true],
      [{ category: "sales", priority: 2 }, false, "enum"],
      [{ category: "bug" }, false, "required"],
      [{ category: "bug", priority: 1, extra: true }, false, "additionalProperties"],
      [{ category: "bug", priority: 0 }, false, "minimum"],
      [{ category: "bug", priority: 6 }, false, "maximum"],
      [{ category: "bug", priority: "2" }, false, "type"],
      [{ category: "bug", priority: 2.5 }, false, "integer"],
      [{ category: "bug", priority: 2, summary: "" }, false, "minLength"],
      [{ category: "bug", priority: 2, summary: "x".repeat(21) }, false, "maxLength"],
      [{ category: "bug", priority: 2, tags: [1] }, false, "items"],
      [{ category: "bug", priority: 2, version: 2 }, false, "const"],
      [[{ category: "bug", priority: 2 }], false, "not an object"],
    ];
    for (const [content, accepted, rule = "valid"] of cases) {
      const key = newKey();
      primary.script(key, [contentFault(content)]);
      backup.script(key, [contentFault({ category: "other", priority: 3 })]);
      const { res, text } = await post(key, chat(`${key} schema`, { model: "schema" }));
      assert.equal(res.status, 200, `${rule}: ${text}`);
      assert.equal(JSON.parse(text).id, accepted ? "chatcmpl-primary" : "chatcmpl-backup", `${rule}: ${JSON.stringify(content)}`);
      assert.equal(backup.calls(key).length, accepted ? 0 : 1, rule);
      if (!accepted) assert.equal((await getJob(key)).body.attempts[0].error_class, "contract", rule);
    }
  });

  test("3e. output contract on Anthropic answers: the text block is parsed; a failing answer is retried", async () => {
    const key = newKey();
    claude.script(key, [contentFault({ priority: 1 }), contentFault({ category: "bug" })]);
    const { res, text } = await postMessages(key, message(`${key} contract`, { model: "claude-contract" }));
    assert.equal(res.status, 200, text);
    assert.deepEqual(JSON.parse(JSON.parse(text).content[0].text), { category: "bug" });
    assert.equal(claude.calls(key).length, 2);
    const { body: job } = await getJob(key);
    assert.deepEqual(audit(job, ["provider", "outcome", "error_class"]), [
      { provider: "claude", outcome: "failed", error_class: "contract" },
      { provider: "claude", outcome: "succeeded", error_class: job.attempts[1]?.error_class },
    ]);
  });

  /** 100 concurrent duplicates of a new key on `model`: asserts one job, one fresh answer, 100 identical bodies. */
  async function storm(model, scripts, note) {
    const key = newKey();
    for (const [name, faults] of Object.entries(scripts)) stack.fakes[name].script(key, faults);
    const results = await Promise.all(Array.from({ length: 100 }, () => post(key, chat(`${key} ${note}`, { model }))));
    const odd = results.filter((r) => r.res.status !== 200);
    assert.equal(odd.length, 0, `${note}: ${odd.length} of 100 not 200, e.g. ${odd[0]?.res.status} ${odd[0]?.text}`);
    assert.equal(new Set(results.map((r) => r.text)).size, 1, "100 identical bodies");
    assert.equal(results.filter((r) => r.res.headers.get("idempotent-replayed") === null).length, 1, "one fresh answer");
    return { key, text: results[0].text };
  }

  // A few rounds each: the duplicates' race with the first request is not
  // the same every time.
  test("5. 100 concurrent duplicates of one key during a hedge: one job, at most 2 upstream calls, 100 identical bodies (3 rounds)", async () => {
    for (let round = 0; round < 3; round++) {
      const { key, text } = await storm("hedged", { primary: ["delay:2000"], backup: ["delay:300"] }, `hedge storm ${round}`);
      assert.equal(JSON.parse(text).id, "chatcmpl-backup", "the winner only");
      const calls = callsPerProvider(stack, key);
      assert.ok(calls.primary + calls.backup <= 2 && calls.primary <= 1 && calls.backup <= 1, JSON.stringify(calls));
      const job = await waitFor("the primary audited lost_race", async () => {
        const { body } = await getJob(key);
        return { ok: body.attempts?.some((a) => a.provider === "primary" && a.outcome === "lost_race"), value: body };
      });
      assert.equal(job.attempts.length, 2);
      assert.equal(job.attempts.find((a) => a.number === job.completed_by).provider, "backup");
      assert.deepEqual(callsPerProvider(stack, key), { primary: 1, backup: 1, third: 0, claude: 0 });
    }
  });

  test("5b. 100 concurrent duplicates on a failover route (no hedge): one upstream call, 100 identical bodies (4 rounds)", async () => {
    for (let round = 0; round < 4; round++) {
      const { key, text } = await storm("gpt-test", { primary: ["delay:800"] }, `failover storm ${round}`);
      assert.equal(JSON.parse(text).id, "chatcmpl-primary");
      assert.deepEqual(callsPerProvider(stack, key), { primary: 1, backup: 0, third: 0, claude: 0 });
    }
  });

  test("6a. a model with no route (ROUTES without *): 400 no-route, and no provider is called", async () => {
    const key = newKey();
    const before = Object.values(stack.fakes).map((f) => f.allCalls().length);
    const result = await post(key, chat(`${key} unrouted`, { model: "unrouted-model" }));
    assertProblem(result, 400, "no-route");
    assert.deepEqual(Object.values(stack.fakes).map((f) => f.allCalls().length), before);
  });

  test("7a. Anthropic: POST /v1/messages with the tenant key as x-api-key; the provider gets its own key, never the tenant's; a duplicate replays", async () => {
    const key = newKey();
    const body = message(`${key} hello claude`);
    const first = await postMessages(key, body);
    assert.equal(first.res.status, 200, first.text);
    const answer = JSON.parse(first.text);
    assert.equal(answer.type, "message");
    assert.equal(answer.id, "msg_claude");
    assert.match(answer.content[0].text, /^echo of \d+ bytes$/);
    assert.equal(claude.calls(key).length, 1);
    const [call] = claude.calls(key);
    assert.equal(new URL(call.path, "http://x").pathname, "/v1/messages", "{base_url}/messages");
    assert.equal(call.headers["x-api-key"], CLAUDE_SECRET, "the provider's key, from the var api_key names");
    assert.equal(call.headers["anthropic-version"], ANTHROPIC_VERSION, "passed through");
    assert.equal(call.headers.authorization, undefined);
    assert.ok(Object.values(call.headers).every((v) => !String(v).includes(DEV_KEY)), "the tenant key never reaches the provider");
    assert.equal(call.model, "claude-test");
    assert.deepEqual(JSON.parse(call.body).messages, body.messages);

    const again = await postMessages(key, body);
    assert.equal(again.res.status, 200);
    assert.equal(again.res.headers.get("idempotent-replayed"), "true");
    assert.equal(again.text, first.text);
    assert.equal(claude.calls(key).length, 1, "no new call");

    const { body: job } = await getJob(key);
    assert.deepEqual(audit(job, ["provider", "model", "outcome", "status"]), [{ provider: "claude", model: "claude-test", outcome: "succeeded", status: 200 }]);
    assert.deepEqual(job.attempts[0].usage, { prompt_tokens: 11, completion_tokens: 7, total_tokens: 18 }, "usage from input_tokens/output_tokens");

    // The tenant key as a Bearer token works too; a wrong x-api-key does not.
    const bearerKey = newKey();
    const bearer = await postMessages(bearerKey, message(`${bearerKey} bearer`), { token: DEV_KEY, headers: { "x-api-key": undefined } });
    assert.equal(bearer.res.status, 200, bearer.text);
    assert.equal(claude.calls(bearerKey)[0].headers["x-api-key"], CLAUDE_SECRET);
    const wrongKey = newKey();
    assertProblem(await postMessages(wrongKey, message(`${wrongKey} wrong`), { headers: { "x-api-key": "not-a-tenant-key" } }), 401, "unauthorized");
    assert.equal(claude.calls(wrongKey).length, 0);
  });

  test("7b. Anthropic: 529 overloaded then ok: retried, one job, two calls", async () => {
    const key = newKey();
    claude.script(key, ["529", "ok"]);
    const { res, text } = await postMessages(key, message(`${key} overloaded`));
    assert.equal(res.status, 200, text);
    assert.equal(JSON.parse(text).type, "message");
    assert.equal(claude.calls(key).length, 2);
    const { body: job } = await getJob(key);
    assert.deepEqual(audit(job, ["provider", "outcome", "status", "error_class"]), [
      { provider: "claude", outcome: "failed", status: 529, error_class: "overloaded" },
      { provider: "claude", outcome: "succeeded", status: 200, error_class: job.attempts[1]?.error_class },
    ]);
  });

  test("7c. Anthropic: 422 is the answer: replayed, never retried", async () => {
    const key = newKey();
    claude.script(key, ["422*"]);
    const first = await postMessages(key, message(`${key} invalid`));
    assert.equal(first.res.status, 422, first.text);
    assert.equal(JSON.parse(first.text).error.type, "invalid_request_error", "the provider's error body");
    const again = await postMessages(key, message(`${key} invalid`));
    assert.equal(again.res.status, 422);
    assert.equal(again.text, first.text);
    assert.equal(again.res.headers.get("idempotent-replayed"), "true");
    assert.equal(claude.calls(key).length, 1);
    assert.deepEqual(audit((await getJob(key)).body, ["provider", "outcome", "status"]), [{ provider: "claude", outcome: "rejected", status: 422 }]);
  });

  test("7d. Anthropic streaming: the Messages SSE passes through, is replayed byte for byte, and its usage is read", async () => {
    const key = newKey();
    claude.script(key, ["sse:8:20"]);
    const first = await postMessages(key, message(`${key} stream`, { stream: true }));
    assert.equal(first.res.status, 200, first.text);
    assert.match(first.res.headers.get("content-type"), /^text\/event-stream/);
    const events = sseEvents(first.text);
    assert.equal(events[0].event, "message_start");
    assert.equal(events.at(-1).event, "message_stop");
    const text = events.filter((e) => e.event === "content_block_delta").map((e) => e.data.delta.text).join("");
    assert.equal(text, Array.from({ length: 8 }, (_, i) => `token${i} `).join(""));
    const again = await postMessages(key, message(`${key} stream`, { stream: true }));
    assert.equal(again.text, first.text);
    assert.equal(claude.calls(key).length, 1);
    const { body: job } = await getJob(key);
    assert.equal(job.state, "completed");
    assert.equal(job.attempts[0].outcome, "succeeded");
    assert.deepEqual(job.attempts[0].usage, { prompt_tokens: 11, completion_tokens: 8, total_tokens: 19 });
  });

  test("7e. Anthropic streaming: an `event: error` is the stream's error (kept, not retried)", async () => {
    const key = newKey();
    claude.script(key, ["sse-error:3:20"]);
    const first = await postMessages(key, message(`${key} stream error`, { stream: true }));
    assert.equal(first.res.status, 200, first.text);
    assert.ok(sseEvents(first.text).some((e) => e.event === "error"), first.text);
    assert.equal(claude.calls(key).length, 1);
    const { body: job } = await getJob(key);
    assert.equal(job.attempts.length, 1);
    assert.equal(job.attempts[0].error_class, "stream_error");
  });

  test("UPSTREAM is ignored when PROVIDERS is set", () => {
    assert.equal(stack.llm.allCalls().length, 0);
  });
});

describe("providers: without ROUTES, `*` is every provider in order", () => {
  let stack;
  before(async () => {
    stack = await startStack({
      providers: [{ name: "p1" }, { name: "p2" }, { name: "p3" }],
      vars: { ...BASE_VARS, BREAKER_FAILURES: "0" },
    });
  });
  after(async () => {
    await stack?.stop();
  });

  test("6b. p1 and p2 fail: p3 answers, each with the request's model unchanged; p1 ok: only p1; the order wraps around", async () => {
    const { p1, p2, p3 } = stack.fakes;
    const key = newKey();
    p1.script(key, ["503"]);
    p2.script(key, ["503"]);
    const { res, text } = await stack.post(key, chat(`${key} in order`, { model: "any-model" }));
    assert.equal(res.status, 200, text);
    assert.equal(JSON.parse(text).id, "chatcmpl-p3");
    assert.deepEqual(callsPerProvider(stack, key), { p1: 1, p2: 1, p3: 1 });
    assert.deepEqual([p1, p2, p3].map((f) => f.calls(key)[0].model), ["any-model", "any-model", "any-model"]);
    assert.deepEqual(audit((await stack.getJob(key)).body, ["provider", "model", "outcome"]), [
      { provider: "p1", model: "any-model", outcome: "failed" },
      { provider: "p2", model: "any-model", outcome: "failed" },
      { provider: "p3", model: "any-model", outcome: "succeeded" },
    ]);

    const healthy = newKey();
    assert.equal((await stack.post(healthy, chat(`${healthy} first is fine`, { model: "other-model" }))).res.status, 200);
    assert.deepEqual(callsPerProvider(stack, healthy), { p1: 1, p2: 0, p3: 0 });

    const wrap = newKey();
    p1.script(wrap, ["503", "ok"]);
    p2.script(wrap, ["503"]);
    p3.script(wrap, ["503"]);
    const wrapped = await stack.post(wrap, chat(`${wrap} wrap around`));
    assert.equal(wrapped.res.status, 200, wrapped.text);
    assert.equal(JSON.parse(wrapped.text).id, "chatcmpl-p1");
    assert.deepEqual(audit((await stack.getJob(wrap)).body, ["provider", "outcome"]).map((a) => a.provider), ["p1", "p2", "p3", "p1"]);
  });
});

describe("providers: the circuit breaker", () => {
  const FAILURES = 3;
  const COOLDOWN_MS = 2000;
  let stack;
  before(async () => {
    stack = await startStack({
      providers: [{ name: "primary", key: PRIMARY_SECRET }, { name: "backup" }],
      vars: { ...BASE_VARS, BREAKER_FAILURES: String(FAILURES), BREAKER_COOLDOWN_MS: String(COOLDOWN_MS) },
    });
  });
  after(async () => {
    await stack?.stop();
  });

  test("4. the primary always 503: opened after 3 failures, skipped, one probe after the cool-down, closed by a successful probe", async () => {
    const { primary, backup } = stack.fakes;
    const post = (key, note) => stack.post(key, chat(`${key} ${note}`));
    primary.scriptAll(["503*"]);
    const outage = { from: primary.allCalls().length, jobs: 0 };

    // Three failing jobs: each fails over to the backup.
    for (let i = 0; i < FAILURES; i++) {
      const key = newKey();
      const { res, text } = await post(key, `failing ${i}`);
      outage.jobs++;
      assert.equal(res.status, 200, text);
      assert.deepEqual(callsPerProvider(stack, key), { primary: 1, backup: 1 }, `job ${i}`);
    }
    const openedAt = Date.now();
    let view = providersByName(await stack.getProviders(), [PRIMARY_SECRET]);
    assert.equal(view.primary.state, "open");
    assert.equal(view.primary.kind, "openai");
    assert.ok(view.primary.consecutive_failures >= FAILURES, JSON.stringify(view.primary));
    assertTransitions(view.primary.transitions, [["closed", "open"]]);
    assert.equal(view.backup.state, "closed");

    // Open: jobs go straight to the backup, one call each, none to the primary.
    for (let i = 0; i < 5; i++) {
      const key = newKey();
      const { res, text } = await post(key, `while open ${i}`);
      outage.jobs++;
      assert.equal(res.status, 200, text);
      assert.deepEqual(callsPerProvider(stack, key), { primary: 0, backup: 1 }, `open job ${i}`);
    }
    assert.ok(Date.now() - openedAt < COOLDOWN_MS, "the open-phase jobs ran inside the cool-down (test too slow otherwise)");

    // After the cool-down, concurrent jobs: exactly one probe; it fails (reopens).
    await sleep(COOLDOWN_MS + 400 - (Date.now() - openedAt));
    let primaryBefore = primary.allCalls().length;
    const failedProbe = await Promise.all(Array.from({ length: 10 }, (_, i) => newKey()).map(async (key, i) => ({ key, ...(await post(key, `probe batch ${i}`)) })));
    outage.jobs += failedProbe.length;
    assert.deepEqual(new Set(failedProbe.map((r) => r.res.status)), new Set([200]));
    assert.equal(primary.allCalls().length - primaryBefore, 1, "exactly one probe call");
    for (const { key } of failedProbe) assert.equal(backup.calls(key).length, 1);
    const reopenedAt = Date.now();
    view = providersByName(await stack.getProviders(), [PRIMARY_SECRET]);
    assert.equal(view.primary.state, "open", "a failed probe reopens");
    assertTransitions(view.primary.transitions, [["closed", "open"], ["open", "half_open"], ["half_open", "open"]]);

    // The primary recovers (slowly: the probe takes 600 ms, and the jobs
    // meanwhile skip it). Exactly one probe; it succeeds and closes the breaker.
    await sleep(COOLDOWN_MS + 400 - (Date.now() - reopenedAt));
    outage.calls = primary.allCalls().length - outage.from;
    primary.scriptAll(["delay:600*"]);
    primaryBefore = primary.allCalls().length;
    const goodProbe = await Promise.all(Array.from({ length: 10 }, (_, i) => newKey()).map(async (key, i) => ({ key, ...(await post(key, `recovery batch ${i}`)) })));
    assert.deepEqual(new Set(goodProbe.map((r) => r.res.status)), new Set([200]));
    assert.equal(primary.allCalls().length - primaryBefore, 1, "exactly one probe call");
    const probe = goodProbe.filter(({ key }) => primary.calls(key).length === 1);
    assert.equal(probe.length, 1);
    assert.equal(JSON.parse(probe[0].text).id, "chatcmpl-primary", "the probe's job got the primary's answer");
    assert.equal(backup.calls(probe[0].key).length, 0);
    view = providersByName(await stack.getProviders(), [PRIMARY_SECRET]);
    assert.equal(view.primary.state, "closed");
    assert.equal(view.primary.consecutive_failures, 0);
    assertTransitions(view.primary.transitions, [["closed", "open"], ["open", "half_open"], ["half_open", "open"], ["open", "half_open"], ["half_open", "closed"]]);

    // Closed: the next job goes to the primary.
    primary.scriptAll([]);
    const next = newKey();
    const { res, text } = await post(next, "after recovery");
    assert.equal(res.status, 200, text);
    assert.equal(JSON.parse(text).id, "chatcmpl-primary");
    assert.deepEqual(callsPerProvider(stack, next), { primary: 1, backup: 0 });
    console.log(`breaker: the dead primary got ${outage.calls} calls during the outage for ${outage.jobs} jobs (${FAILURES} to open it, 1 failed probe)`);
  });
});

describe("providers: every provider of the route open", () => {
  const COOLDOWN_MS = 30_000;
  let stack;
  before(async () => {
    stack = await startStack({
      providers: [{ name: "primary" }, { name: "backup" }],
      vars: { ...BASE_VARS, BREAKER_FAILURES: "2", BREAKER_COOLDOWN_MS: String(COOLDOWN_MS) },
    });
  });
  after(async () => {
    await stack?.stop();
  });

  test("4b. 503 no-healthy-provider with Retry-After and x-should-retry: true, and no upstream call", async () => {
    const { primary, backup } = stack.fakes;
    primary.scriptAll(["503*"]);
    backup.scriptAll(["503*"]);
    let refused;
    for (let i = 0; i < 4 && !refused; i++) {
      const key = newKey();
      const result = await stack.post(key, chat(`${key} all down ${i}`));
      assert.equal(result.res.status, 503, result.text);
      const calls = callsPerProvider(stack, key);
      if (JSON.parse(result.text).type === "/onejob/problems/no-healthy-provider" && calls.primary + calls.backup === 0) refused = { key, result };
      else assert.ok(calls.primary + calls.backup <= MAX_ATTEMPTS, JSON.stringify(calls));
    }
    assert.ok(refused, "with both breakers open, a new job is refused");
    const before = primary.allCalls().length + backup.allCalls().length;
    const key = newKey();
    const result = await stack.post(key, chat(`${key} all open`));
    assertProblem(result, 503, "no-healthy-provider");
    const retryAfter = Number(result.res.headers.get("retry-after"));
    assert.ok(Number.isInteger(retryAfter) && retryAfter >= 1 && retryAfter <= COOLDOWN_MS / 1000 + 1, `Retry-After ${result.res.headers.get("retry-after")}`);
    assert.equal(result.res.headers.get("x-should-retry"), "true");
    assert.equal(primary.allCalls().length + backup.allCalls().length, before, "no upstream call");
    const view = providersByName(await stack.getProviders());
    assert.deepEqual([view.primary.state, view.backup.state], ["open", "open"]);
    const anonymous = await fetch(`${stack.url}/onejob/v1/providers`);
    assert.equal(anonymous.status, 401, "the providers view needs a tenant key");
  });
});

describe("providers: the built-in demo's hedged route (UPSTREAM=demo)", () => {
  let stack;
  before(async () => {
    stack = await startStack({ upstream: "demo" });
  });
  after(async () => {
    await stack?.stop();
  });

  test("8. demo-hedge: demo-slow (5 s) loses to the backup hedged at 300 ms; its answer lands, audited once with its usage; the cost view counts both calls", async () => {
    const sinceMs = Date.now();
    const key = newKey();
    const request = { model: "demo-hedge", messages: [{ role: "user", content: "I was charged twice this month" }] };
    const first = await stack.post(key, request);
    assert.equal(first.res.status, 200, first.text);
    const { body: raced } = await stack.getJob(key);
    const won = raced.attempts.find((a) => a.number === raced.completed_by);
    assert.deepEqual([won.provider, won.model, won.outcome], ["demo-backup", "demo", "succeeded"]);
    // The slow one answers the same triage to the same prompt: the same usage.
    const job = await assertLoserAudited(stack, key, "demo", { status: 200, usage: won.usage });
    assert.equal(job.attempts.find((a) => a.provider === "demo").model, "demo-slow");
    const both = 2 * won.usage.total_tokens;
    const row = await indexedRow(stack, key, sinceMs, (r) => r.tokens === both);
    assert.deepEqual([row.state, row.attempts, row.tokens], ["completed", 2, both]);
    const { body: costs } = await stack.admin(`/onejob/v1/admin/costs?tenant=dev&since_ms=${sinceMs}`);
    assert.deepEqual(costs.by_tenant.map((t) => [t.tenant, t.jobs, t.tokens]), [["dev", 1, both]]);
    // The replay is the winner's answer; the loser's is never used.
    const again = await stack.post(key, request);
    assert.equal(again.res.headers.get("idempotent-replayed"), "true");
    assert.equal(again.text, first.text);
  });
});
