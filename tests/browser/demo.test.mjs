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
  test("a new request clears the Result card: a pending classification and a triage run never show the previous answer beside their key", async () => {
    const { context, page, errors } = await openDemo();
    await page.click("#classify");
    await waitFor(page, () => document.getElementById("shown").dataset.count === "1");
    assert.equal(await page.textContent("#result .category"), "billing");
    const first = (await page.textContent("#key")).trim();

    // Another ticket, slow: while it is pending the card is this request's, nothing of the previous answer.
    await page.fill("#ticket", "The app crashes when I upload a file.");
    await page.selectOption("#model", "demo-slow");
    await page.click("#classify");
    await waitFor(page, (k) => document.getElementById("key").textContent !== k, first);
    const second = (await page.textContent("#key")).trim();
    assert.equal(await page.textContent("#result"), "Waiting for the answer to this request…");
    assert.equal(await page.locator("#result .category").count(), 0, "the previous classification is gone");
    assert.equal(await page.textContent("#shown"), "—");
    // The new request's state, never the previous answer's `completed`: `pending`
    // until the page's first look at the job, `in_flight` once it has seen the claim.
    assert.match(await page.getAttribute("#state", "data-state"), /^(pending|in_flight)$/);
    await screenshot(page, "result-pending-new-key");
    await waitFor(page, () => document.getElementById("shown").dataset.count === "1");
    assert.equal((await page.textContent("#key")).trim(), second);

    // Triage & notify: the card shows the triage's key, its state and its answer, not the classification.
    await page.fill("#ticket-id", `T-${Date.now()}`);
    await page.click("#run-triage");
    await waitFor(page, (k) => document.getElementById("key").textContent !== k, second);
    assert.equal(await page.locator("#result .category").count(), 0, "the classification is not shown beside the triage's key");
    await waitFor(page, () => document.getElementById("run-result").dataset.state === "completed");
    const run = (await page.textContent("#run-result")).trim();
    assert.match(run, /^bug · normal — completed/);
    assert.equal(await page.textContent("#result"), `Triage & notify: ${run}. Its effects are in the card below.`);
    await waitFor(page, () => document.getElementById("state").dataset.state === "completed" && document.getElementById("calls").dataset.count === "1");
    await screenshot(page, "result-triage");
    assert.deepEqual(errors, []);
    await context.close();
  });

  test("streams: 'delivered' only once a stream has ended; a stream that fails keeps its partial answer with the error under it", async () => {
    const { context, page, errors } = await openDemo();
    const timeline = () => page.textContent("#timeline");
    await page.check("#stream");
    await page.selectOption("#model", "demo-slow");
    await page.click("#classify");
    await waitFor(page, () => Number(document.getElementById("result").dataset.tokens ?? 0) >= 3);
    // Mid-stream: the SDK's "settled" entry says the stream is open; nothing says delivered.
    assert.equal(await page.textContent("li[data-kind=settled] span:last-child"), "stream opened (status 200): the answer is being written");
    assert.doesNotMatch(await timeline(), /delivered/);
    await waitFor(page, () => document.getElementById("shown").dataset.count === "1");
    assert.match(await page.textContent("li[data-kind=stream-end] span:last-child"), /^delivered: the stream ended after \d+ chunks$/);

    // A stream that fails mid-answer (an error event), and one whose provider drops it.
    for (const [model, message] of [
      ["demo-stream-error", "the demo model failed mid-answer"],
      ["demo-stream-drop", "the provider's stream ended before its last event"],
    ]) {
      await page.fill("#ticket", `${model}: I was charged twice for March.`);
      await page.selectOption("#model", model);
      await page.click("#classify");
      await page.waitForSelector("#result.failed");
      const partial = await page.textContent("#result .partial");
      assert.match(partial, /^category: billing\npriority: high/, `${model}: the part written stays`);
      assert.equal(await page.textContent("#result .stream-error"), `StreamError: ${message}`);
      const failed = page.locator("li[data-kind=stream-failed] span:last-child");
      assert.equal(await failed.count(), 1);
      assert.match(await failed.textContent(), new RegExp(`^the stream failed after \\d+ chunks \\(StreamError: ${message}\\); the part written so far stays in the Result card$`));
      assert.doesNotMatch(await timeline(), /delivered/, `${model}: never delivered`);
      await screenshot(page, `stream-failed-${model}`);
    }
    assert.deepEqual(errors, []);
    await context.close();
  });

  test("a 409 already-run triage: the page stops following the job the refused request never made, and says why", async () => {
    const { context, page, errors } = await openDemo({ initScript: fetchProbe });
    const ticket = `T-${Date.now()}`;
    await page.fill("#ticket-id", ticket);
    await page.click("#run-triage");
    await waitFor(page, () => document.getElementById("run-result").dataset.state === "completed");
    const triaged = (await page.textContent("#key")).trim();
    // The same ticket, another email: a new request (a new key), refused because the ticket ran once.
    await page.fill("#customer-email", "someone-else@example.com");
    await page.click("#run-triage");
    await page.waitForSelector("li[data-kind=poll-stopped]");
    const key = (await page.textContent("#key")).trim();
    assert.notEqual(key, triaged);
    assert.equal(await page.textContent("li[data-kind=poll-stopped] span:last-child"), "stopped following the job: HTTP 404, the gateway has no job under this key");
    assert.equal(await page.getAttribute("#state", "data-state"), "no_job");
    assert.equal(await page.textContent("#result"), `HTTP 409: ticket ${ticket} was triaged already by job ${triaged}; this request made no job`);
    const polls = () => page.evaluate((path) => globalThis.fetched.filter((f) => f.path === path).length, `/onejob/v1/jobs/${key}`);
    const stopped = await polls();
    assert.ok(stopped >= 1 && stopped <= 3, `${stopped} polls of the job that does not exist`);
    await page.waitForTimeout(2000);
    assert.equal(await polls(), stopped, "no poll after the 404 (it polled every 400 ms, forever)");
    await screenshot(page, "triage-409");
    assert.deepEqual(errors, []);
    await context.close();
  });

  test("the empty timeline's text is one line across the card; demo-json is offered and answers through its JSON contract", async () => {
    const { context, page, errors } = await openDemo();
    const lines = await page.$eval("#timeline li.muted", (li) => {
      const range = document.createRange();
      range.selectNodeContents(li);
      return range.getClientRects().length;
    });
    assert.equal(lines, 1, "one line (it wrapped into the 84 px time column)");
    const [li, list] = [await page.locator("#timeline li.muted").boundingBox(), await page.locator("#timeline").boundingBox()];
    assert.equal(li.width, list.width);
    await screenshot(page, "timeline-empty");

    // Every model the demo provider routes is offered (crates/core/src/upstream/providers.rs, crates/edge/src/demo/provider.rs).
    const models = await page.$$eval("#model option", (options) => options.map((o) => o.value));
    assert.deepEqual(models, ["demo", "demo-flaky", "demo-slow", "demo-timeout", "demo-stream-drop", "demo-stream-error", "demo-failover", "demo-hedge", "demo-json"]);
    await page.selectOption("#model", "demo-json");
    await page.click("#classify");
    await waitFor(page, () => document.getElementById("shown").dataset.count === "1");
    assert.equal(await page.textContent("#result .category"), "billing");
    assert.equal(await page.textContent("#result .priority"), "high priority");
    const record = await job((await page.textContent("#key")).trim(), page);
    // The prose primary broke the contract; the backup answered JSON.
    assert.deepEqual(record.attempts.map((a) => [a.model, a.outcome, a.error_class]), [["demo-prose", "failed", "contract"], ["demo", "succeeded", "none"]]);
    await waitFor(page, () => document.getElementById("calls").dataset.count === "2");
    await screenshot(page, "demo-json");
    assert.deepEqual(errors, []);
    await context.close();
  });
});
