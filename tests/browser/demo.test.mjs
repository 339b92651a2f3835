// End-to-end: the demo page in headless Chromium against the worker under
// `wrangler dev` (the same worker `make dev` runs: demo provider, www/ assets).
// Screenshots land in tests/artifacts/.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";

import { launchChromium, screenshot } from "../support/browser.mjs";
import { startStack } from "../support/harness.mjs";

let worker;
let browser;

before(async () => {
  worker = await startStack({ upstream: "demo" });
  browser = await launchChromium();
});

after(async () => {
  await browser?.close();
  await worker?.stop();
});

/** A new tab on the demo page; `initScript` runs in it before the page's own scripts. */
async function openDemo({ initScript } = {}) {
  const context = await browser.newContext({ viewport: { width: 1200, height: 1000 } });
  const page = await context.newPage();
  if (initScript) await page.addInitScript(initScript);
  const errors = [];
  page.on("pageerror", (error) => errors.push(error.message));
  await page.goto(`${worker.url}/`);
  await page.waitForSelector("body[data-ready=true]");
  return { context, page, errors };
}

/** The job of `key`, made by the demo user of `page` (the page calls with its user token). */
async function job(key, page) {
  const user = await page.evaluate(() => localStorage.getItem("onejob-demo-user"));
  const { status, body } = await worker.getJob(key, undefined, { user });
  assert.equal(status, 200);
  return body;
}

/** Asserts that the job of `key` completed after one upstream call (one attempt in the gateway's audit). */
async function assertCompletedOnce(key, page) {
  const record = await job(key, page);
  assert.equal(record.state, "completed");
  assert.equal(record.attempts.length, 1, "one upstream call");
}

const waitFor = (page, fn, arg, timeout = 20_000) => page.waitForFunction(fn, arg, { timeout });

/** The timeline's entries made by the SDK's events (not the page's own, such as the gateway's audit), in order. */
const SDK_EVENTS = ["attempt", "backoff", "replayed", "settled", "gave_up", "offline", "online", "warning"];
const sdkEvents = (page) => page.$$eval("#timeline li[data-kind]", (items, kinds) => items.map((li) => li.dataset.kind).filter((k) => kinds.includes(k)), SDK_EVENTS);

/**
 * Installed before the page's scripts, so it sits between the page (its own
 * fetch guard, the SDK) and the browser's network: records every fetch the
 * page lets through, with what navigator.onLine said at that moment.
 */
function fetchProbe() {
  const fetch = globalThis.fetch.bind(globalThis);
  globalThis.fetched = [];
  globalThis.fetch = (input, init) => {
    const url = new URL(input instanceof Request ? input.url : String(input), location.href);
    globalThis.fetched.push({ path: url.pathname, onLine: navigator.onLine });
    return fetch(input, init);
  };
}

