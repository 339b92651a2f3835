// Background jobs on Cloudflare Queues (issue 9): `Prefer: respond-async`
// answers 202 and the worker's own queue consumer runs the job through its
// Ledger, retrying transient failures with the queue's delay; a send that
// fails is resent by the Ledger's outbox alarm; a job that exhausts its
// attempts is dead and gets a dead-letter entry (D1) an admin can list and
// replay; an unknown job can be resolved by an admin. The worker runs under
// `wrangler dev` (Queues, D1 and Durable Objects run locally); the provider
// is a fake LLM over real HTTP, so every test counts the calls it got.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";

import {
  DEV_ADMIN_KEY,
  DEV_KEY,
  RESPOND_ASYNC,
  TENANT_B_KEY,
  adminKeysVar,
  assertProblem,
  chat,
  newKey,
  sha256,
  sleep,
  startStack,
  waitFor,
} from "../support/harness.mjs";

/** An admin of tenant-b only (ADMIN_KEYS of the admin stack). */
const ACME_KEY = "acme-ops-admin-key";
const UPSTREAM_SECRET = "sk-upstream-background-secret";
/** What a message takes to reach the consumer at worst (wrangler dev batches). */
const DELIVERY_MS = 30_000;
/** How long to keep watching for a stray delivery that should have no effect. */
const SETTLE_MS = 3000;
const TERMINAL = ["completed", "dead", "interrupted", "cancelled"];

const jobPath = (key) => `/onejob/v1/jobs/${encodeURIComponent(key)}`;
const enqueuePath = (tenant, key) => `/onejob/v1/admin/jobs/${encodeURIComponent(tenant)}/${encodeURIComponent(key)}/enqueue`;
const DEAD_LETTERS = "/onejob/v1/admin/dead-letters";
const REPLAY = "/onejob/v1/admin/dead-letters/replay";
const RESOLVE = "/onejob/v1/admin/jobs/resolve";

/** Asserts a respond-async 202 for `key` (headers and the job view as its body); returns the view. */
function assertAccepted({ res, text }, key) {
  assert.equal(res.status, 202, text);
  assert.equal(res.headers.get("location"), jobPath(key));
  assert.equal(res.headers.get("preference-applied"), "respond-async");
  const retryAfter = res.headers.get("retry-after");
  assert.match(retryAfter ?? "", /^\d+$/, `Retry-After in whole seconds, got ${retryAfter}`);
  assert.ok(Number(retryAfter) >= 1, `Retry-After ${retryAfter}`);
  assert.match(res.headers.get("content-type") ?? "", /^application\/json/);
  const view = JSON.parse(text);
  assert.equal(view.key, key);
  assert.equal(view.background, true, text);
  assert.ok(!TERMINAL.includes(view.state), `a queued or running job: ${view.state}`);
  assert.equal(res.headers.get("onejob-job-state"), view.state);
  return view;
}

/** Asserts a duplicate POST was answered with the stored result. */
function assertReplayed({ res, text }, status = 200) {
  assert.equal(res.status, status, text);
  assert.equal(res.headers.get("idempotent-replayed"), "true", text);
}

const outcomes = (job) => job.attempts.map((a) => a.outcome);
/** A replay's `replayed` or `skipped` list as its jobs' tenants and keys (other fields, like `user` or `reason`, aside). */
const jobsOf = (list) => list.map(({ tenant, key }) => ({ tenant, key }));

