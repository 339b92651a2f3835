// Streamed jobs: one upstream stream per key, owned by the Ledger, followed
// live by the first caller and every duplicate, resumable from an event
// offset, and replayed byte for byte once finished. The fake LLM streams
// real SSE over real HTTP.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";

import { DEV_KEY, chat, newKey, readBody, sleep, startStack } from "../support/harness.mjs";

let stack;

before(async () => {
  stack = await startStack({ vars: { UPSTREAM_TIMEOUT_MS: "5000" } });
});

after(async () => {
  await stack?.stop();
});

const streamed = (content) => chat(content, { stream: true });

/** POSTs a streamed request; resolves once headers arrive. */
function open(key, body, { headers = {} } = {}) {
  return fetch(`${stack.url}/v1/chat/completions`, {
    method: "POST",
    headers: { Authorization: `Bearer ${DEV_KEY}`, "Idempotency-Key": key, "Content-Type": "application/json", ...headers },
    body: JSON.stringify(body),
  });
}

const readAll = readBody;

const events = (text) => text.split(/(?<=\n\n)/).filter((e) => e.length > 0);

describe("streamed jobs", () => {
  test("1. the first event reaches the client long before the stream ends", async () => {
    const key = newKey();
    stack.llm.script(key, ["sse:20:100"]);
    const started = performance.now();
    const res = await open(key, streamed("live"));
    assert.equal(res.status, 200);
    assert.match(res.headers.get("content-type"), /^text\/event-stream/);
    assert.equal(res.headers.get("cache-control"), "no-cache");
    const { text, firstByteMs, totalMs } = await readAll(res, started);
    console.log(`stream: first byte after ${firstByteMs.toFixed(0)} ms, end after ${totalMs.toFixed(0)} ms (20 events 100 ms apart)`);
    assert.ok(firstByteMs < totalMs / 3, `first byte ${firstByteMs} ms, total ${totalMs} ms`);
    assert.ok(text.endsWith("data: [DONE]\n\n"));
    assert.equal(events(text).length, 23);
    const { body: job } = await stack.getJob(key);
    assert.equal(job.state, "completed");
    assert.equal(job.attempts[0].outcome, "succeeded");
    assert.deepEqual(job.attempts[0].usage, { prompt_tokens: 10, completion_tokens: 20, total_tokens: 30 });
    const { started_ms, first_byte_ms, latency_ms } = job.attempts[0];
    assert.ok(first_byte_ms - started_ms < latency_ms / 3, `time to first byte ${first_byte_ms - started_ms} ms of ${latency_ms} ms`);
  });

  test("2. 100 duplicates joining mid-stream get the same bytes from event 0; one upstream call", async () => {
    const key = newKey();
    stack.llm.script(key, ["sse:20:50"]);
    const first = readAll(await open(key, streamed("shared")));
    await sleep(400);
    const duplicates = await Promise.all(Array.from({ length: 100 }, () => open(key, streamed("shared"))));
    assert.ok(duplicates.every((d) => d.status === 200 && d.headers.get("idempotent-replayed") === "true"));
    const texts = await Promise.all(duplicates.map((d) => readAll(d).then((r) => r.text)));
    const original = (await first).text;
    assert.ok(texts.every((t) => t === original), "byte-identical");
    assert.equal(stack.llm.calls(key).length, 1);
  });

  test("3. a reader that stops after k events resumes with ?from=k: nothing missing, nothing repeated", async () => {
    const key = newKey();
    stack.llm.script(key, ["sse:30:30"]);
    const res = await open(key, streamed("resume"));
    const reader = res.body.getReader();
    const decoder = new TextDecoder();
    let prefix = "";
    while (events(prefix).filter((e) => e.endsWith("\n\n")).length < 7) {
      const { value } = await reader.read();
      prefix += decoder.decode(value, { stream: true });
    }
    await reader.cancel(); // the caller goes away; the stream goes on
    const complete = events(prefix).filter((e) => e.endsWith("\n\n"));
    const k = complete.length;
    const tail = await fetch(`${stack.url}/onejob/v1/jobs/${key}/stream?from=${k}`, { headers: { Authorization: `Bearer ${DEV_KEY}` } });
    assert.equal(tail.status, 200);
    const rest = (await readAll(tail)).text;
    const whole = (await readAll(await open(key, streamed("resume")))).text;
    assert.equal(complete.join("") + rest, whole);
    assert.ok(whole.endsWith("data: [DONE]\n\n"));
    assert.equal(stack.llm.calls(key).length, 1);
    // Last-Event-ID is the same cursor.
    const byHeader = await fetch(`${stack.url}/onejob/v1/jobs/${key}/stream`, { headers: { Authorization: `Bearer ${DEV_KEY}`, "Last-Event-ID": String(k) } });
    assert.equal((await readAll(byHeader)).text, rest);
    // No id: lines unless asked for; asked for, each event carries its number.
    assert.ok(!whole.includes("\nid: ") && !whole.startsWith("id: "));
    const numbered = await fetch(`${stack.url}/onejob/v1/jobs/${key}/stream?from=${k}&ids=1`, { headers: { Authorization: `Bearer ${DEV_KEY}` } });
    const withIds = events((await readAll(numbered)).text);
    assert.deepEqual(withIds.map((e) => e.split("\n")[0]), events(rest).map((_, i) => `id: ${k + 1 + i}`));
    assert.deepEqual(withIds.map((e) => e.slice(e.indexOf("\n") + 1)), events(rest));
  });

  test("4. a finished stream replays byte for byte, also after a restart", async () => {
    const key = newKey();
    stack.llm.script(key, ["sse:10:10"]);
    const original = (await readAll(await open(key, streamed("replay")))).text;
    await sleep(100);
    const replay = await open(key, streamed("replay"));
    assert.equal(replay.headers.get("onejob-job-state"), "completed");
    assert.equal(replay.headers.get("x-should-retry"), "false");
    assert.equal((await readAll(replay)).text, original);
    await stack.restart();
    assert.equal((await readAll(await open(key, streamed("replay")))).text, original);
    assert.equal(stack.llm.calls(key).length, 1);
  });

  test("5a. the upstream drops mid-stream: partial bytes, the gateway's error event, interrupted, never called again", async () => {
    const key = newKey();
    stack.llm.script(key, ["sse-drop:5:20", "sse:5:20"]);
    const { text } = await readAll(await open(key, streamed("drop")));
    const received = events(text);
    assert.equal(received.length, 6);
    assert.match(received.at(-1), /"stream_interrupted"/);
    assert.ok(!text.includes("[DONE]"));
    await sleep(100);
    const { body: job } = await stack.getJob(key);
    assert.equal(job.state, "interrupted");
    assert.equal(job.attempts[0].error_class, "stream_interrupted");
    const replay = await open(key, streamed("drop"));
    assert.equal(replay.headers.get("onejob-job-state"), "interrupted");
    assert.equal((await readAll(replay)).text, text);
    assert.equal(stack.llm.calls(key).length, 1);
  });

  test("5b. no [DONE] before a clean end is interrupted too; an error event is kept and final", async () => {
    const noDone = newKey();
    stack.llm.script(noDone, ["sse-nodone:3:10"]);
    const cut = (await readAll(await open(noDone, streamed("no done")))).text;
    assert.match(events(cut).at(-1), /"stream_interrupted"/);
    const failing = newKey();
    stack.llm.script(failing, ["sse-error:3:10", "sse:3:10"]);
    const failed = (await readAll(await open(failing, streamed("error")))).text;
    assert.match(events(failed).at(-1), /the model failed mid-answer/);
    await sleep(100);
    const { body: job } = await stack.getJob(failing);
    assert.equal(job.state, "completed");
    assert.deepEqual([job.attempts[0].outcome, job.attempts[0].error_class], ["rejected", "stream_error"]);
    assert.equal((await readAll(await open(failing, streamed("error")))).text, failed);
    assert.equal(stack.llm.calls(failing).length, 1);
  });

  test("10. cancel mid-stream: the upstream is aborted, the partial stream kept, cancelled, replayed as such", async () => {
    const key = newKey();
    stack.llm.script(key, ["sse:50:100"]);
    const goneBefore = stack.llm.streams.clientGone;
    const res = await open(key, streamed("cancel me"));
    const reading = readAll(res);
    await sleep(600);
    const cancel = () =>
      fetch(`${stack.url}/onejob/v1/jobs/${key}/cancel`, { method: "POST", headers: { Authorization: `Bearer ${DEV_KEY}` } });
    const first = await cancel();
    assert.equal(first.status, 202);
    const { text } = await reading;
    assert.match(events(text).at(-1), /"stream_cancelled"/);
    assert.ok(!text.includes("[DONE]"));
    await sleep(200);
    assert.equal(stack.llm.streams.clientGone, goneBefore + 1, "the provider saw the connection closed");
    const { body: job } = await stack.getJob(key);
    assert.equal(job.state, "cancelled");
    assert.deepEqual([job.attempts[0].outcome, job.attempts[0].error_class], ["cancelled", "cancelled"]);
    const again = await cancel();
    assert.equal(again.status, 200, "cancelling again changes nothing");
    assert.equal((await again.json()).state, "cancelled");
    const replay = await open(key, streamed("cancel me"));
    assert.equal(replay.headers.get("onejob-job-state"), "cancelled");
    assert.equal((await readAll(replay)).text, text);
    assert.equal(stack.llm.calls(key).length, 1);
    const unknown = await fetch(`${stack.url}/onejob/v1/jobs/${newKey()}/cancel`, { method: "POST", headers: { Authorization: `Bearer ${DEV_KEY}` } });
    assert.equal(unknown.status, 404);
  });

  test("7. a stream larger than 2 MB spans rows and replays intact", async () => {
    const key = newKey();
    stack.llm.script(key, ["sse-big:12:300000"]);
    const original = (await readAll(await open(key, streamed("big")))).text;
    assert.ok(original.length > 3_000_000);
    await sleep(200);
    assert.equal((await readAll(await open(key, streamed("big")))).text, original);
    assert.equal(stack.llm.calls(key).length, 1);
  });
});

