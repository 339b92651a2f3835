// The official `@anthropic-ai/sdk` package at its defaults (default retries,
// default timeout) with `fetch: oj.fetcher()`, against the worker under
// `wrangler dev` with one anthropic-kind provider (a fake LLM speaking the
// Messages API). A proxy between the SDK and the gateway can swallow a
// response or cut a stream: onejob's retry must go out with the same key,
// and the model must be called once. The same SDK also runs bundled into a
// page on another origin in headless Chromium.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";

import Anthropic from "@anthropic-ai/sdk";

import { OneJob } from "../../crates/client/pkg/node.js";
import { screenshot } from "../support/browser.mjs";
import { startCuttingProxy } from "../support/cutting-proxy.mjs";
import { DEV_KEY, startStack } from "../support/harness.mjs";
import { buildPage, makeApp, openPage } from "../support/pages.mjs";

const PROVIDER_KEY = "sk-ant-provider-secret";
const ANSWER = (n) => Array.from({ length: n }, (_, i) => `token${i} `).join("");
const ask = (content) => ({ model: "claude-test", max_tokens: 64, messages: [{ role: "user", content }] });

let stack;
let claude;
let proxy;

before(async () => {
  stack = await startStack({
    providers: [{ name: "claude", kind: "anthropic", key: PROVIDER_KEY }],
    vars: { BACKOFF_BASE_MS: "50", BACKOFF_CAP_MS: "200" },
  });
  claude = stack.fakes.claude;
  proxy = await startCuttingProxy(stack.url);
});

after(async () => {
  await proxy?.close();
  await stack?.stop();
});

/** The SDK at its defaults (maxRetries 2, 10-minute timeout), through onejob and the proxy. */
const client = (events = []) => {
  const oj = new OneJob({ storage: "memory", retry: { baseMs: 50, capMs: 200 }, onEvent: (e) => events.push(e) });
  return new Anthropic({ baseURL: proxy.url, apiKey: DEV_KEY, fetch: oj.fetcher() });
};

/** Upstream calls and proxied requests made while `fn` runs. */
async function counting(fn) {
  const calls = claude.allCalls().length;
  const seen = proxy.seen.length;
  const result = await fn();
  return { result, calls: claude.allCalls().slice(calls), requests: proxy.seen.slice(seen) };
}

/** Each test scripts the fake for every key (the SDK picks the keys). */
function script(faults) {
  claude.scriptAll(faults);
}