describe("background jobs: enqueue and consumer dedup, queue retries", () => {
  let stack;
  let llm;

  before(async () => {
    stack = await startStack({ vars: { MAX_ATTEMPTS: "4", BACKOFF_BASE_MS: "200", BACKOFF_CAP_MS: "1000", RESULT_CACHE: "off" } });
    ({ llm } = stack);
  });

  after(async () => {
    await stack?.stop();
  });

  test("0. without Prefer: respond-async a keyed request is answered as before (200, no background job)", async () => {
    const key = newKey();
    const first = await stack.post(key, chat(`${key} in the foreground`));
    assert.equal(first.res.status, 200, first.text);
    assert.equal(first.res.headers.get("preference-applied"), null);
    const { headers, body: job } = await stack.getJob(key);
    assert.equal(job.state, "completed");
    assert.notEqual(job.background, true, "not a background job");
    assert.equal(headers.get("retry-after"), null, "a finished job has no Retry-After");
    assert.equal(llm.calls(key).length, 1);
  });

  test("1. enqueue dedup: 100 concurrent respond-async duplicates → all 202, one message, one upstream call; the result is replayed", { timeout: 120_000 }, async () => {
    const key = newKey();
    llm.script(key, ["delay:5000"]); // every duplicate arrives while the job is queued or running
    const body = chat(`${key} in the background`);
    const answers = await Promise.all(Array.from({ length: 100 }, () => stack.post(key, body, { headers: RESPOND_ASYNC })));
    const statuses = answers.map((a) => a.res.status);
    assert.deepEqual(statuses, Array(100).fill(202), `statuses: ${JSON.stringify(statuses.filter((s) => s !== 202))}`);
    for (const answer of answers) assertAccepted(answer, key);

    const running = await stack.getJob(key);
    assert.equal(running.status, 200);
    if (!TERMINAL.includes(running.body.state)) {
      assert.match(running.headers.get("retry-after") ?? "", /^\d+$/, "a job still running carries Retry-After");
    }

    const job = await stack.waitForJob(key, (j) => j.state === "completed", { timeoutMs: DELIVERY_MS + 10_000 });
    assert.equal(job.background, true);
    assert.equal(job.enqueued, 1, "one queue message for 100 duplicates");
    assert.deepEqual(outcomes(job), ["succeeded"]);
    assert.equal(job.completed_by, 1);
    assert.equal(llm.calls(key).length, 1, "one upstream call");
    const done = await stack.getJob(key);
    assert.equal(done.headers.get("retry-after"), null, "a finished job has no Retry-After");

    const replay = await stack.post(key, body);
    assertReplayed(replay);
    assert.equal(JSON.parse(replay.text).id, "chatcmpl-fake");
    const replayAsync = await stack.post(key, body, { headers: RESPOND_ASYNC });
    assertReplayed(replayAsync);
    assert.equal(replayAsync.text, replay.text, "the same stored result, whatever the Prefer header");
    await sleep(SETTLE_MS);
    assert.equal(llm.calls(key).length, 1, "no new upstream call");
    assert.equal((await stack.getJob(key)).body.enqueued, 1, "no new queue message");
  });

  test("2. consumer dedup: the job's message delivered 5 more times after it finished, and while it runs → one upstream call", { timeout: 180_000 }, async () => {
    const kick = (key) => stack.admin(enqueuePath("dev", key), { method: "POST" });

    // After it finished.
    const finished = newKey();
    assertAccepted(await stack.post(finished, chat(`${finished} kicked when done`), { headers: RESPOND_ASYNC }), finished);
    const done = await stack.waitForJob(finished, (j) => j.state === "completed", { timeoutMs: DELIVERY_MS });
    const kicks = await Promise.all(Array.from({ length: 5 }, () => kick(finished)));
    for (const k of kicks) {
      assert.equal(k.status, 202, k.text);
      assert.ok(Number.isInteger(k.body?.enqueued) && k.body.enqueued >= 2, k.text);
    }
    const kicked = await stack.waitForJob(finished, (j) => j.enqueued === 6, { timeoutMs: 10_000, what: "enqueued 1 + 5" });
    await sleep(SETTLE_MS + 2000); // the 5 deliveries
    const later = (await stack.getJob(finished)).body;
    assert.equal(llm.calls(finished).length, 1, "the finished job is never called again");
    assert.equal(later.state, "completed");
    assert.deepEqual(later.attempts, done.attempts, "no new attempt");
    assert.equal(kicked.enqueued, 6);

    // While it runs.
    const running = newKey();
    llm.script(running, ["delay:4000"]);
    assertAccepted(await stack.post(running, chat(`${running} kicked while running`), { headers: RESPOND_ASYNC }), running);
    await stack.waitForJob(running, (j) => j.state === "in_flight", { timeoutMs: DELIVERY_MS, what: "in flight" });
    const during = await Promise.all(Array.from({ length: 5 }, () => kick(running)));
    for (const k of during) assert.equal(k.status, 202, k.text);
    assert.equal((await stack.getJob(running)).body.state, "in_flight", "the kicks were sent while the call was running");
    const ran = await stack.waitForJob(running, (j) => j.state === "completed", { timeoutMs: DELIVERY_MS });
    await sleep(SETTLE_MS);
    assert.equal(llm.calls(running).length, 1, "one upstream call whatever was delivered");
    assert.deepEqual(outcomes((await stack.getJob(running)).body), ["succeeded"]);
    assert.equal((await stack.getJob(running)).body.enqueued, 6);
    assert.equal(ran.completed_by, 1);
  });

  test("3. retries through the queue: 503, 503, ok → completed by attempt 3, each at least ~1 s after the last; a 400 is not retried", { timeout: 180_000 }, async () => {
    const key = newKey();
    llm.script(key, ["503", "503", "ok"]);
    const body = chat(`${key} retried by the queue`);
    assertAccepted(await stack.post(key, body, { headers: RESPOND_ASYNC }), key);
    const job = await stack.waitForJob(key, (j) => j.state === "completed", { timeoutMs: 3 * DELIVERY_MS });
    const calls = llm.calls(key);
    assert.equal(calls.length, 3);
    for (let i = 1; i < calls.length; i++) {
      const gap = calls[i].at - calls[i - 1].at;
      assert.ok(gap >= 900, `attempt ${i + 1} came ${gap} ms after attempt ${i}: a queue delay is at least 1 s`);
    }
    assert.deepEqual(
      job.attempts.map((a) => [a.number, a.outcome, a.status, a.error_class]),
      [
        [1, "failed", 503, "unavailable"],
        [2, "failed", 503, "unavailable"],
        [3, "succeeded", 200, "none"],
      ],
    );
    assert.equal(job.completed_by, 3);
    assert.equal(job.max_attempts, 4);
    const replay = await stack.post(key, body);
    assertReplayed(replay);
    assert.equal(llm.calls(key).length, 3);

    const rejected = newKey();
    llm.script(rejected, ["400", "ok"]);
    const rejectedBody = chat(`${rejected} bad request`);
    assertAccepted(await stack.post(rejected, rejectedBody, { headers: RESPOND_ASYNC }), rejected);
    const final = await stack.waitForJob(rejected, (j) => j.state === "completed", { timeoutMs: DELIVERY_MS });
    assert.deepEqual(final.attempts.map((a) => [a.outcome, a.status, a.error_class]), [["rejected", 400, "client_error"]]);
    await sleep(SETTLE_MS);
    assert.equal(llm.calls(rejected).length, 1, "a permanent error is never retried");
    const again = await stack.post(rejected, rejectedBody);
    assertReplayed(again, 400);
    assert.equal(llm.calls(rejected).length, 1);
  });
});

