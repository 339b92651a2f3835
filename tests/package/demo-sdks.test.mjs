// The official SDKs at their defaults against `make dev`'s worker and its
// built-in demo provider (no fake, no key): the Vercel AI SDK's default
// `openai(model)` speaks the Responses API, Anthropic's SDK the Messages
// API; both get answers, streamed and not, through `oj.fetcher()`, in Node
// and (the AI SDK) bundled into a page on another origin.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";

import Anthropic from "@anthropic-ai/sdk";
import { createOpenAI } from "@ai-sdk/openai";
import { generateText, streamText } from "ai";

import { OneJob } from "../../crates/client/pkg/node.js";
import { DEV_KEY, startStack } from "../support/harness.mjs";
import { buildPage, makeApp, openPage } from "../support/pages.mjs";

describe("the official SDKs against the demo provider", () => {
  let stack;
  before(async () => {
    stack = await startStack({ upstream: "demo" });
  });
  after(() => stack?.stop());

  const oj = () => new OneJob({ storage: "memory" });

  test("Vercel AI SDK, default provider (Responses API): generateText and streamText", async () => {
    const openai = createOpenAI({ baseURL: `${stack.url}/v1`, apiKey: DEV_KEY, fetch: oj().fetcher() });
    const { text, usage } = await generateText({ model: openai("demo"), prompt: "I was charged twice, refund please" });
    assert.match(text, /^category: billing\npriority: high\nsummary: I was charged twice/);
    assert.ok(usage.inputTokens > 0 && usage.outputTokens > 0, JSON.stringify(usage));
    const streamed = streamText({ model: openai("demo"), prompt: "I cannot log in to my account" });
    let joined = "";
    for await (const delta of streamed.textStream) joined += delta;
    assert.match(joined, /^category: account\n/);
    assert.equal(joined, await streamed.text);
  });

  test("Anthropic SDK at its defaults: create and stream", async () => {
    const anthropic = new Anthropic({ baseURL: stack.url, apiKey: DEV_KEY, fetch: oj().fetcher() });
    const message = await anthropic.messages.create({
      model: "demo",
      max_tokens: 200,
      messages: [{ role: "user", content: "the app crashes on start" }],
    });
    assert.match(message.content[0].text, /^category: bug\n/);
    assert.ok(message.usage.input_tokens > 0);
    const stream = anthropic.messages.stream({ model: "demo", max_tokens: 200, messages: [{ role: "user", content: "feature request: dark mode" }] });
    const final = await stream.finalMessage();
    assert.match(final.content[0].text, /^category: feature_request\n/);
  });
});

describe("the Vercel AI SDK's default provider bundled into a page on another origin, against the demo", () => {
  let stack;
  let app;
  before(async () => {
    stack = await startStack({ upstream: "demo" });
    app = makeApp(["ai", "@ai-sdk/openai"]);
  });
  after(async () => {
    app?.remove();
    await stack?.stop();
  });

  test("generateText and streamText (Responses API) in headless Chromium: the triage, streamed whole", async () => {
    const dist = buildPage(
      app.dir,
      "vercel-web",
      `import { createOpenAI } from "@ai-sdk/openai";
import { generateText, streamText } from "ai";
import { OneJob } from "onejob";
const endpoint = new URLSearchParams(location.search).get("endpoint");
const oj = new OneJob({ endpoint });
const openai = createOpenAI({ baseURL: endpoint + "/v1", apiKey: "${DEV_KEY}", fetch: oj.fetcher() });
try {
  document.body.dataset.generated = (await generateText({ model: openai("demo"), prompt: "refund my card please" })).text;
  const streamed = streamText({ model: openai("demo"), prompt: "the login page is broken" });
  let joined = "";
  for await (const delta of streamed.textStream) joined += delta;
  document.body.dataset.streamed = joined;
  document.body.dataset.result = "ok";
} catch (error) {
  document.body.dataset.result = "error";
  document.body.textContent = String(error);
}
`,
    );
    const { page, failed, close } = await openPage(dist, stack.url);
    try {
      assert.equal(await page.getAttribute("body", "data-result"), "ok", `${await page.textContent("body")}\n${failed.join("\n")}`);
      assert.match(await page.getAttribute("body", "data-generated"), /^category: billing\n/);
      assert.match(await page.getAttribute("body", "data-streamed"), /^category: account\npriority: normal\nsummary: the login page is broken$/);
    } finally {
      await close();
    }
  });
});