describe("@anthropic-ai/sdk at its defaults with fetch: oj.fetcher()", () => {
  test("messages.create gets the answer; one upstream call with the provider's key; the SDK's request carries a key", async () => {
    script([]);
    const { result: reply, calls, requests } = await counting(() => client().messages.create(ask("hello claude through onejob")));
    assert.equal(reply.type, "message");
    assert.equal(reply.role, "assistant");
    assert.match(reply.content[0].text, /^echo of \d+ bytes$/);
    assert.deepEqual(reply.usage, { input_tokens: 11, output_tokens: 7 });
    assert.equal(calls.length, 1);
    assert.equal(requests.length, 1);
    assert.match(requests[0].key, /^[0-9a-f-]{36}$/, "onejob sent a UUIDv4 key");
    // The SDK sends its apiKey (here the tenant key) as a Bearer token (1.x)
    // or as x-api-key; the gateway takes either.
    const sent = requests[0].headers;
    assert.ok(sent.authorization === `Bearer ${DEV_KEY}` || sent["x-api-key"] === DEV_KEY, "the SDK sent the tenant key");
    assert.equal(calls[0].headers["x-api-key"], PROVIDER_KEY, "the provider gets its own key");
    assert.equal(calls[0].headers.authorization, undefined);
    assert.equal(calls[0].headers["anthropic-version"], requests[0].headers["anthropic-version"], "anthropic-version passed through");
    assert.ok(Object.values(calls[0].headers).every((v) => !String(v).includes(DEV_KEY)), "never the tenant key");
  });

  test("the response is lost after the gateway answered: onejob retries with the same key, the answer is replayed, one upstream call", async () => {
    script([]);
    const events = [];
    const anthropic = client(events);
    proxy.dropNextResponse();
    const drops = proxy.drops;
    const { result: reply, calls, requests } = await counting(() => anthropic.messages.create(ask("drop the first response")));
    assert.equal(reply.type, "message");
    assert.equal(proxy.drops, drops + 1, "the proxy swallowed a response");
    assert.equal(requests.length, 2, "the request went out twice");
    assert.equal(requests[0].key, requests[1].key, "with the same key");
    assert.equal(calls.length, 1, "the model was called once");
    assert.deepEqual(events.map((e) => e.type), ["attempt", "backoff", "attempt", "replayed", "settled"]);
  });

  test("422 surfaces as the SDK's error with status 422; not retried, upstream or by the SDK", async () => {
    script(["422*"]);
    const { result: error, calls, requests } = await counting(() => client().messages.create(ask("an invalid request")).then(() => "resolved", (e) => e));
    script([]);
    assert.ok(error instanceof Anthropic.UnprocessableEntityError, `expected UnprocessableEntityError, got ${error}`);
    assert.equal(error.status, 422);
    assert.equal(error.error?.error?.type, "invalid_request_error", "the provider's error body");
    assert.equal(calls.length, 1, "one upstream call");
    assert.equal(requests.length, 1, "the SDK did not retry");
  });

  test("529 overloaded, then ok: the gateway retries within the job; the SDK gets the answer; two upstream calls, one request", async () => {
    script(["529", "ok"]);
    const { result: reply, calls, requests } = await counting(() => client().messages.create(ask("overloaded once")));
    script([]);
    assert.equal(reply.type, "message");
    assert.equal(calls.length, 2);
    assert.equal(requests.length, 1);
  });

  test("messages.stream delivers the text through the gateway; one upstream call", async () => {
    script(["sse:10:20"]);
    const { result, calls } = await counting(async () => {
      const stream = client().messages.stream(ask("stream to me"));
      const deltas = [];
      stream.on("text", (delta) => deltas.push(delta));
      const final = await stream.finalMessage();
      return { deltas, final };
    });
    script([]);
    assert.equal(result.deltas.join(""), ANSWER(10));
    assert.equal(result.final.content[0].text, ANSWER(10));
    assert.equal(result.final.stop_reason, "end_turn");
    assert.equal(calls.length, 1);
    assert.equal(JSON.parse(calls[0].body).stream, true);
  });

  test("create({ stream: true }) through a connection cut mid-stream: every token once, one upstream call", async () => {
    script(["sse:20:30"]);
    const cuts = proxy.cuts;
    proxy.cutNextStream(7);
    const { result: text, calls, requests } = await counting(async () => {
      const stream = await client().messages.create({ ...ask("stream through a cut"), stream: true });
      let text = "";
      for await (const event of stream) if (event.type === "content_block_delta") text += event.delta.text;
      return text;
    });
    script([]);
    assert.equal(proxy.cuts, cuts + 1, "the proxy cut the stream");
    assert.equal(text, ANSWER(20));
    assert.equal(calls.length, 1);
    assert.ok(requests.some((r) => r.method === "GET" && r.path.includes("/stream?from=")), "onejob asked for the rest");
  });
});

describe("@anthropic-ai/sdk bundled into a page on another origin", () => {
  let app;
  before(() => {
    app = makeApp(["@anthropic-ai/sdk"]);
  });
  after(() => {
    app?.remove();
  });

  test("messages.create and messages.stream in headless Chromium: the answers, one upstream call each", async () => {
    script([]);
    const dist = buildPage(
      app.dir,
      "anthropic-web",
      `import Anthropic from "@anthropic-ai/sdk";
import { OneJob } from "onejob";
const endpoint = new URLSearchParams(location.search).get("endpoint");
const oj = new OneJob({ endpoint });
// dangerouslyAllowBrowser: the key here is a onejob tenant key, not the provider's.
const anthropic = new Anthropic({ baseURL: endpoint, apiKey: "${DEV_KEY}", fetch: oj.fetcher(), dangerouslyAllowBrowser: true });
try {
  const reply = await anthropic.messages.create({ model: "claude-test", max_tokens: 64, messages: [{ role: "user", content: "from the browser" }] });
  document.body.dataset.created = reply.content[0].text;
  const stream = anthropic.messages.stream({ model: "claude-test", max_tokens: 64, messages: [{ role: "user", content: "stream in the browser" }] });
  document.body.dataset.streamed = await stream.finalText();
  document.body.dataset.result = "ok";
} catch (error) {
  document.body.dataset.result = "error";
  document.body.textContent = String(error);
}
`,
    );
    // The first call answers as JSON, the streamed one as SSE.
    script(["ok", "sse:6:20"]);
    const calls = claude.allCalls().length;
    let opened;
    try {
      opened = await openPage(dist, stack.url);
      const { page, failed } = opened;
      assert.equal(await page.getAttribute("body", "data-result"), "ok", `${await page.textContent("body")}\n${failed.join("\n")}`);
      assert.match(await page.getAttribute("body", "data-created"), /^echo of \d+ bytes$/);
      assert.equal(await page.getAttribute("body", "data-streamed"), ANSWER(6));
      const made = claude.allCalls().slice(calls);
      assert.equal(made.length, 2, "one upstream call each");
      assert.ok(made.every((c) => c.headers["x-api-key"] === PROVIDER_KEY));
      await screenshot(page, "anthropic-in-browser");
    } finally {
      script([]);
      await opened?.close();
    }
  });
});