describe("background jobs: the outbox resends a failed queue send", () => {
  let stack;

  before(async () => {
    stack = await startStack({ faults: true, vars: { QUEUE_SEND_FAULTS: "1", OUTBOX_DELAY_MS: "1000", RESULT_CACHE: "off" } });
  });

  after(async () => {
    await stack?.stop();
  });

  test("4. the first send fails: the Ledger's alarm re-enqueues the job, which runs once", { timeout: 120_000 }, async () => {
    const key = newKey();
    const accepted = assertAccepted(await stack.post(key, chat(`${key} outbox`), { headers: RESPOND_ASYNC }), key);
    const job = await stack.waitForJob(key, (j) => j.state === "completed", { timeoutMs: DELIVERY_MS + 10_000 });
    assert.match(stack.worker.output(), /QUEUE_SEND_FAULTS/, "the first send really failed");
    assert.equal(stack.llm.calls(key).length, 1, "the job is not lost, and runs once");
    assert.deepEqual(outcomes(job), ["succeeded"]);

    // Only the first send failed: the next job's goes through at once.
    const next = newKey();
    assertAccepted(await stack.post(next, chat(`${next} after the fault`), { headers: RESPOND_ASYNC }), next);
    const nextJob = await stack.waitForJob(next, (j) => j.state === "completed", { timeoutMs: DELIVERY_MS });
    // A confirmed send is never sent again, however long the consumer takes.
    assert.ok(nextJob.enqueued >= 1);
    assert.equal(nextJob.enqueued, 1, "the queue accepted it: one message");
    await sleep(SETTLE_MS);
    assert.equal(stack.llm.calls(next).length, 1);
    assert.equal(stack.llm.calls(key).length, 1);
    assert.ok(job.enqueued >= 2, `enqueued ${job.enqueued} (${accepted.enqueued} in the 202): the failed send and the outbox's resend`);
    assert.equal(job.enqueued, 2, "the failed send and one resend, confirmed: nothing more");
  });
});

