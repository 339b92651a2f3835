// A crash in the middle of a call: kill -9 of the runtime while the upstream
// is working. The claim was durable before the call, so after the restart the
// job is held by the lost attempt until its lease ends, then known to be
// unknown, then (the policy allowing) tried once more: never two attempts at
// once, and every attempt in the audit.
import assert from "node:assert/strict";
import { after, before, test } from "node:test";

import { assertProblem, chat, newKey, sleep, startStack } from "../support/harness.mjs";

const UPSTREAM_TIMEOUT_MS = 1000; // the attempt lease is this + 10 s
const UNKNOWN_LEASE_MS = 1000;
let stack;

before(async () => {
  stack = await startStack({
    vars: { UPSTREAM_TIMEOUT_MS: String(UPSTREAM_TIMEOUT_MS), UNKNOWN_LEASE_MS: String(UNKNOWN_LEASE_MS), RESULT_CACHE: "off" },
  });
});

after(async () => {
  await stack?.stop();
});

test("kill -9 mid-call: the lost attempt holds the job for its lease, then one new attempt runs", async () => {
  const key = newKey();
  stack.llm.script(key, ["hang", "ok"]);
  const pending = stack.post(key, chat("crash")).catch((error) => ({ error }));
  await sleep(300);
  assert.equal(stack.llm.calls(key).length, 1, "the first attempt reached the provider");
  await stack.crashAndRestart();
  const lost = await pending;
  assert.ok(lost.error || lost.res.status >= 500, "the caller of the crashed runtime got no answer");

  const held = await stack.post(key, chat("crash"), { headers: { Prefer: "wait=0" } });
  const problem = assertProblem(held, 409, "request-in-progress");
  assert.ok(problem.retry_after_ms > 0 && problem.retry_after_ms <= UPSTREAM_TIMEOUT_MS + 10_000, JSON.stringify(problem));
  assert.equal(stack.llm.calls(key).length, 1, "no second attempt while the lost one holds the job");

  await sleep(problem.retry_after_ms + 100);
  const unknown = await stack.post(key, chat("crash"));
  assertProblem(unknown, 409, "outcome-unknown");
  await sleep(Number(unknown.res.headers.get("retry-after-ms")) + 100);
  const answered = await stack.post(key, chat("crash"));
  assert.equal(answered.res.status, 200, answered.text);
  assert.equal(answered.res.headers.get("onejob-attempt"), "2");
  assert.equal(stack.llm.calls(key).length, 2);
  const { body: job } = await stack.getJob(key);
  assert.deepEqual(job.attempts.map((a) => a.outcome), ["abandoned", "succeeded"]);
});

test("kill -9 mid-stream: after the restart the job is interrupted at once, its partial stream kept and closed, nothing called twice", async () => {
  const key = newKey();
  stack.llm.script(key, ["sse:40:100", "sse:5:10"]);
  const body = chat("crash mid-stream", { stream: true });
  const res = await fetch(`${stack.url}/v1/chat/completions`, {
    method: "POST",
    headers: { Authorization: "Bearer onejob-dev-key", "Idempotency-Key": key, "Content-Type": "application/json" },
    body: JSON.stringify(body),
  });
  assert.equal(res.status, 200);
  const reader = res.body.getReader();
  let received = "";
  const decoder = new TextDecoder();
  while ((received.match(/\n\n/g) ?? []).length < 8) {
    const { value, done } = await reader.read();
    if (done) break;
    received += decoder.decode(value, { stream: true });
  }
  await sleep(300); // the pump writes its batches every 100 ms
  await stack.crashAndRestart();
  const replay = await stack.post(key, body);
  assert.equal(replay.res.status, 200, replay.text);
  assert.equal(replay.res.headers.get("onejob-job-state"), "interrupted");
  const events = replay.text.split(/(?<=\n\n)/);
  assert.ok(events.length >= 8, `kept ${events.length} events`);
  assert.ok(replay.text.startsWith(received.slice(0, received.lastIndexOf("\n\n") + 2)), "the partial stream, byte for byte");
  assert.match(events.at(-1), /"stream_interrupted"/);
  assert.ok(!replay.text.includes("[DONE]"));
  const { body: job } = await stack.getJob(key);
  assert.equal(job.state, "interrupted");
  assert.deepEqual(job.attempts.map((a) => a.outcome), ["interrupted"]);
  assert.equal(stack.llm.calls(key).length, 1, "never sent to the provider again");
});

test("after a restart, results read back from storage: one kept with its job in one write, one after an earlier attempt's response", async () => {
  // The first: its response in the job's row and the job, one statement.
  // The second: the 503's response holds the row, so the 200 goes to the
  // responses' tables and the job is written after it (the two writes).
  const [first, second] = [newKey(), newKey()];
  stack.llm.script(first, ["ok"]);
  stack.llm.script(second, ["503", "ok"]);
  const answers = {};
  for (const key of [first, second]) {
    answers[key] = await stack.post(key, chat(`read back ${key}`));
    assert.equal(answers[key].res.status, 200, answers[key].text);
  }
  assert.equal(answers[second].res.headers.get("onejob-attempt"), "2");
  await stack.crashAndRestart(); // every object's memory gone: replays read storage
  for (const key of [first, second]) {
    const replay = await stack.post(key, chat(`read back ${key}`));
    assert.equal(replay.res.status, 200, replay.text);
    assert.equal(replay.res.headers.get("idempotent-replayed"), "true");
    assert.equal(replay.res.headers.get("onejob-attempt"), answers[key].res.headers.get("onejob-attempt"));
    assert.equal(replay.text, answers[key].text, "byte-identical");
  }
  assert.equal(stack.llm.calls(first).length, 1);
  assert.equal(stack.llm.calls(second).length, 2);
  const { body: job } = await stack.getJob(second);
  assert.deepEqual(job.attempts.map((a) => [a.outcome, a.status]), [["failed", 503], ["succeeded", 200]]);
});