test("the demo's stream misbehaviours: demo-stream-drop is interrupted, demo-stream-error is kept as it failed", async () => {
  const demo = await startStack({ upstream: "demo" });
  try {
    for (const [model, state, last] of [["demo-stream-drop", "interrupted", /stream_interrupted/], ["demo-stream-error", "completed", /failed mid-answer/]]) {
      const key = newKey();
      const res = await fetch(`${demo.url}/v1/chat/completions`, {
        method: "POST",
        headers: { Authorization: `Bearer ${DEV_KEY}`, "Idempotency-Key": key, "Content-Type": "application/json" },
        body: JSON.stringify({ model, stream: true, messages: [{ role: "user", content: "refund asap, charged twice" }] }),
      });
      const { text } = await readAll(res);
      assert.match(events(text).at(-1), last, model);
      assert.ok(!text.includes("[DONE]"), model);
      await sleep(100);
      assert.equal((await demo.getJob(key)).body.state, state, model);
    }
  } finally {
    await demo.stop();
  }
});

test("the demo provider streams its answer word by word, ending with [DONE]", async () => {
  const demo = await startStack({ upstream: "demo" });
  try {
    const res = await fetch(`${demo.url}/v1/chat/completions`, {
      method: "POST",
      headers: { Authorization: `Bearer ${DEV_KEY}`, "Idempotency-Key": newKey(), "Content-Type": "application/json" },
      body: JSON.stringify({ model: "demo", stream: true, stream_options: { include_usage: true }, messages: [{ role: "user", content: "refund asap, charged twice" }] }),
    });
    assert.equal(res.status, 200);
    const { text, firstByteMs, totalMs } = await readAll(res);
    assert.ok(firstByteMs < totalMs / 2, `first byte ${firstByteMs} ms of ${totalMs} ms`);
    const chunks = events(text).filter((e) => e.startsWith("data: {")).map((e) => JSON.parse(e.slice(6)));
    const answer = chunks.flatMap((c) => c.choices.map((choice) => choice.delta.content ?? "")).join("");
    assert.match(answer, /^category: billing\npriority: high\nsummary: /);
    assert.ok(chunks.some((c) => c.usage?.total_tokens > 0));
    assert.ok(text.endsWith("data: [DONE]\n\n"));
  } finally {
    await demo.stop();
  }
});
