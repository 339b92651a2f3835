// Streamed answers through the SDK (`oj.fetch`, `oj.fetcher()` under the
// official `openai` package), against the worker under `wrangler dev` and
// the fake LLM streaming real SSE. A proxy between the SDK and the gateway
// cuts the connection of a streamed response in the middle of an event: the
// SDK must continue the same body from `GET …/jobs/{key}/stream?from=N`, so
// the reader sees one uninterrupted stream, and the model is called once.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";

import { createOpenAI } from "@ai-sdk/openai";
import { streamText } from "ai";
import OpenAI from "openai";

import { OneJob } from "../../crates/client/pkg/node.js";
import { startCuttingProxy as startProxy } from "../support/cutting-proxy.mjs";
import { DEV_KEY, chat, newKey, readBody, startStack } from "../support/harness.mjs";

let stack;
let proxy;

before(async () => {
  stack = await startStack();
  proxy = await startProxy(stack.url);
});

after(async () => {
  await proxy?.close();
  await stack?.stop();
});

const readText = async (res) => (await readBody(res)).text;

/** The finished stream as the gateway keeps it, read directly. */
async function finished(key) {
  const res = await fetch(`${stack.url}/onejob/v1/jobs/${key}/stream?from=0`, { headers: { Authorization: `Bearer ${DEV_KEY}` } });
  assert.equal(res.status, 200);
  return readText(res);
}

/** The key the SDK sent with the request it made since `from` (one key for the whole intent). */
function keySince(from) {
  const keys = new Set(proxy.seen.slice(from).map((s) => s.key).filter(Boolean));
  assert.equal(keys.size, 1, `one key: ${[...keys]}`);
  return [...keys][0];
}

const ANSWER = Array.from({ length: 20 }, (_, i) => `token${i} `).join("");

/** Scripts the fake LLM for every key this test's intent may use (its key is the SDK's). */
function scriptNextStreams(fault) {
  stack.llm.scriptAll([fault]);
}

describe("streamed answers through the SDK", () => {
  test("1. oj.fetch: a connection cut mid-event is continued from ?from=N; the body is the finished stream byte for byte; one upstream call", async () => {
    scriptNextStreams("sse:20:30");
    const events = [];
    const oj = new OneJob({ endpoint: proxy.url, token: DEV_KEY, storage: "memory", retry: { baseMs: 50, capMs: 200 }, onEvent: (e) => events.push(e) });
    const from = proxy.seen.length;
    const cutsBefore = proxy.cuts;
    proxy.cutNextStream(5);
    const res = await oj.fetch("/v1/chat/completions", {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify(chat("stream through a cut", { stream: true })),
    });
    assert.equal(res.status, 200);
    assert.match(res.headers.get("content-type"), /^text\/event-stream/);
    const text = await readText(res);
    const key = keySince(from);
    assert.equal(proxy.cuts, cutsBefore + 1, "the proxy cut the stream");
    const resumed = proxy.seen.slice(from).filter((s) => s.method === "GET");
    assert.ok(resumed.length >= 1, "the SDK asked for the rest");
    assert.equal(resumed[0].path, `/onejob/v1/jobs/${key}/stream?from=5`);
    assert.ok(text.endsWith("data: [DONE]\n\n"));
    assert.equal(text, await finished(key));
    assert.equal(stack.llm.calls(key).length, 1);
  });

  test("2. openai package at its defaults, stream: true, through the cut: every token exactly once, one upstream call", async () => {
    scriptNextStreams("sse:20:30");
    const oj = new OneJob({ storage: "memory" });
    const openai = new OpenAI({ baseURL: `${proxy.url}/v1`, apiKey: DEV_KEY, fetch: oj.fetcher() });
    const from = proxy.seen.length;
    const cutsBefore = proxy.cuts;
    proxy.cutNextStream(7);
    const stream = await openai.chat.completions.create({
      model: "gpt-test",
      messages: [{ role: "user", content: "stream through a cut, openai" }],
      stream: true,
    });
    let content = "";
    for await (const chunk of stream) content += chunk.choices[0]?.delta?.content ?? "";
    assert.equal(proxy.cuts, cutsBefore + 1, "the proxy cut the stream");
    assert.equal(content, ANSWER);
    assert.equal(stack.llm.calls(keySince(from)).length, 1);
  });

  test("2b. the Vercel AI SDK's streamText at its defaults, through the cut: the exact text, one upstream call", async () => {
    scriptNextStreams("sse:20:30");
    const oj = new OneJob({ storage: "memory" });
    const openai = createOpenAI({ baseURL: `${proxy.url}/v1`, apiKey: DEV_KEY, fetch: oj.fetcher() });
    const from = proxy.seen.length;
    const cutsBefore = proxy.cuts;
    proxy.cutNextStream(9);
    const result = streamText({ model: openai.chat("gpt-test"), prompt: "stream through a cut, ai sdk" });
    let content = "";
    for await (const part of result.textStream) content += part;
    assert.equal(proxy.cuts, cutsBefore + 1, "the proxy cut the stream");
    assert.equal(content, ANSWER);
    assert.equal(stack.llm.calls(keySince(from)).length, 1);
  });

  test("3. an uninterrupted stream through oj.fetch is the gateway's byte for byte, with no extra request", async () => {
    scriptNextStreams("sse:10:10");
    const oj = new OneJob({ endpoint: proxy.url, token: DEV_KEY, storage: "memory" });
    const from = proxy.seen.length;
    const res = await oj.fetch("/v1/chat/completions", {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify(chat("a clean stream", { stream: true })),
    });
    const text = await readText(res);
    assert.equal(proxy.seen.length - from, 1, "one request");
    const key = keySince(from);
    assert.equal(text, await finished(key));
    assert.ok(text.endsWith("data: [DONE]\n\n"));
    assert.equal(stack.llm.calls(key).length, 1);
  });
});