describe("background jobs: kill -9 mid-call", () => {
  const UPSTREAM_TIMEOUT_MS = 2000; // the attempt's lease: this + 10 s
  const UNKNOWN_LEASE_MS = 2000;
  let stack;

  before(async () => {
    stack = await startStack({
      vars: {
        UPSTREAM_TIMEOUT_MS: String(UPSTREAM_TIMEOUT_MS),
        UNKNOWN_LEASE_MS: String(UNKNOWN_LEASE_MS),
        UNKNOWN_POLICY: "retry_after_lease",
        RESULT_CACHE: "off",
      },
    });
  });

  after(async () => {
    await stack?.stop();
  });

  test("5. the lost attempt holds the job for its lease (no second call), then the alarm re-enqueues it and attempt 2 completes it", { timeout: 180_000 }, async () => {
    const key = newKey();
    stack.llm.script(key, ["hang", "ok"]);
    const body = chat(`${key} crash in the background`);
    assertAccepted(await stack.post(key, body, { headers: RESPOND_ASYNC }), key);
    await waitFor("the first attempt reaches the provider", () => ({ ok: stack.llm.calls(key).length === 1 }), DELIVERY_MS);
    await sleep(300);
    await stack.crashAndRestart();

    const { body: held } = await stack.getJob(key);
    assert.equal(held.state, "in_flight", JSON.stringify(held));
    const leaseMs = held.lease_until_ms - held.attempts[0].started_ms;
    assert.ok(Math.abs(leaseMs - (UPSTREAM_TIMEOUT_MS + 10_000)) <= 1000, `lease of ${leaseMs} ms`);
    while (Date.now() < held.lease_until_ms - 500) {
      assert.equal(stack.llm.calls(key).length, 1, "never a second upstream call inside the lease");
      await sleep(500);
    }

    const job = await stack.waitForJob(key, (j) => j.state === "completed", { timeoutMs: UNKNOWN_LEASE_MS + 2 * DELIVERY_MS });
    const calls = stack.llm.calls(key);
    assert.equal(calls.length, 2);
    const unknownUntil = held.lease_until_ms + UNKNOWN_LEASE_MS;
    assert.ok(calls[1].at >= unknownUntil - 300, `attempt 2 came ${unknownUntil - calls[1].at} ms before the lease and UNKNOWN_LEASE_MS ended`);
    assert.deepEqual(outcomes(job), ["abandoned", "succeeded"]);
    assert.equal(job.completed_by, 2);
    assert.equal(job.background, true);
    const replay = await stack.post(key, body);
    assertReplayed(replay);
    assert.equal(stack.llm.calls(key).length, 2);
  });
});

