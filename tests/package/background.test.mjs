// The SDK's background mode (issue 9): `oj.fetch(…, { background: true })`
// sends `Prefer: respond-async`, follows the accepted job and resolves with
// its result; a second client (a reloaded page) resumes the stored intent
// and gets the same result without a second upstream call.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";

import { OneJob } from "../../crates/client/pkg/node.js";
import { DEV_KEY, chat, sleep, startStack } from "../support/harness.mjs";

/**
 * A Web Storage stand-in shared by two clients, as a page's localStorage is
 * across a reload (Node has none).
 */
class Storage {
  #items = new Map();
  getItem(k) {
    return this.#items.has(k) ? this.#items.get(k) : null;
  }
  setItem(k, v) {
    this.#items.set(k, String(v));
  }
  removeItem(k) {
    this.#items.delete(k);
  }
  key(i) {
    return [...this.#items.keys()][i] ?? null;
  }
  get length() {
    return this.#items.size;
  }
}

describe("background jobs from the SDK", () => {
  let stack;
  before(async () => {
    stack = await startStack({ vars: { BACKOFF_BASE_MS: "50", BACKOFF_CAP_MS: "100" } });
  });
  after(() => stack?.stop());

  const request = (content) => ({
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify(chat(content)),
  });

  test("resolves with the job's result once it has run in the queue; polls are not attempts", async () => {
    const events = [];
    const oj = new OneJob({ endpoint: stack.url, token: DEV_KEY, storage: "memory", onEvent: (e) => events.push(e) });
    stack.llm.scriptAll(["503", "delay:800"]);
    try {
      const res = await oj.fetch("/v1/chat/completions", request("background from the sdk"), { background: true });
      assert.equal(res.status, 200);
      assert.equal(res.headers.get("idempotent-replayed"), "true", "the finished job's stored result");
      const body = await res.json();
      assert.equal(body.object, "chat.completion");
      const key = events.find((e) => e.type === "attempt").key;
      assert.equal(stack.llm.calls(key).length, 2, "the 503 and the answer, both from the queue's consumer");
      const attempts = events.filter((e) => e.type === "attempt").length;
      assert.equal(attempts, 2, "one submission, one fetch of the result");
      assert.ok(events.some((e) => e.type === "backoff" && e.reason.includes("background")), "it said it was waiting on the job");
      const { body: job } = await stack.getJob(key);
      assert.equal(job.background, true);
      assert.equal(job.enqueued, 1);
    } finally {
      stack.llm.scriptAll([]);
    }
  });

  test("a caller's AbortSignal ends the wait; a reloaded client resumes the intent and gets the result once", async () => {
    globalThis.localStorage = new Storage();
    try {
      stack.llm.scriptAll(["delay:1500"]);
      const first = new OneJob({ endpoint: stack.url, token: DEV_KEY, storage: "local" });
      const controller = new AbortController();
      const pending = first.fetch("/v1/chat/completions", { ...request("resume me"), signal: controller.signal }, { background: true });
      await sleep(400);
      controller.abort(new Error("the page went away"));
      await assert.rejects(pending, /went away/);
      // The "reloaded page": a new client on the same storage.
      const second = new OneJob({ endpoint: stack.url, token: DEV_KEY, storage: "local" });
      const resumed = await second.resume();
      assert.equal(resumed.length, 1);
      const { key, response } = resumed[0];
      assert.equal(response.status, 200);
      await response.text();
      assert.equal(stack.llm.calls(key).length, 1, "one upstream call across the abort and the resume");
    } finally {
      stack.llm.scriptAll([]);
      delete globalThis.localStorage;
    }
  });
});
