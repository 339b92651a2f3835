// The Ledger's outbox (issue 17): it sends a background job's message again
// only when it may not exist (a send that failed, or that a crash cut
// short), with backoff, and at most MAX_UNTAKEN_SENDS (12) times in a row
// before the job is left to operators. A backlog in the queue is not a
// reason to send again: 1,000 jobs queued at once cost about 1,000
// messages. The worker runs under `wrangler dev` (its own queue consumer
// drains 10 messages at a time); the provider is a fake LLM over real HTTP
// that counts calls, and `enqueued` in each job's view counts the messages
// its Ledger sent.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";

import { RESPOND_ASYNC, chat, inPool, newKey, sleep, startStack, waitFor } from "../support/harness.mjs";

const BACKLOG = 1000;
/** What a message takes to reach the consumer at worst (wrangler dev batches). */
const DELIVERY_MS = 30_000;
const DEAD_LETTERS = "/onejob/v1/admin/dead-letters";
const REPLAY = "/onejob/v1/admin/dead-letters/replay";

describe("the outbox and a backlog: no fault, one message per job", () => {
  let stack;

  before(async () => {
    // OUTBOX_DELAY_MS at its default (5 s): the drain takes far longer.
    stack = await startStack({ vars: { RESULT_CACHE: "off" } });
  });

  after(async () => {
    await stack?.stop();
  });

  test(`1. ${BACKLOG} background jobs submitted at once: each completes with one upstream call and about one queue message (≤ 1.05 per job, ≤ 2 for any)`, { timeout: 600_000 }, async () => {
    const keys = Array.from({ length: BACKLOG }, newKey);
    const started = performance.now();
    const accepted = await inPool(keys, (key) => stack.post(key, chat(`${key} in the backlog`), { headers: RESPOND_ASYNC }));
    const submittedMs = performance.now() - started;
    const statuses = accepted.map((a) => a.res.status);
    assert.deepEqual(statuses.filter((s) => s !== 202), [], "every job accepted");
    const firstViews = accepted.map((a) => JSON.parse(a.text));
    assert.deepEqual(firstViews.filter((v) => v.enqueued !== 1).map((v) => v.enqueued), [], "one message sent by each 202");

    // Drained: every job reached the provider (counted by the fake, no polling).
    await waitFor(
      `all ${BACKLOG} jobs reach the provider`,
      () => {
        const waiting = keys.filter((key) => stack.llm.calls(key).length === 0).length;
        return { ok: waiting === 0, value: { waiting } };
      },
      480_000,
      500,
    );
    const drainedMs = performance.now() - started;

    // Every job is completed; its view says how many messages its Ledger sent.
    const views = await inPool(keys, (key) => stack.waitForJob(key, (j) => j.state === "completed", { timeoutMs: 60_000 }));
    const enqueued = views.map((v) => v.enqueued);
    const total = enqueued.reduce((a, b) => a + b, 0);
    const max = Math.max(...enqueued);
    const histogram = {};
    for (const n of enqueued) histogram[n] = (histogram[n] ?? 0) + 1;
    const calls = keys.map((key) => stack.llm.calls(key).length);
    console.log(
      `backlog: ${BACKLOG} jobs submitted in ${(submittedMs / 1000).toFixed(1)} s, drained in ${(drainedMs / 1000).toFixed(1)} s; ` +
        `${total} queue messages (${(total / BACKLOG).toFixed(3)} per job), at most ${max} for one; messages per job: ${JSON.stringify(histogram)}`,
    );
    assert.deepEqual(calls.filter((n) => n !== 1), [], "one upstream call per job");
    assert.ok(views.every((v) => v.attempts.length === 1 && v.completed_by === 1), "one attempt per job");
    assert.ok(total <= 1.05 * BACKLOG, `${total} queue messages for ${BACKLOG} jobs`);
    assert.ok(max <= 2, `${max} queue messages for one job`);
  });
});

describe("the outbox: a failed send is sent again with backoff, and the job ends done", () => {
  let stack;

  before(async () => {
    stack = await startStack({ faults: true, vars: { QUEUE_SEND_FAULTS: "3", OUTBOX_DELAY_MS: "500", RESULT_CACHE: "off" } });
  });

  after(async () => {
    await stack?.stop();
  });

  test("2. the first 3 sends fail: sent a 4th time, completed by one upstream call; the confirmed 4th is never sent again", { timeout: 120_000 }, async () => {
    const key = newKey();
    const started = Date.now();
    const accepted = await stack.post(key, chat(`${key} sends that fail`), { headers: RESPOND_ASYNC });
    assert.equal(accepted.res.status, 202, accepted.text);
    assert.equal(JSON.parse(accepted.text).enqueued, 1);
    const job = await stack.waitForJob(key, (j) => j.state === "completed", { timeoutMs: DELIVERY_MS + 10_000 });
    const output = stack.worker.output();
    assert.equal(output.match(/queue send failed \(QUEUE_SEND_FAULTS\)/g)?.length, 3, "three sends really failed");
    assert.equal(stack.llm.calls(key).length, 1, "the job is not lost, and runs once");
    assert.equal(job.enqueued, 4, "three failed sends and the one that went through");
    // Backoff: OUTBOX_DELAY_MS doubling, half to all of it each time (0.25 + 0.5 + 1 s at least).
    const firstCall = stack.llm.calls(key)[0].at;
    assert.ok(firstCall - started >= 1_750 - 100, `the 4th send came ${firstCall - started} ms after the 202`);
    await sleep(3_000);
    assert.equal((await stack.getJob(key)).body.enqueued, 4, "no send after the job finished");

    // The faults are spent: the next job's first send goes through, and is the only one.
    const next = newKey();
    assert.equal((await stack.post(next, chat(`${next} after the faults`), { headers: RESPOND_ASYNC })).res.status, 202);
    const nextJob = await stack.waitForJob(next, (j) => j.state === "completed", { timeoutMs: DELIVERY_MS });
    assert.equal(nextJob.enqueued, 1);
    assert.equal(stack.llm.calls(next).length, 1);
  });
});

