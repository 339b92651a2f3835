// The official `openai` npm package with `fetch: oj.fetcher()`, against the
// worker under `wrangler dev` and a fake LLM server. A proxy between the SDK
// and the gateway can drop the connection after the request was processed:
// onejob's own retry must go out with the same key, and the model must be
// called once.
import assert from "node:assert/strict";
import http from "node:http";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { after, before, describe, test } from "node:test";

import OpenAI from "openai";

import { OneJob } from "../../crates/client/pkg/node.js";
import { startFakeLlm } from "../support/fake-llm.mjs";
import { DEV_KEY, startWorker } from "../support/worker.mjs";

let llm;
let worker;
let proxy;
let persistTo;

/** Forwards to the worker; `dropNext` makes it swallow the next response and reset the connection. */
async function startProxy(target) {
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
  llm = await startFakeLlm();
  persistTo = mkdtempSync(path.join(tmpdir(), "onejob-openai-"));
  worker = await startWorker({ vars: { UPSTREAM: llm.baseUrl }, persistTo });
  proxy = await startProxy(worker.url);
});

after(async () => {
  await proxy?.close();
  await worker?.stop();
  await llm?.close();
  if (persistTo) rmSync(persistTo, { recursive: true, force: true });
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
    const key = llm.allCalls().at(-1).headers["idempotency-key"];
    assert.match(key, /^[0-9a-f-]{36}$/);
  });

  test("the connection drops after the request was sent: one retry, same key, one upstream call", async () => {
    const events = [];
    const openai = client(events);
    proxy.dropNextResponse();
    const seenBefore = proxy.seen.length;
    const completion = await openai.chat.completions.create({
      model: "gpt-test",
      messages: [{ role: "user", content: "drop the first response" }],
    });
    assert.equal(completion.object, "chat.completion");
    const sent = proxy.seen.slice(seenBefore);
    assert.equal(sent.length, 2, "the SDK retried once");
    assert.equal(sent[0].key, sent[1].key, "with the same key");
    assert.equal(llm.calls(sent[0].key).length, 1, "the model was called once");
    assert.deepEqual(events.map((e) => e.type), ["attempt", "backoff", "attempt", "replayed", "settled"]);
  });
});