describe("dead letters, replay, resolve and the admin routes' credentials", () => {
  const MAX_ATTEMPTS = 2;
  let stack;
  let llm;
  /** Every admin answer, checked for secrets at the end; the dead-letter API's apart (no provider host either). */
  const adminTexts = [];
  const deadLetterTexts = [];
  const admin = async (route, options) => {
    const answer = await stack.admin(route, options);
    (route.startsWith(DEAD_LETTERS) ? deadLetterTexts : adminTexts).push(answer.text);
    return answer;
  };
  /** `GET /onejob/v1/admin/dead-letters{query}` as `token`. */
  const deadLetters = async (query = "", token = DEV_ADMIN_KEY) => admin(`${DEAD_LETTERS}${query}`, { token });
  const entriesOf = (list, keys) => list.body.entries.filter((e) => keys.includes(e.key));
  const unreplayed = (entry) => !Object.entries(entry).some(([name, value]) => /replay/i.test(name) && value);

  before(async () => {
    stack = await startStack({
      vars: {
        MAX_ATTEMPTS: String(MAX_ATTEMPTS),
        BACKOFF_BASE_MS: "100",
        BACKOFF_CAP_MS: "500",
        UNKNOWN_POLICY: "block",
        UPSTREAM_TIMEOUT_MS: "1500",
        UPSTREAM_API_KEY: UPSTREAM_SECRET,
        ADMIN_KEYS: adminKeysVar({ [ACME_KEY]: { name: "acme-ops", tenant: "tenant-b" } }),
        RESULT_CACHE: "off",
      },
    });
    ({ llm } = stack);
  });

  after(async () => {
    await stack?.stop();
  });

  /** Jobs whose upstream always 503s, posted in the background as `token`'s tenant; resolves once all are dead. */
  async function deadJobs(count, { token = DEV_KEY, tenant = "dev" } = {}) {
    const keys = Array.from({ length: count }, newKey);
    for (const key of keys) llm.script(key, ["503*"], tenant);
    const accepted = await Promise.all(keys.map((key) => stack.post(key, chat(`${key} always unavailable`), { token, headers: RESPOND_ASYNC })));
    accepted.forEach((answer, i) => assertAccepted(answer, keys[i]));
    for (const key of keys) {
      const job = await stack.waitForJob(key, (j) => j.state === "dead", { token, timeoutMs: 3 * DELIVERY_MS });
      assert.deepEqual(job.attempts.map((a) => [a.outcome, a.status, a.error_class]), Array(MAX_ATTEMPTS).fill(["failed", 503, "unavailable"]));
      assert.equal(llm.calls(key, tenant).length, MAX_ATTEMPTS);
    }
    return keys;
  }

  test("6. dead letters: jobs that exhaust their attempts are listed under `unavailable`; replay gives them fresh attempts under the same key, once per replay request", { timeout: 300_000 }, async () => {
    const startedAt = Date.now();
    const [single, ...group] = await deadJobs(3);
    const [other] = await deadJobs(1, { token: TENANT_B_KEY, tenant: "tenant-b" });
    const dev = [single, ...group];

    // Entries may be written a moment after the job dies (the dead-letter queue's consumer records them).
    const list = await waitFor(
      "four dead-letter entries",
      async () => {
        const answer = await deadLetters();
        assert.equal(answer.status, 200, answer.text);
        return { ok: entriesOf(answer, [...dev, other]).length >= 4, value: { status: answer.status, body: answer.body, text: answer.text } };
      },
      DELIVERY_MS,
      500,
    );
    const unavailable = list.body.groups.find((g) => g.error_class === "unavailable");
    assert.ok(unavailable, list.text);
    assert.equal(unavailable.count, 4, "three dev jobs and one of tenant-b");
    assert.ok(unavailable.last_seen_ms >= startedAt && unavailable.last_seen_ms <= Date.now(), list.text);
    assert.equal(unavailable.trend.length, 24, "24 hourly counts");
    assert.ok(unavailable.trend.every((n) => Number.isInteger(n) && n >= 0), list.text);
    assert.equal(unavailable.trend.reduce((a, b) => a + b, 0), 4, "all within the last 24 hours");
    assert.ok(unavailable.trend.at(-1) >= 1, "the newest hour last");
    const entries = entriesOf(list, [...dev, other]);
    assert.equal(entries.length, 4, list.text);
    for (const entry of entries) {
      assert.equal(entry.tenant, entry.key === other ? "tenant-b" : "dev");
      assert.equal(entry.error_class, "unavailable");
      assert.equal(entry.last_status, 503);
      assert.equal(entry.attempts, MAX_ATTEMPTS);
      assert.equal(typeof entry.detail, "string");
      assert.ok(entry.first_seen_ms >= startedAt && entry.first_seen_ms <= entry.last_seen_ms, JSON.stringify(entry));
    }
    const devOnly = await deadLetters("?tenant=dev");
    assert.equal(devOnly.status, 200, devOnly.text);
    assert.deepEqual(devOnly.body.entries.map((e) => e.tenant).filter((t) => t !== "dev"), [], "?tenant=dev lists dev only");
    assert.equal(entriesOf(devOnly, dev).length, 3);
    const scoped = await deadLetters("", ACME_KEY);
    assert.equal(scoped.status, 200, scoped.text);
    assert.deepEqual(scoped.body.entries.map((e) => e.key), [other], "a scoped admin sees its tenant only");
    assert.equal(scoped.body.groups.find((g) => g.error_class === "unavailable")?.count, 1);

    // The upstream is fixed: replayed jobs complete.
    for (const key of dev) llm.script(key, ["ok"]);
    llm.script(other, ["ok"], "tenant-b");

    // One job.
    const oneRequest = newKey();
    const one = await admin(REPLAY, { key: oneRequest, body: { tenant: "dev", key: single } });
    assert.equal(one.status, 200, one.text);
    assert.deepEqual(jobsOf(one.body.replayed), [{ tenant: "dev", key: single }]);
    assert.deepEqual(one.body.skipped, []);
    const replayedOne = await stack.waitForJob(single, (j) => j.state === "completed", { timeoutMs: DELIVERY_MS });
    assert.deepEqual(
      replayedOne.attempts.map((a) => [a.number, a.outcome]),
      [
        [1, "failed"],
        [2, "failed"],
        [3, "succeeded"],
      ],
      "the same job, its attempt numbers going on",
    );
    assert.equal(replayedOne.max_attempts, 2 * MAX_ATTEMPTS, "a fresh allowance of MAX_ATTEMPTS");
    assert.equal(replayedOne.events.length, 1);
    assert.deepEqual({ ...replayedOne.events[0], at_ms: undefined }, { action: "replayed", by: "dev-admin", request: oneRequest, at_ms: undefined });
    assert.ok(replayedOne.events[0].at_ms >= startedAt);
    assert.equal(llm.calls(single).length, MAX_ATTEMPTS + 1);
    const answer = await stack.post(single, chat(`${single} always unavailable`));
    assertReplayed(answer);
    assert.equal(JSON.parse(answer.text).id, "chatcmpl-fake", "the replay's answer is the job's result");

    // A job that is not dead is skipped.
    const notDead = await admin(REPLAY, { key: newKey(), body: { tenant: "dev", key: single } });
    assert.equal(notDead.status, 200, notDead.text);
    assert.deepEqual(notDead.body.replayed, []);
    assert.deepEqual(notDead.body.skipped.map((s) => s.key), [single]);

    // The group, of one tenant: tenant-b's dead job stays dead.
    const groupRequest = newKey();
    const replay = await admin(REPLAY, { key: groupRequest, body: { error_class: "unavailable", tenant: "dev" } });
    assert.equal(replay.status, 200, replay.text);
    assert.deepEqual(
      replay.body.replayed.map((r) => `${r.tenant}/${r.key}`).sort(),
      group.map((key) => `dev/${key}`).sort(),
      "every dead dev job of that cause, and nothing else",
    );
    const replayed = [];
    for (const key of group) {
      const job = await stack.waitForJob(key, (j) => j.state === "completed", { timeoutMs: DELIVERY_MS });
      assert.deepEqual(outcomes(job), ["failed", "failed", "succeeded"]);
      assert.deepEqual(job.events.map((e) => [e.action, e.by, e.request]), [["replayed", "dev-admin", groupRequest]]);
      assert.equal(llm.calls(key).length, MAX_ATTEMPTS + 1);
      replayed.push(job);
    }
    assert.equal((await stack.getJob(other, TENANT_B_KEY)).body.state, "dead", "another tenant's job is not replayed");

    // The same replay request again: the same answer, nothing enqueued.
    const again = await admin(REPLAY, { key: groupRequest, body: { error_class: "unavailable", tenant: "dev" } });
    assert.equal(again.status, 200, again.text);
    assert.deepEqual(again.body, replay.body);
    await sleep(SETTLE_MS);
    for (const [i, key] of group.entries()) {
      const { body: job } = await stack.getJob(key);
      assert.equal(llm.calls(key).length, MAX_ATTEMPTS + 1, "no new upstream call");
      assert.equal(job.enqueued, replayed[i].enqueued, "no new queue message");
      assert.equal(job.events.length, 1);
    }

    // Replayed entries leave the list (or are marked replayed).
    const listed = await deadLetters();
    assert.equal(listed.status, 200, listed.text);
    assert.deepEqual(entriesOf(listed, dev).filter(unreplayed), [], listed.text);
    assert.equal(entriesOf(listed, [other]).filter(unreplayed).length, 1);

    // A scoped admin replays its own tenant's group.
    const scopedReplay = await admin(REPLAY, { token: ACME_KEY, key: newKey(), body: { error_class: "unavailable" } });
    assert.equal(scopedReplay.status, 200, scopedReplay.text);
    assert.deepEqual(jobsOf(scopedReplay.body.replayed), [{ tenant: "tenant-b", key: other }]);
    const otherJob = await stack.waitForJob(other, (j) => j.state === "completed", { token: TENANT_B_KEY, timeoutMs: DELIVERY_MS });
    assert.deepEqual(otherJob.events.map((e) => [e.action, e.by]), [["replayed", "acme-ops"]]);
  });

  test("7. resolve: an unknown job settled as succeeded replays the operator's body; another allowed one new attempt runs it", { timeout: 180_000 }, async () => {
    const operatorBody = {
      id: "chatcmpl-from-the-dashboard",
      object: "chat.completion",
      created: 1767225600,
      model: "gpt-test",
      choices: [{ index: 0, message: { role: "assistant", content: "found in the provider's dashboard" }, finish_reason: "stop" }],
    };
    const unknownJob = async (label) => {
      const key = newKey();
      llm.script(key, ["hang", "ok"]);
      const body = chat(`${key} ${label}`);
      assertAccepted(await stack.post(key, body, { headers: RESPOND_ASYNC }), key);
      const job = await stack.waitForJob(key, (j) => j.state === "unknown", { timeoutMs: DELIVERY_MS });
      assert.deepEqual(outcomes(job), ["unknown"]);
      await sleep(SETTLE_MS);
      assert.equal(llm.calls(key).length, 1, "UNKNOWN_POLICY=block: no new attempt on its own");
      return { key, body };
    };

    // Settled as succeeded.
    const settled = await unknownJob("settled by an operator");
    const resolveRequest = newKey();
    const resolveBody = { tenant: "dev", key: settled.key, action: "succeeded", response: { status: 200, body: operatorBody } };
    const resolved = await admin(RESOLVE, { key: resolveRequest, body: resolveBody });
    assert.ok(resolved.status >= 200 && resolved.status < 300, resolved.text);
    const duplicate = await stack.post(settled.key, settled.body);
    assertReplayed(duplicate);
    assert.deepEqual(JSON.parse(duplicate.text), operatorBody, "exactly the operator's body");
    const { body: job } = await stack.getJob(settled.key);
    assert.equal(job.state, "completed");
    assert.deepEqual(job.attempts.map((a) => [a.number, a.provider, a.outcome, a.status]), [
      [1, job.attempts[0].provider, "unknown", job.attempts[0].status],
      [2, "operator", "succeeded", 200],
    ]);
    assert.equal(job.completed_by, 2);
    assert.deepEqual(job.events.map((e) => [e.action, e.by, e.request]), [["resolved_succeeded", "dev-admin", resolveRequest]]);
    // The same request again changes nothing; a new one finds a job that is not unknown.
    const resolvedAgain = await admin(RESOLVE, { key: resolveRequest, body: resolveBody });
    assert.ok(resolvedAgain.status >= 200 && resolvedAgain.status < 300, resolvedAgain.text);
    assert.equal((await stack.getJob(settled.key)).body.events.length, 1);
    const conflict = await admin(RESOLVE, { key: newKey(), body: resolveBody });
    assert.equal(conflict.status, 409, conflict.text);
    assert.equal(conflict.res.headers.get("content-type"), "application/problem+json");
    assert.equal(conflict.body.status, 409);
    assert.equal(llm.calls(settled.key).length, 1, "an operator's answer calls nothing");

    // Allowed one new attempt.
    const retried = await unknownJob("retried by an operator");
    const retryRequest = newKey();
    const retry = await admin(RESOLVE, { key: retryRequest, body: { tenant: "dev", key: retried.key, action: "retry" } });
    assert.ok(retry.status >= 200 && retry.status < 300, retry.text);
    const done = await stack.waitForJob(retried.key, (j) => j.state === "completed", { timeoutMs: DELIVERY_MS });
    assert.deepEqual(outcomes(done), ["unknown", "succeeded"]);
    assert.deepEqual(done.events.map((e) => [e.action, e.by, e.request]), [["allowed_attempt", "dev-admin", retryRequest]]);
    await sleep(SETTLE_MS);
    assert.equal(llm.calls(retried.key).length, 2, "one new attempt");
    assertReplayed(await stack.post(retried.key, retried.body));
    const notUnknown = await admin(RESOLVE, { key: newKey(), body: { tenant: "dev", key: retried.key, action: "retry" } });
    assert.equal(notUnknown.status, 409, notUnknown.text);
    assert.equal(notUnknown.res.headers.get("content-type"), "application/problem+json");
  });

  test("8. credentials: a tenant key gets 401 on every admin route, an admin of another tenant 403; no admin answer shows a secret", { timeout: 120_000 }, async () => {
    const key = newKey();
    assertAccepted(await stack.post(key, chat(`${key} auth`), { headers: RESPOND_ASYNC }), key);
    await stack.waitForJob(key, (j) => j.state === "completed", { timeoutMs: DELIVERY_MS });

    const routes = [
      [DEAD_LETTERS, {}],
      [`${DEAD_LETTERS}?tenant=dev`, {}],
      [REPLAY, { key: newKey(), body: { tenant: "dev", key } }],
      [REPLAY, { key: newKey(), body: { error_class: "unavailable" } }],
      [RESOLVE, { key: newKey(), body: { tenant: "dev", key, action: "retry" } }],
      [enqueuePath("dev", key), { method: "POST" }],
    ];
    // Every route is tried, then every answer that differs is listed at once.
    const wrong = [];
    const expectProblem = (what, answer, status, slug) => {
      try {
        assertProblem(answer, status, slug);
      } catch {
        wrong.push(`${what}: ${answer.status} ${answer.text}`);
      }
    };
    for (const [route, options] of routes) {
      for (const token of [DEV_KEY, TENANT_B_KEY, null]) {
        const answer = await admin(route, { ...options, token });
        expectProblem(`${route} ${JSON.stringify(options.body ?? {})} as ${token ?? "nobody"}`, answer, 401, "unauthorized");
      }
    }
    const forbidden = [
      [`${DEAD_LETTERS}?tenant=dev`, {}],
      [REPLAY, { key: newKey(), body: { tenant: "dev", key } }],
      [REPLAY, { key: newKey(), body: { error_class: "unavailable", tenant: "dev" } }],
      [RESOLVE, { key: newKey(), body: { tenant: "dev", key, action: "retry" } }],
      [RESOLVE, { key: newKey(), body: { tenant: "dev", key, action: "succeeded", response: { status: 200, body: {} } } }],
      [enqueuePath("dev", key), { method: "POST" }],
    ];
    for (const [route, options] of forbidden) {
      const answer = await admin(route, { ...options, token: ACME_KEY });
      expectProblem(`${route} ${JSON.stringify(options.body ?? {})} as acme-ops`, answer, 403, "forbidden");
    }
    await sleep(SETTLE_MS);
    const { body: job } = await stack.getJob(key);
    assert.equal(job.enqueued, 1, "no refused request sent a message");
    assert.deepEqual(job.events ?? [], [], "no refused request touched the job");
    assert.equal(llm.calls(key).length, 1);

    // Nothing secret in any admin answer of this stack (tests 6-8).
    const secrets = [
      UPSTREAM_SECRET,
      DEV_KEY,
      TENANT_B_KEY,
      DEV_ADMIN_KEY,
      ACME_KEY,
      sha256(DEV_KEY),
      sha256(TENANT_B_KEY),
      sha256(DEV_ADMIN_KEY),
      sha256(ACME_KEY),
      llm.baseUrl,
    ];
    assert.ok(adminTexts.length >= 10 && deadLetterTexts.length >= 10, `${adminTexts.length} and ${deadLetterTexts.length} answers`);
    for (const text of adminTexts) {
      for (const secret of secrets) if (text.includes(secret)) wrong.push(`an admin answer shows ${secret}: ${text}`);
    }
    // A job view names a single UPSTREAM's provider by its host (as GET
    // /onejob/v1/jobs does); dead letters and replays name no provider at all.
    for (const text of deadLetterTexts) {
      for (const secret of [...secrets, `127.0.0.1:${llm.port}`, "127.0.0.1", "http://", "https://"]) {
        if (text.includes(secret)) wrong.push(`a dead-letter answer shows ${secret}: ${text}`);
      }
    }
    assert.deepEqual(wrong, [], "401 for a tenant key or none, 403 for an admin of another tenant, no secret shown");
  });
});