describe("demo page", () => {
  test("triage and notify, clicked 5 times: one job, one row, one mail; the inbox page shows them", async () => {
    const { context, page, errors } = await openDemo();
    const ticket = `T-${Date.now()}`;
    await page.fill("#ticket-id", ticket);
    for (let i = 0; i < 5; i++) await page.click("#run-triage");
    await waitFor(page, () => document.getElementById("run-result").dataset.state === "completed");
    await waitFor(page, () => document.querySelectorAll("#run-effects tr").length === 2);
    assert.match(await page.textContent("#run-effects tr[data-effect=email]"), /done/);
    // The real rows and mails, read from the worker's D1.
    const rows = (await (await fetch(`${worker.url}/demo/tickets`)).json()).rows.filter((r) => r.ticket_id === ticket);
    const mails = (await (await fetch(`${worker.url}/demo/inbox`)).json()).rows.filter((m) => m.payload.ticket_id === ticket);
    assert.equal(rows.length, 1);
    assert.equal(mails.length, 1);
    assert.equal(rows[0].category, "billing");
    await screenshot(page, "triage-and-notify");
    const inbox = await context.newPage();
    await inbox.goto(`${worker.url}/inbox.html`);
    await inbox.waitForSelector("body[data-ready=true]");
    assert.equal(await inbox.locator("#mails tr", { hasText: ticket }).count(), 1);
    assert.equal(await inbox.locator("#rows tr", { hasText: ticket }).count(), 1);
    await screenshot(inbox, "demo-inbox");
    assert.deepEqual(errors, []);
    await context.close();
  });

  test("20 rapid clicks: one job, one upstream call, 20 identical results", async () => {
    const { context, page, errors } = await openDemo();
    await page.click("#burst");
    await waitFor(page, () => document.getElementById("shown").dataset.count === "20");
    await waitFor(page, () => document.getElementById("state").dataset.state === "completed");
    assert.equal(await page.getAttribute("#shown", "data-identical"), "true");
    const key = (await page.textContent("#key")).trim();
    const record = await job(key, page);
    assert.equal(record.attempts.length, 1);
    assert.equal(await page.locator("li[data-kind=attempt]").count(), 1, "one request left the page");
    await waitFor(page, () => document.getElementById("calls").dataset.count === "1");
    await screenshot(page, "20-rapid-clicks");
    assert.deepEqual(errors, []);
    await context.close();
  });

  test("reload during demo-slow: resume() finishes with the same key and one upstream call", async () => {
    const { context, page, errors } = await openDemo();
    await page.selectOption("#model", "demo-slow");
    await page.click("#classify");
    await page.waitForSelector("li[data-kind=attempt]");
    const key = (await page.textContent("#key")).trim();
    await page.waitForTimeout(1000);
    await page.reload();
    await page.waitForSelector("body[data-ready=true]", { timeout: 20_000 });
    await waitFor(page, () => document.getElementById("shown").dataset.count === "1");
    assert.equal((await page.textContent("#key")).trim(), key, "the same key after the reload");
    assert.ok((await page.locator("li[data-kind=resumed]").count()) >= 1);
    await assertCompletedOnce(key, page);
    await waitFor(page, () => document.getElementById("state").dataset.state === "completed");
    await screenshot(page, "reload-mid-request");
    assert.deepEqual(errors, []);
    await context.close();
  });

  test("streaming: the answer appears word by word, then as the triage result; one upstream call", async () => {
    const { context, page, errors } = await openDemo();
    await page.check("#stream");
    await page.selectOption("#model", "demo-slow");
    await page.click("#classify");
    // Part of the answer is on the page while the model is still writing.
    await waitFor(page, () => Number(document.getElementById("result").dataset.tokens ?? 0) >= 3);
    assert.equal(await page.getAttribute("#result", "class"), "result streaming");
    const partial = await page.textContent("#result");
    assert.match(partial, /^category: /);
    await waitFor(page, () => document.getElementById("shown").dataset.count === "1");
    assert.equal(await page.textContent("#result .category"), "billing");
    const key = (await page.textContent("#key")).trim();
    await waitFor(page, () => document.getElementById("state").dataset.state === "completed");
    const record = await job(key, page);
    assert.equal(record.attempts.length, 1);
    assert.ok(record.attempts[0].usage.total_tokens > 0, "usage from the stream is audited");
    await screenshot(page, "streaming");
    assert.deepEqual(errors, []);
    await context.close();
  });

  test("reload mid-stream: resume() shows the whole answer once, with one upstream call", async () => {
    const { context, page, errors } = await openDemo();
    await page.check("#stream");
    await page.selectOption("#model", "demo-slow");
    await page.click("#classify");
    await waitFor(page, () => Number(document.getElementById("result").dataset.tokens ?? 0) >= 3);
    const key = (await page.textContent("#key")).trim();
    await page.reload();
    await page.waitForSelector("body[data-ready=true]", { timeout: 30_000 });
    await waitFor(page, () => document.getElementById("shown").dataset.count === "1");
    assert.equal((await page.textContent("#key")).trim(), key, "the same key after the reload");
    assert.equal(await page.textContent("#result .category"), "billing");
    assert.ok((await page.locator("li[data-kind=resumed]").count()) >= 1);
    await waitFor(page, () => document.getElementById("state").dataset.state === "completed");
    const record = await job(key, page);
    assert.equal(record.attempts.length, 1, "one upstream call");
    // Read to its end: the intent is delivered and forgotten.
    assert.equal(await page.evaluate(() => Object.keys(localStorage).filter((k) => k.startsWith("onejob:")).length), 0);
    await screenshot(page, "reload-mid-stream");
    assert.deepEqual(errors, []);
    await context.close();
  });

  test("offline for 3 s (the browser says so): the SDK waits for the network instead of spending attempts, then one request, one job", async () => {
    const { context, page, errors } = await openDemo();
    await page.fill("#ticket", "Offline ticket: the app crashes when I upload a file.");
    await context.setOffline(true);
    await page.click("#classify");
    await page.waitForSelector("li[data-kind=offline]");
    await page.waitForTimeout(3000);
    assert.equal(await page.locator("li[data-kind=attempt]").count(), 0, "no attempt spent while offline");
    await context.setOffline(false);
    await waitFor(page, () => document.getElementById("shown").dataset.count === "1", null, 40_000);
    assert.match(await page.textContent("li[data-kind=online]"), /back online after [3-9]\.\d s/);
    assert.equal(await page.locator("li[data-kind=backoff]").count(), 0, "no backoff: the outage was waited out");
    assert.equal(await page.locator("li[data-kind=attempt]").count(), 1, "one request, sent once back online");
    const key = (await page.textContent("#key")).trim();
    await assertCompletedOnce(key, page);
    await waitFor(page, () => document.getElementById("state").dataset.state === "completed");
    await screenshot(page, "offline-3s");
    assert.deepEqual(errors, []);
    await context.close();
  });

  test('"Go offline 3 s" goes offline as a browser reports it: the SDK waits (no attempt spent, nothing sent), then one request and one upstream call', async () => {
    const { context, page, errors } = await openDemo({ initScript: fetchProbe });
    // What reached the network for the chat route, as the browser sent it.
    const chatRequests = [];
    page.on("request", (r) => {
      if (new URL(r.url()).pathname === "/v1/chat/completions") chatRequests.push(r.method());
    });
    await page.fill("#ticket", "Offline button ticket: the export to CSV is empty.");
    await page.click("#offline");
    // The click handler has run: for the next 3 s the page reads offline.
    assert.equal(await page.evaluate(() => navigator.onLine), false, "navigator.onLine reads false while offline");
    assert.equal(await page.textContent("#net"), "offline");
    await waitFor(page, () => document.getElementById("shown").dataset.count === "1", null, 40_000);
    // The SDK's own events: it waited for the network, then sent once.
    assert.deepEqual(await sdkEvents(page), ["offline", "online", "attempt", "settled"]);
    assert.match(await page.textContent("li[data-kind=offline]"), /the browser is offline: waiting for the network \(no attempt spent\)/);
    assert.match(await page.textContent("li[data-kind=online]"), /back online after \d+\.\d s: sending with the same key/);
    assert.equal(await page.evaluate(() => navigator.onLine), true, "the browser's own value is back");
    assert.equal(await page.textContent("#net"), "online");
    // Nothing left the page while it said it was offline; one chat request in all.
    const fetched = await page.evaluate(() => globalThis.fetched);
    assert.deepEqual(fetched.filter((f) => !f.onLine), [], "no fetch reached the network while offline");
    assert.equal(fetched.filter((f) => f.path === "/v1/chat/completions").length, 1);
    assert.deepEqual(chatRequests, ["POST"], "one chat request on the network");
    const key = (await page.textContent("#key")).trim();
    await assertCompletedOnce(key, page);
    await waitFor(page, () => document.getElementById("calls").dataset.count === "1");
    await screenshot(page, "offline-button");
    assert.deepEqual(errors, []);
    await context.close();
  });

  test("demo-flaky: the timeline shows a wait that honours Retry-After, then success", async () => {
    const { context, page, errors } = await openDemo();
    await page.fill("#ticket", "Flaky ticket: I cannot log in to my account since yesterday.");
    await page.selectOption("#model", "demo-flaky");
    await page.click("#classify");
    await waitFor(page, () => document.getElementById("shown").dataset.count === "1");
    await page.waitForSelector("li[data-kind=server-wait]");
    const waited = Number(await page.getAttribute("li[data-kind=server-wait]", "data-waited"));
    assert.ok(waited >= 1000, `the gateway waited ${waited} ms for Retry-After: 1`);
    await waitFor(page, () => document.getElementById("calls").dataset.count === "2");
    const record = await job((await page.textContent("#key")).trim(), page);
    assert.deepEqual(record.attempts.map((a) => [a.outcome, a.status]), [["failed", 503], ["succeeded", 200]]);
    await screenshot(page, "demo-flaky");
    assert.deepEqual(errors, []);
    await context.close();
  });
});
