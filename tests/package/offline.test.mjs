// Offline-aware retries, in headless Chromium against the gateway: the page
// goes offline (the browser's own switch: navigator.onLine false, every
// request fails) for 10 s while a request is pending, with the SDK at its
// default options. The SDK must wait for `online` rather than spend its
// attempts, then finish with the same key, without resume(); an abort during
// the wait must end it at once.
import assert from "node:assert/strict";
import { cpSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import path from "node:path";
import { after, before, describe, test } from "node:test";
import { fileURLToPath } from "node:url";

import { launchChromium } from "../support/browser.mjs";
import { DEV_KEY, sleep, startStack } from "../support/harness.mjs";
import { serveStatic } from "../support/pages.mjs";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");

let dir;
let stack;
let server;
let browser;

before(async () => {
  mkdirSync(path.join(root, "target"), { recursive: true });
  dir = mkdtempSync(path.join(root, "target", "offline-"));
  cpSync(path.join(root, "crates/client/pkg"), path.join(dir, "onejob"), { recursive: true });
  writeFileSync(
    path.join(dir, "index.html"),
    `<!doctype html><html><body><script type="module">
import { OneJob } from "/onejob/index.js";
window.events = [];
window.oj = new OneJob({ endpoint: new URLSearchParams(location.search).get("endpoint"), token: "${DEV_KEY}",
  storage: "memory", onEvent: (e) => window.events.push(e) });
window.ask = (content, signal) => window.oj.fetch("/v1/chat/completions", { method: "POST", signal,
  headers: { "Content-Type": "application/json" }, body: JSON.stringify({ model: "gpt-test", messages: [{ role: "user", content }] }) })
  .then(async (res) => ({ status: res.status, key: res.headers.get("Idempotency-Key"), text: await res.text() }), (e) => ({ error: e.name }));
document.body.dataset.ready = "yes";
</script></body></html>`,
  );
  stack = await startStack();
  server = await serveStatic(dir);
  browser = await launchChromium();
});

after(async () => {
  await browser?.close();
  server?.close();
  await stack?.stop();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

async function openPage() {
  const context = await browser.newContext();
  const page = await context.newPage();
  await page.goto(`http://localhost:${server.address().port}/?endpoint=${encodeURIComponent(stack.url)}`);
  await page.waitForFunction(() => document.body.dataset.ready);
  return { context, page };
}

describe("offline-aware retries", () => {
  test("default options carry a request through a 10 s outage: no attempt spent offline, the same key, one upstream call", async () => {
    const { context, page } = await openPage();
    try {
      const calls = stack.llm.allCalls().length;
      await context.setOffline(true);
      assert.equal(await page.evaluate(() => navigator.onLine), false);
      await page.evaluate(() => { window.pending = window.ask("asked while offline"); });
      await sleep(10_000);
      const whileOffline = await page.evaluate(() => window.events.map((e) => e.type));
      assert.deepEqual(whileOffline, ["offline"], "waiting, not spending attempts");
      await context.setOffline(false);
      const result = await page.evaluate(() => window.pending);
      assert.equal(result.status, 200, JSON.stringify(result));
      assert.match(result.text, /echo of \d+ bytes/);
      const events = await page.evaluate(() => window.events);
      assert.deepEqual(events.map((e) => e.type), ["offline", "online", "attempt", "settled"]);
      assert.ok(events[1].waitedMs >= 9_500, `waited ${events[1].waitedMs} ms`);
      assert.equal(new Set(events.map((e) => e.key)).size, 1, "one key throughout");
      assert.equal(events[2].attempt, 1, "the outage cost no attempt");
      assert.equal(stack.llm.allCalls().length, calls + 1, "one upstream call");
    } finally {
      await context.close();
    }
  });

  test("an abort while waiting for the network rejects at once with the signal's reason", async () => {
    const { context, page } = await openPage();
    try {
      await context.setOffline(true);
      const result = await page.evaluate(async () => {
        const controller = new AbortController();
        const pending = window.ask("aborted while offline", controller.signal);
        await new Promise((r) => setTimeout(r, 300));
        const started = performance.now();
        controller.abort();
        const outcome = await pending;
        return { ...outcome, ms: performance.now() - started, events: window.events.map((e) => e.type) };
      });
      assert.equal(result.error, "AbortError");
      assert.ok(result.ms < 200, `rejected after ${result.ms} ms`);
      assert.deepEqual(result.events, ["offline"]);
    } finally {
      await context.close();
    }
  });
});