describe("background jobs: a job already waiting for an operator when it is adopted", () => {
  let stack;

  before(async () => {
    // The adoption's queue send fails (the isolate's first send): no
    // delivery comes to find the job waiting for an operator.
    stack = await startStack({
      faults: true,
      vars: { QUEUE_SEND_FAULTS: "1", UNKNOWN_POLICY: "block", UPSTREAM_TIMEOUT_MS: "1000", UNKNOWN_LEASE_MS: "1000", RESULT_CACHE: "off" },
    });
  });

  after(async () => {
    await stack?.stop();
  });

  test("9. a foreground call left unknown under UNKNOWN_POLICY=block, its lease over, then submitted in the background and its queue send failing: dead-lettered at once, never called again", { timeout: 120_000 }, async () => {
    const key = newKey();
    stack.llm.script(key, ["hang"]);
    const body = chat(`${key} unknown, then in the background`);
    const first = await stack.post(key, body);
    assert.equal(first.res.status, 504, first.text);
    assert.equal((await stack.getJob(key)).body.state, "unknown");
    await sleep(1_500); // the unknown lease is over: the job waits for an operator
    const adopted = await stack.post(key, body, { headers: RESPOND_ASYNC });
    assert.equal(adopted.res.status, 202, adopted.text);
    await waitFor("the send fails", () => ({ ok: /queue send failed \(QUEUE_SEND_FAULTS\)/.test(stack.worker.output()) }), 5_000);
    // Before, only a delivery found it so, and with its send failed none
    // came, nor did the outbox send again (the job could not run): no
    // alarm letters a job whose lease ended before it was a background
    // job, so operators never saw it among the dead letters.
    const entry = await stack.waitForDeadLetter(key, { timeoutMs: DELIVERY_MS });
    assert.equal(entry.attempts, 1, JSON.stringify(entry));
    const view = (await stack.getJob(key)).body;
    assert.equal(view.state, "unknown");
    assert.equal(view.waiting_for_operator, true, JSON.stringify(view));
    assert.equal(stack.llm.calls(key).length, 1, "never called again on its own");
  });
});
