// A replay is the first answer (issue item 8): for every way a job can end,
// a later request with the same key gets what the first caller got, byte
// for byte: the same status, body, content type, `x-should-retry` and
// (absent) `Retry-After`, and the same attempt. Only `Idempotent-Replayed:
// true` and the job's state (as it is now: a live stream was `in_flight`,
// a last unknown attempt `unknown`) differ. Every test runs three times: with the
// KV cache of finished results read by every request (kv), by retries
// only (retries, the default), and off (every replay from the Ledger).
// What is not a replay (an unknown outcome with attempts left, a duplicate
// inside a lease) is pinned too.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";

import { DEV_KEY, assertProblem, chat, contentFault, delayedContent, newKey, readBody, sleep, startStack, waitFor } from "../support/harness.mjs";

const UPSTREAM_TIMEOUT_MS = 1000;
const UNKNOWN_LEASE_MS = 1000;
const MAX_ATTEMPTS = 2;
const CACHE_WRITE_MS = 300;

/** The headers that say what an answer is, besides its status and body. */
const ANSWER_HEADERS = ["content-type", "x-should-retry", "retry-after", "retry-after-ms", "onejob-attempt", "idempotency-key"];

/** Asserts `replay` is `first` replayed: the same answer, marked as a replay, of a job now `state`. */
function assertReplayOf(replay, first, state) {
  assert.equal(replay.res.status, first.res.status, replay.text);
  assert.equal(replay.text, first.text, "the same body bytes");
  for (const name of ANSWER_HEADERS) assert.equal(replay.res.headers.get(name), first.res.headers.get(name), name);
  assert.equal(first.res.headers.get("idempotent-replayed"), null);
  assert.equal(replay.res.headers.get("idempotent-replayed"), "true");
  assert.equal(replay.res.headers.get("onejob-job-state"), state);
  // Asking again only replays a finished job: nothing tells a client to retry it.
  assert.equal(replay.res.headers.get("x-should-retry"), "false");
  assert.equal(replay.res.headers.get("retry-after"), null);
}

