// The official `openai` npm package with `fetch: oj.fetcher()`, against the
// worker under `wrangler dev` and a fake LLM server. A proxy between the SDK
// and the gateway can drop the connection after the request was processed:
// onejob's own retry must go out with the same key, and the model must be
// called once.
import assert from "node:assert/strict";
import http from "node:http";
import { after, before, describe, test } from "node:test";

import OpenAI from "openai";

import { OneJob } from "../../crates/client/pkg/node.js";
import { DEV_KEY, startStack } from "../support/harness.mjs";

let llm;
let worker;
let proxy;

/**
 * Forwards to the worker; `dropNext` makes it swallow the next response and
 * reset the connection. Response headers named in `strip` are dropped on the
 * way back (as a proxy that forwards only what it knows would).
 */
async function startProxy(target, { strip = [] } = {}) {
  const seen = [];
  let dropNext = false;
  const server = http.createServer(async (req, res) => {
    const chunks = [];
    for await (const chunk of req) chunks.push(chunk);
    seen.push({ key: req.headers["idempotency-key"], path: req.url });
    const headers = { ...req.headers };
    delete headers.host;
    const upstream = await fetch(`${target}${req.url}`, { method: req.method, headers, body: chunks.length ? Buffer.concat(chunks) : undefined });
    const body = Buffer.from(await upstream.arrayBuffer());
    if (dropNext) {
      dropNext = false;
      req.socket.destroy(); // the gateway did the work; the client never hears of it
      return;
    }
    // fetch() already decoded the body: drop the encoding headers with it.
    const responseHeaders = Object.fromEntries(upstream.headers);
    delete responseHeaders["content-encoding"];
    delete responseHeaders["content-length"];
    for (const name of strip) delete responseHeaders[name];
    res.writeHead(upstream.status, responseHeaders);
    res.end(body);
  });
  await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    url: `http://127.0.0.1:${server.address().port}`,
    seen,
    dropNextResponse() {
      dropNext = true;
    },
    close: () => new Promise((resolve) => server.close(resolve)),
  };
}

before(async () => {
  worker = await startStack();
  llm = worker.llm;
  proxy = await startProxy(worker.url);
});

after(async () => {
  await proxy?.close();
  await worker?.stop();
});

const client = (events = []) => {
  const oj = new OneJob({ storage: "memory", retry: { baseMs: 50, capMs: 200 }, onEvent: (e) => events.push(e) });
  // maxRetries: 0 — retries happen in one layer, onejob's, always with the same key.
  return new OpenAI({ baseURL: `${proxy.url}/v1`, apiKey: DEV_KEY, fetch: oj.fetcher(), maxRetries: 0 });
};

describe("openai SDK with fetch: oj.fetcher()", () => {
  test("a chat completion works and carries an idempotency key", async () => {
    const before = llm.allCalls().length;
    const completion = await client().chat.completions.create({
      model: "gpt-test",
      messages: [{ role: "user", content: "hello through onejob" }],
    });
    assert.equal(completion.object, "chat.completion");
    assert.match(completion.choices[0].message.content, /echo of \d+ bytes/);
    assert.equal(llm.allCalls().length, before + 1);
    assert.match(proxy.seen.at(-1).key, /^[0-9a-f-]{36}$/, "the SDK sent a UUIDv4 key");
  });

  test("the connection drops after the request was sent: one retry, same key, one upstream call", async () => {
    const events = [];
    const openai = client(events);
    proxy.dropNextResponse();
    const seenBefore = proxy.seen.length;
    const upstreamBefore = llm.allCalls().length;
    const completion = await openai.chat.completions.create({
      model: "gpt-test",
      messages: [{ role: "user", content: "drop the first response" }],
    });
    assert.equal(completion.object, "chat.completion");
    const sent = proxy.seen.slice(seenBefore);
    assert.equal(sent.length, 2, "the SDK retried once");
    assert.equal(sent[0].key, sent[1].key, "with the same key");
    // (The upstream sees a key derived from tenant + key, so count every call.)
    assert.equal(llm.allCalls().length - upstreamBefore, 1, "the model was called once");
    assert.deepEqual(events.map((e) => e.type), ["attempt", "backoff", "attempt", "replayed", "settled"]);
  });
});

