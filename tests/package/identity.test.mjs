// One definition of a request's identity (core `Fingerprint::of_url`): the
// SDK and the gateway must compute the same fingerprint for the same request,
// query string included, or a retry after a reload could be refused as
// "another request under this key".
import assert from "node:assert/strict";
import { after, before, test } from "node:test";

import { OneJob } from "../../crates/client/pkg/node.js";
import { DEV_KEY, startStack } from "../support/harness.mjs";

let stack;

before(async () => {
  stack = await startStack();
});

after(async () => {
  await stack?.stop();
});

test("the SDK's fingerprint of a request equals the gateway's, query string included", async () => {
  const events = [];
  const oj = new OneJob({ endpoint: stack.url, token: DEV_KEY, storage: "memory", onEvent: (e) => events.push(e) });
  const body = JSON.stringify({ model: "gpt-test", temperature: 1.0, messages: [{ role: "user", content: "azure deployment" }] });
  const res = await oj.fetch("/v1/chat/completions?api-version=2024-10-21", {
    method: "POST",
    headers: { "Content-Type": "application/json" },
    body,
  });
  assert.equal(res.status, 200, await res.text());
  const settled = events.find((e) => e.type === "settled");
  assert.ok(settled, JSON.stringify(events));
  const { body: job } = await stack.getJob(settled.key);
  // An unnamed intent is identified by its request's fingerprint.
  assert.equal(settled.intent, `fp:${job.fingerprint}`);
  assert.equal(stack.llm.calls(settled.key)[0].path, "/v1/chat/completions?api-version=2024-10-21");
});