describe("the outbox: after 12 sends no delivery took, the job is left to operators", () => {
  let stack;

  before(async () => {
    // Every send of the job fails: 12 sends, 0.1 s doubling up to 6.4 s (22 to 45 s in all).
    stack = await startStack({ faults: true, vars: { QUEUE_SEND_FAULTS: "12", OUTBOX_DELAY_MS: "100", RESULT_CACHE: "off" } });
  });

  after(async () => {
    await stack?.stop();
  });

  test("3. a dead letter of class `undelivered` that stops the sends; replaying it sends it again and it completes once", { timeout: 180_000 }, async () => {
    const key = newKey();
    const accepted = await stack.post(key, chat(`${key} never delivered`), { headers: RESPOND_ASYNC });
    assert.equal(accepted.res.status, 202, accepted.text);
    const waiting = await stack.waitForJob(key, (j) => j.waiting_for_operator === true, { timeoutMs: 90_000, what: "the outbox gives up" });
    assert.equal(waiting.state, "pending");
    assert.equal(waiting.enqueued, 12, "MAX_UNTAKEN_SENDS");
    assert.equal(stack.worker.output().match(/queue send failed \(QUEUE_SEND_FAULTS\)/g)?.length, 12);
    assert.match(stack.worker.output(), /left to operators/);
    const entry = await stack.waitForDeadLetter(key, { timeoutMs: DELIVERY_MS });
    assert.equal(entry.error_class, "undelivered");
    assert.equal(entry.attempts, 0);
    assert.match(entry.detail, /12 messages/);
    await sleep(8_000); // longer than the backoff's cap (6.4 s)
    assert.equal((await stack.getJob(key)).body.enqueued, 12, "no send after giving up");
    assert.equal(stack.llm.calls(key).length, 0);

    // The queue works again (the faults are spent): an operator replays the group.
    const replay = await stack.admin(REPLAY, { key: newKey(), body: { error_class: "undelivered", tenant: "dev" } });
    assert.equal(replay.status, 200, replay.text);
    assert.deepEqual(replay.body.replayed.map((r) => r.key), [key]);
    const done = await stack.waitForJob(key, (j) => j.state === "completed", { timeoutMs: DELIVERY_MS });
    assert.equal(done.waiting_for_operator, false);
    assert.equal(done.enqueued, 13);
    assert.equal(stack.llm.calls(key).length, 1);
    const listed = await stack.admin(DEAD_LETTERS);
    const unreplayed = (e) => !Object.entries(e).some(([name, value]) => /replay/i.test(name) && value);
    assert.deepEqual(listed.body.entries.filter((e) => e.key === key && unreplayed(e)), [], "the replayed entry leaves the list (or is marked replayed)");
  });
});

describe("the outbox: a slow send is not made again while the queue has not answered it (issue 34)", () => {
  let stack;

  before(async () => {
    // Every send takes 3 s to be accepted; the alarm set before it rings
    // after 0.25 to 0.5 s. Before, each ring sent the message again.
    stack = await startStack({ faults: true, vars: { QUEUE_SEND_DELAY_MS: "3000", OUTBOX_DELAY_MS: "500", RESULT_CACHE: "off" } });
  });

  after(async () => {
    await stack?.stop();
  });

  test("4. one message, one attempt, one upstream call", { timeout: 120_000 }, async () => {
    const key = newKey();
    const accepted = await stack.post(key, chat(`${key} sent slowly`), { headers: RESPOND_ASYNC });
    assert.equal(accepted.res.status, 202, accepted.text);
    const job = await stack.waitForJob(key, (j) => j.state === "completed", { timeoutMs: DELIVERY_MS });
    await sleep(4_000); // any second send would have landed
    const view = (await stack.getJob(key)).body;
    assert.equal(view.enqueued, 1, `messages sent: ${view.enqueued}`);
    assert.equal(stack.llm.calls(key).length, 1);
    assert.deepEqual(view.attempts.map((a) => a.outcome), ["succeeded"]);
    assert.equal(job.completed_by, 1);
  });
});