/** An OpenAI-compatible upstream that answers every call with 503. */
async function startAlways503() {
  let calls = 0;
  const server = http.createServer(async (req, res) => {
    for await (const _ of req);
    calls += 1;
    const body = JSON.stringify({ error: { type: "overloaded", code: "overloaded", message: "try again later" } });
    res.writeHead(503, { "Content-Type": "application/json", "Content-Length": Buffer.byteLength(body) });
    res.end(body);
  });
  await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    baseUrl: `http://127.0.0.1:${server.address().port}/v1`,
    calls: () => calls,
    close: () => new Promise((resolve) => server.close(resolve)),
  };
}

describe("openai SDK at its default maxRetries, upstream always 503", () => {
  let down;
  let downWorker;
  let stripping;

  before(async () => {
    down = await startAlways503();
    const vars = { BACKOFF_BASE_MS: "10", BACKOFF_CAP_MS: "50" };
    downWorker = await startStack({ upstream: down.baseUrl, vars });
    stripping = await startProxy(downWorker.url, { strip: ["x-should-retry"] });
  });

  after(async () => {
    await stripping?.close();
    await downWorker?.stop();
    await down?.close();
  });

  /** create() through `oj.fetcher()` at the package's default maxRetries (2): its outcome, or "pending" after 60 s. */
  async function createAgainst(baseURL, events) {
    const oj = new OneJob({ storage: "memory", retry: { baseMs: 50, capMs: 200 }, onEvent: (e) => events.push(e) });
    const openai = new OpenAI({ baseURL, apiKey: DEV_KEY, fetch: oj.fetcher() });
    const started = Date.now();
    let timer;
    const hang = new Promise((resolve) => (timer = setTimeout(() => resolve("still pending after 60 s"), 60_000)));
    const outcome = await Promise.race([
      openai.chat.completions.create({ model: "gpt-test", messages: [{ role: "user", content: "always 503" }] }).then(
        () => "resolved",
        (error) => error,
      ),
      hang,
    ]);
    clearTimeout(timer);
    const elapsed = Date.now() - started;
    console.log(`openai at default maxRetries via ${baseURL}: ${outcome?.constructor?.name ?? outcome}, status ${outcome?.status}, ${elapsed} ms`);
    return outcome;
  }

  // Bug 1: the dead job's replayed 503 says x-should-retry: false, so the SDK
  // delivers it and the package does not retry.
  test("the dead job's 503 is final: create() rejects with APIError 503", async () => {
    const events = [];
    const outcome = await createAgainst(`${downWorker.url}/v1`, events);
    assert.ok(outcome instanceof OpenAI.APIError, `expected an APIError, got ${outcome}`);
    assert.equal(outcome.status, 503);
    assert.deepEqual(events.map((e) => e.type), ["attempt", "settled"]);
  });

  // Bug 12: the SDK handed out clones of a response it kept unread, and the
  // package cancels a body before each of its own retries: cancelling a
  // clone waits for the original forever, so create() never settled.
  test("a 503 that looks retryable: the package retries (cancelling bodies) and rejects with APIError 503 in bounded time", async () => {
    const events = [];
    const calls = down.calls();
    const outcome = await createAgainst(`${stripping.url}/v1`, events);
    assert.ok(outcome instanceof OpenAI.APIError, `expected an APIError, got ${outcome}`);
    assert.equal(outcome.status, 503);
    assert.equal(events.filter((e) => e.type === "gave_up").length, 3, "the package's three tries each reached onejob");
    assert.ok(down.calls() > calls, "the upstream was called");
  });
});
