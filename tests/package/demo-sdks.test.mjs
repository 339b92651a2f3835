// The official SDKs at their defaults against `make dev`'s worker and its
// built-in demo provider (no fake, no key): the Vercel AI SDK's default
// `openai(model)` speaks the Responses API, Anthropic's SDK the Messages
// API; both get answers, streamed and not, through `oj.fetcher()`.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";

import Anthropic from "@anthropic-ai/sdk";
import { createOpenAI } from "@ai-sdk/openai";
import { generateText, streamText } from "ai";

import { OneJob } from "../../crates/client/pkg/node.js";
import { DEV_KEY, startStack } from "../support/harness.mjs";

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
