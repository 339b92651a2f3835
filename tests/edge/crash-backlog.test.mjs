// Accepted background jobs move again soon after the runtime restarts
// (issue 34): `kill -9` of the runtime (wrangler and workerd) while
// background jobs are queued and their calls are in flight, restarted on
// the same state each time. The local queue loses every message it held;
// the Ledgers' outboxes must tell those lost messages from a backlog that
// drains (the queue's cursor, core's background::progress) and send them
// again, so that 60 s after the last restart every accepted job is
// finished or running. Without a fault, a backlog costs about one message
// per job (tests/edge/outbox.test.mjs).
//
// Sizes: CRASH_JOBS jobs and CRASH_KILLS kills (150 and 3 in `make test`;
// `make test-crash` runs 1,000 and 6). The provider is a fake LLM over real
// HTTP answering after 300 ms; the leases are short (an attempt's is the
// upstream timeout + 10 s), so a job whose call a kill cut holds only that
// long before it is unknown, then tried again (UNKNOWN_POLICY=retry_after_lease).
import assert from "node:assert/strict";
import { after, before, test } from "node:test";

import { RESPOND_ASYNC, chat, inPool, newKey, sleep, startStack } from "../support/harness.mjs";

const JOBS = Number(process.env.CRASH_JOBS ?? 150);
const KILLS = Number(process.env.CRASH_KILLS ?? 3);
/** How long after the last restart every accepted job must be finished or running. */
const MOVES_WITHIN_MS = 60_000;
/** Requests at a time (submitting, polling). */
const PARALLEL = 50;
/** Between a restart and the next kill. */
const KILL_EVERY_MS = 4_000;
const UPSTREAM_TIMEOUT_MS = 2_000;
const UNKNOWN_LEASE_MS = 2_000;

let stack;

before(async () => {
  stack = await startStack({
    vars: {
      RESULT_CACHE: "off",
      UPSTREAM_TIMEOUT_MS: String(UPSTREAM_TIMEOUT_MS),
      UNKNOWN_LEASE_MS: String(UNKNOWN_LEASE_MS),
      UNKNOWN_POLICY: "retry_after_lease",
    },
  });
  stack.llm.scriptAll(["delay:300*"]);
});

after(async () => {
  await stack?.stop();
});

/** Whether `view` (a job's, read at `now`) waits: neither finished nor
 * running. An attempt in flight, or unknown, within its lease is running:
 * past it, the job waits for its next message. */
function waits(view, now) {
  if (view.state === "completed") return false;
  if (view.state === "in_flight" || view.state === "unknown") return !(view.lease_until_ms > now);
  return true;
}

test(`${JOBS} background jobs, ${KILLS} kill -9 of the runtime while they run: ${MOVES_WITHIN_MS / 1000} s after the last restart every accepted job is finished or running`, { timeout: 900_000 }, async () => {
  const keys = Array.from({ length: JOBS }, newKey);
  const accepted = new Set();
  let killing = true;

  // Submitted as a user would: a submission the kill cut is sent again
  // with its key until it is answered.
  const submitting = inPool(keys, async (key) => {
    for (;;) {
      try {
        const { res, text } = await stack.post(key, chat(`${key} through the crashes`), { headers: RESPOND_ASYNC });
        if (res.status === 202 || res.status === 200) {
          accepted.add(key);
          return;
        }
        assert.ok(res.status >= 500 || res.status === 409, `${res.status} ${text}`);
      } catch {
        // The runtime is down: try again shortly.
      }
      await sleep(killing ? 250 : 50);
    }
  }, PARALLEL);

  let lastRestart;
  for (let kill = 1; kill <= KILLS; kill++) {
    await sleep(kill === 1 ? 1_500 : KILL_EVERY_MS);
    const calledBefore = keys.filter((key) => stack.llm.calls(key).length > 0).length;
    await stack.crashAndRestart();
    lastRestart = Date.now();
    console.log(`kill ${kill}: ${accepted.size} jobs accepted and ${calledBefore} called upstream before it`);
  }
  killing = false;
  await submitting;
  assert.equal(accepted.size, JOBS, "every job accepted in the end");

  // 60 s after the last restart: every job finished or running.
  const due = lastRestart + MOVES_WITHIN_MS;
  await sleep(Math.max(0, due - Date.now()));
  const snapshot = await inPool(keys, async (key) => {
    const { status, body } = await stack.getJob(key);
    assert.equal(status, 200, JSON.stringify(body));
    return body;
  }, PARALLEL);
  const takenAt = Date.now();
  const waiting = snapshot.filter((view) => waits(view, takenAt));
  const byState = {};
  for (const view of waiting) byState[view.state] = (byState[view.state] ?? 0) + 1;

  console.log(`${JOBS} jobs, ${KILLS} kills: ${waiting.length} waiting ${MOVES_WITHIN_MS / 1000} s after the last restart ${JSON.stringify(byState)}`);
  assert.deepEqual(
    waiting.map((v) => `${v.key}: ${v.state}, ${v.attempts.length} attempts, ${v.enqueued} messages`),
    [],
    `jobs still waiting ${MOVES_WITHIN_MS / 1000} s after the last restart`,
  );

  // Then every job completes.
  const done = await inPool(keys, (key) => stack.waitForJob(key, (j) => j.state === "completed", { timeoutMs: 300_000 }), PARALLEL);
  const lastDoneS = (Date.now() - lastRestart) / 1000;
  const messages = done.map((view) => view.enqueued);
  const total = messages.reduce((a, b) => a + b, 0);
  const max = Math.max(...messages);
  const calls = keys.map((key) => stack.llm.calls(key).length);
  const histogram = {};
  for (const n of messages) histogram[n] = (histogram[n] ?? 0) + 1;
  console.log(
    `all completed within ${lastDoneS.toFixed(1)} s of the last restart; queue messages per job: mean ${(total / JOBS).toFixed(2)}, max ${max} ${JSON.stringify(histogram)}; ` +
      `upstream calls: ${calls.reduce((a, b) => a + b, 0)} (at most ${Math.max(...calls)} for one job)`,
  );
  // Every job ran: every upstream call is an attempt in its audit, and the
  // job is completed by exactly one of them.
  for (const [i, view] of done.entries()) {
    assert.ok(calls[i] >= 1, `${keys[i]} never reached the provider`);
    assert.ok(calls[i] <= view.attempts.length, `${keys[i]}: ${calls[i]} calls, ${view.attempts.length} attempts`);
    assert.equal(view.attempts.filter((a) => a.outcome === "succeeded").length, 1, JSON.stringify(view.attempts));
  }
  assert.ok(max <= 12, `a job sent ${max} messages (the outbox gives up at 12)`);
});