for (const cache of ["kv", "retries", "off"]) {
  describe(`a replay is the first answer (RESULT_CACHE=${cache})`, () => {
    let stack;
    let primary, backup;
    const post = (...args) => stack.post(...args);
    // The Ledger writes a finished result to KV when it first replays it
    // (just after that answer): with the cache on, a second replay a moment
    // later comes from KV. Both are the first answer; the second is checked.
    const twice = (send) => async (...args) => {
      const fromLedger = await send(...args);
      await sleep(CACHE_WRITE_MS);
      const again = await send(...args);
      assert.equal(again.res.status, fromLedger.res.status, again.text);
      assert.equal(again.text, fromLedger.text, "both replays are the same bytes");
      for (const name of ANSWER_HEADERS) assert.equal(again.res.headers.get(name), fromLedger.res.headers.get(name), name);
      return again;
    };
    // Sent as an official SDK's retry: RESULT_CACHE=retries looks in KV for retries only.
    const asRetry = (key, body) => post(key, body, { headers: { "x-stainless-retry-count": "1" } });
    const replay = twice(asRetry);
    const replayStream = twice(postStream);

    /** POSTs a streamed request and reads it to its end; `during(res)` runs once its headers are in. */
    async function postStream(key, body, during) {
      const res = await fetch(`${stack.url}/v1/chat/completions`, {
        method: "POST",
        headers: { Authorization: `Bearer ${DEV_KEY}`, "Idempotency-Key": key, "Content-Type": "application/json" },
        body: JSON.stringify({ ...body, stream: true }),
      });
      const reading = readBody(res);
      await during?.(res);
      return { res, text: (await reading).text };
    }

    /** The job once its state is `state`. */
    const settled = (key, state) => stack.waitForJob(key, (job) => job.state === state, { timeoutMs: 15_000 });

    before(async () => {
      stack = await startStack({
        providers: [{ name: "primary" }, { name: "backup" }],
        routes: {
          "gpt-test": { providers: [{ provider: "primary" }] },
          contract: { providers: [{ provider: "primary" }], contract: { required_keys: ["category"] } },
          "hedged-contract": {
            providers: [{ provider: "primary" }, { provider: "backup" }],
            hedge_after_ms: 300,
            contract: { required_keys: ["category"] },
          },
        },
        vars: {
          RESULT_CACHE: cache,
          UPSTREAM_TIMEOUT_MS: String(UPSTREAM_TIMEOUT_MS),
          UNKNOWN_LEASE_MS: String(UNKNOWN_LEASE_MS),
          MAX_ATTEMPTS: String(MAX_ATTEMPTS),
          BACKOFF_BASE_MS: "10",
          BACKOFF_CAP_MS: "50",
          BREAKER_FAILURES: "0",
        },
      });
      ({ primary, backup } = stack.fakes);
    });

    after(async () => {
      await stack?.stop();
    });

    // Endings the driver answers at once: [name, the provider's faults, model,
    // the first answer's status and content type, the job's state, calls].
    const AT_ONCE = [
      ["success: the 200", ["ok"], "gpt-test", 200, "application/json", "completed", 1],
      ["a permanent error (the provider's 400), as it came", ["400*"], "gpt-test", 400, "application/json", "completed", 1],
      ["dead after transient errors (503 until the attempts are spent): the last 503", ["503*"], "gpt-test", 503, "application/json", "dead", MAX_ATTEMPTS],
      ["a contract breach on every attempt: the 502 output-contract", [`${contentFault("plain prose")}*`], "contract", 502, "application/problem+json", "dead", MAX_ATTEMPTS],
    ];
    for (const [name, faults, model, status, contentType, state, calls] of AT_ONCE) {
      test(`${name}, replayed`, async () => {
        const key = newKey();
        primary.script(key, faults);
        const first = await post(key, chat(`${key} ${name}`, { model }));
        assert.equal(first.res.status, status, first.text);
        assert.equal(first.res.headers.get("content-type"), contentType);
        assert.equal(first.res.headers.get("onejob-job-state"), state);
        assert.equal(first.res.headers.get("onejob-attempt"), String(calls));
        assertReplayOf(await replay(key, chat(`${key} ${name}`, { model })), first, state);
        assert.equal(primary.calls(key).length, calls);
      });
    }

    test("dead after timeouts: the last attempt's 504 is final (no Retry-After, x-should-retry false) and is what the dead job replays", async () => {
      const key = newKey();
      primary.script(key, ["hang*"]);
      // Attempts are left: not final, not a replay. Ask again after the lease.
      const early = await post(key, chat(`${key} hangs`));
      assertProblem(early, 504, "upstream-timeout");
      assert.equal(early.res.headers.get("onejob-job-state"), "unknown");
      assert.equal(early.res.headers.get("x-should-retry"), "true");
      assert.ok(Number(early.res.headers.get("retry-after-ms")) > 0);
      const inside = await post(key, chat(`${key} hangs`));
      assertProblem(inside, 409, "outcome-unknown");
      assert.equal(inside.res.headers.get("idempotent-replayed"), null, "a duplicate inside the lease is not a replay");
      await sleep(Number(inside.res.headers.get("retry-after-ms")) + 100);

      // The last attempt: no attempt will follow, so its answer is the job's.
      const last = await post(key, chat(`${key} hangs`));
      const problem = assertProblem(last, 504, "upstream-timeout");
      assert.equal(last.res.headers.get("onejob-job-state"), "unknown");
      assert.equal(last.res.headers.get("onejob-attempt"), String(MAX_ATTEMPTS));
      assert.equal(last.res.headers.get("x-should-retry"), "false");
      assert.equal(last.res.headers.get("retry-after"), null);
      assert.equal(problem.retry_after_ms, undefined);
      assert.equal(primary.calls(key).length, MAX_ATTEMPTS);

      // Its lease over, the job is dead and replays that answer.
      await sleep(UNKNOWN_LEASE_MS + 200);
      assertReplayOf(await post(key, chat(`${key} hangs`)), last, "dead");
      assertReplayOf(await replay(key, chat(`${key} hangs`)), last, "dead");
      assert.equal(primary.calls(key).length, MAX_ATTEMPTS, "never a third call");
      const { body: job } = await stack.getJob(key);
      assert.equal(job.state, "dead");
      assert.deepEqual(job.attempts.map((a) => [a.outcome, a.error_class]), [
        ["unknown", "timeout_after_send"],
        ["unknown", "timeout_after_send"],
      ]);
    });

    test("a hedged race lost by both racers (contract breaches): the answer the caller got is the one replayed", async () => {
      // The primary breaks the contract after 700 ms, the hedge (at 300 ms)
      // at once and differently: the job dies on the primary's report.
      const key = newKey();
      primary.script(key, [delayedContent(700, "plain prose")]);
      backup.script(key, [contentFault({ other: 1 })]);
      const first = await post(key, chat(`${key} race`, { model: "hedged-contract" }));
      assertProblem(first, 502, "output-contract");
      assert.equal(first.res.headers.get("onejob-job-state"), "dead");
      assert.equal(primary.calls(key).length + backup.calls(key).length, MAX_ATTEMPTS);
      assertReplayOf(await replay(key, chat(`${key} race`, { model: "hedged-contract" })), first, "dead");
    });

    // Streams that end by themselves: [name, the provider's stream, how the
    // live answer ends, the job's state]. The live answer said `in_flight`.
    const STREAMS = [
      ["a streamed answer, completed", "sse:3:20", /data: \[DONE\]\n\n$/, "completed"],
      ["a stream the provider ends with an error event, as it came", "sse-error:3:20", /the model failed mid-answer/, "completed"],
      ["an interrupted stream (the provider cuts it): the partial stream and the gateway's error event", "sse-drop:3:20", /"stream_interrupted"/, "interrupted"],
    ];
    for (const [name, fault, ending, state] of STREAMS) {
      test(`${name}, replayed`, async () => {
        const key = newKey();
        primary.script(key, [fault]);
        const first = await postStream(key, chat(`${key} ${name}`));
        assert.equal(first.res.status, 200);
        assert.equal(first.res.headers.get("onejob-job-state"), "in_flight");
        assert.match(first.text, ending);
        await settled(key, state);
        assertReplayOf(await replayStream(key, chat(`${key} ${name}`)), first, state);
        assert.equal(primary.calls(key).length, 1);
      });
    }

    test("a cancelled stream: what the caller got, up to the cancel event, replayed", async () => {
      const key = newKey();
      primary.script(key, ["sse:50:100"]);
      const first = await postStream(key, chat(`${key} cancel`), async () => {
        await sleep(500);
        const cancel = await fetch(`${stack.url}/onejob/v1/jobs/${key}/cancel`, {
          method: "POST",
          headers: { Authorization: `Bearer ${DEV_KEY}` },
        });
        assert.equal(cancel.status, 202);
      });
      assert.match(first.text, /"stream_cancelled"/);
      await settled(key, "cancelled");
      assertReplayOf(await replayStream(key, chat(`${key} cancel`)), first, "cancelled");
      assert.equal(primary.calls(key).length, 1);
    });

    test("a duplicate that waited for the driver gets the driver's answer; later ones its replay", async () => {
      const key = newKey();
      primary.script(key, ["delay:400", "ok"]);
      const [first, waited] = await Promise.all([post(key, chat(`${key} wait`)), sleep(100).then(() => post(key, chat(`${key} wait`)))]);
      assert.equal(first.res.status, 200);
      assertReplayOf(waited, first, "completed");
      await waitFor("the job completed", async () => ({ ok: (await stack.getJob(key)).body.state === "completed" }));
      assertReplayOf(await replay(key, chat(`${key} wait`)), first, "completed");
      assert.equal(primary.calls(key).length, 1);
    });
  });
}
