// End-to-end: the operations console (www/admin/) in headless Chromium
// against the worker under `wrangler dev`. Jobs are made through the API
// first; the console, signed in with the development admin key, must show
// them as the admin API describes them. Screenshots land in tests/artifacts/.
//
// Two workers:
// - the demo provider (as `make dev`): sync jobs, a failover, a hedge, a
//   background job; the jobs list, a job's page and the cost tables;
// - a fake LLM that answers 503 to every call, with one attempt per job:
//   background jobs die and become dead letters, which the console replays;
//   a call that hangs past UPSTREAM_TIMEOUT_MS leaves an unknown job
//   (UNKNOWN_POLICY=block) for the resolve buttons.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";

import { launchChromium, screenshot } from "../support/browser.mjs";
import {
  DEV_ADMIN_KEY,
  DEV_KEY,
  RESPOND_ASYNC,
  TENANT_B_KEY,
  adminKeysVar,
  chat,
  newKey,
  startStack,
  triageInput,
  triageType,
  waitFor,
} from "../support/harness.mjs";
import { DEV_TOKEN_SECRET, mintToken } from "../support/keys.mjs";

/** An admin of tenant-b only (ADMIN_KEYS of the failing stack). */
const ACME_KEY = "acme-ops-admin-key";
/** What a queue message takes to reach the consumer at worst (wrangler dev batches). */
const DELIVERY_MS = 30_000;
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;
const ADMIN = "/onejob/v1/admin";

let browser;
before(async () => {
  browser = await launchChromium();
});
after(async () => {
  await browser?.close();
});

/**
 * A new browser tab on the console of `stack`, signed in through the form
 * with `key`: `{ context, page, errors }` (uncaught page errors and console
 * errors, which include every Content-Security-Policy violation).
 */
async function openConsole(stack, key = DEV_ADMIN_KEY, { viewport = { width: 1280, height: 900 } } = {}) {
  const context = await browser.newContext({ viewport, locale: "en-US" });
  const page = await context.newPage();
  const errors = [];
  page.on("pageerror", (error) => errors.push(error.message));
  // Chromium reports a CSP violation ("… violates the following Content
  // Security Policy directive …") as a console error. It also logs every
  // non-2xx answer as one; the tests ask for some of those (401, 403, 404)
  // on purpose and check them, so those lines are left out.
  page.on("console", (message) => {
    if (message.type() === "error" && !/^Failed to load resource: the server responded with a status of \d+/.test(message.text())) errors.push(message.text());
  });
  await page.goto(`${stack.url}/admin/`);
  await page.waitForSelector("body[data-ready=true]");
  if (key) await signIn(page, key);
  return { context, page, errors };
}

async function signIn(page, key) {
  await page.fill("#admin-key", key);
  await page.click("#sign-in-form button[type=submit]");
}

/** Waits until view `name` shows the answer for the current URL (data-state ready or error); returns that state. */
async function settled(page, name, timeout = 20_000) {
  await page.waitForFunction(
    (id) => {
      const section = document.getElementById(id);
      return !section.hidden && section.dataset.hash === location.hash && ["ready", "error"].includes(section.dataset.state);
    },
    `view-${name}`,
    { timeout },
  );
  return page.getAttribute(`#view-${name}`, "data-state");
}

/** Goes to `hash` (e.g. "#costs") and waits for its view. */
async function go(page, hash) {
  await page.evaluate((h) => (location.hash = h), hash);
  const name = hash.slice(1).split("?")[0];
  await page.waitForFunction((h) => location.hash === h, hash);
  return settled(page, name);
}

const jobHash = (tenant, key) => `#job?${new URLSearchParams({ tenant, key })}`;
/** The keys of the jobs table's rows, top to bottom. */
const listedKeys = (page) => page.$$eval("#jobs-table tbody tr[data-key]", (rows) => rows.map((r) => r.dataset.key));
/** The text of every cell of the row with `data-<attribute>=value` in `table`. */
const rowCells = (page, table, attribute, value) =>
  page.$$eval(`${table} tbody tr[data-${attribute}="${value}"] td`, (cells) => cells.map((c) => c.textContent.trim()));
const problemOf = (page, view) => page.textContent(`#view-${view} [data-role=problem]`);
const integer = new Intl.NumberFormat("en-US");
/** A phone's viewport (an iPhone 14's CSS pixels). */
const PHONE = { width: 390, height: 844 };

/** Whether the page scrolls sideways (it must not, at any width). */
const overflowsSideways = (page) => page.evaluate(() => document.documentElement.scrollWidth > document.documentElement.clientWidth);

/** Asserts that every operator event's timestamp ends before its text begins (they overlapped). */
async function assertEventsApart(page, what) {
  const rows = await page.$$eval("#job-events li", (items) =>
    items.map((li) => {
      const [time, text] = [li.querySelector("time").getBoundingClientRect(), li.children[1].getBoundingClientRect()];
      return { timeRight: time.right, textLeft: text.left, text: li.textContent };
    }),
  );
  assert.ok(rows.length > 0, `${what}: some events`);
  for (const row of rows) assert.ok(row.timeRight <= row.textLeft, `${what}: the timestamp (right ${row.timeRight}) runs under the text (left ${row.textLeft}): ${row.text}`);
}

/**
 * What the console's pages are served with (www/_headers): it holds an admin
 * key, so it runs only its own scripts and styles, talks only to its own
 * origin, cannot be framed, and sends no Referer.
 */
const CONSOLE_CSP =
  "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'; object-src 'none'";
const CONSOLE_HEADERS = { "content-security-policy": CONSOLE_CSP, "referrer-policy": "no-referrer", "x-content-type-options": "nosniff" };
const consoleHeaders = (headers) => Object.fromEntries(Object.keys(CONSOLE_HEADERS).map((name) => [name, headers.get(name)]));

/** An admin GET that must answer 200 (the API the page shows). */
async function adminGet(stack, route, token = DEV_ADMIN_KEY) {
  const answer = await stack.admin(route, { token });
  assert.equal(answer.status, 200, `${route}: ${answer.text}`);
  return answer.body;
}

describe("operations console on the demo provider: sign-in, jobs, a job's page, cost", () => {
  let stack;
  /** Our jobs, in the order they were created: { key, model, background, user }. */
  const jobs = [];
  const byModel = (model, background = false) => jobs.find((j) => j.model === model && j.background === background && !j.user);

  before(async () => {
    // Prices (US dollars per million tokens) so the cost tables show some spend.
    stack = await startStack({ upstream: "demo", vars: { PRICES: JSON.stringify({ demo: { input_per_mtok: 150, output_per_mtok: 600 } }) } });
    const make = async (model, { background = false, user, content = `Ticket ${jobs.length + 1}: I was charged twice, refund asap.` } = {}) => {
      const key = newKey();
      const body = { ...chat(content), model };
      // A user's job: sent with a user token its app minted (sub = the user).
      const now = Math.floor(Date.now() / 1000);
      const token = user ? mintToken({ tenant: "dev", sub: user, iat: now, exp: now + 600 }, DEV_TOKEN_SECRET) : DEV_KEY;
      const answer = await stack.post(key, body, { token, headers: background ? RESPOND_ASYNC : {} });
      assert.equal(answer.res.status, background ? 202 : 200, answer.text);
      jobs.push({ key, model, background, body, user: user ?? null });
      if (background) await stack.waitForJob(key, (j) => j.state === "completed", { timeoutMs: DELIVERY_MS });
    };
    for (let i = 0; i < 3; i++) await make("demo");
    await make("demo", { user: "alice" });
    await make("demo-failover");
    await make("demo-hedge");
    await make("demo-failover", { background: true });
    // A duplicate of the first request: the stored answer again, no new job.
    const first = jobs[0];
    const duplicate = await stack.post(first.key, first.body);
    assert.equal(duplicate.res.headers.get("idempotent-replayed"), "true", duplicate.text);
  });

  after(async () => {
    await stack?.stop();
  });

  test("browser protections: the console's pages carry a strict CSP, no-referrer and nosniff; the console works under it, an inline script or style is refused", async () => {
    // /admin/index.html is redirected to /admin/ (the assets' html_handling); both carry them.
    for (const [route, status] of [["/admin/", 200], ["/admin/index.html", 307], ["/admin/admin.js", 200], ["/admin/admin.css", 200]]) {
      const res = await fetch(`${stack.url}${route}`, { redirect: "manual" });
      await res.arrayBuffer();
      assert.equal(res.status, status, route);
      if (status === 307) assert.equal(res.headers.get("location"), "/admin/");
      assert.deepEqual(consoleHeaders(res.headers), CONSOLE_HEADERS, route);
    }
    // The file that sets them is read by the assets server, not served.
    const file = await fetch(`${stack.url}/_headers`);
    assert.equal(file.status, 404);
    assert.doesNotMatch(await file.text(), /Content-Security-Policy/);

    // In the browser: the whole console runs under the policy (openConsole
    // collects any violation as an error), and the policy is in force.
    const { context, page, errors } = await openConsole(stack);
    assert.equal(await settled(page, "jobs"), "ready", await problemOf(page, "jobs"));
    const reloaded = await page.reload();
    assert.deepEqual(consoleHeaders({ get: (name) => reloaded.headers()[name] ?? null }), CONSOLE_HEADERS);
    assert.equal(await settled(page, "jobs"), "ready", await problemOf(page, "jobs"));
    assert.deepEqual(errors, [], "no violation and no error while the console signs in and lists jobs");
    const refused = await page.evaluate(async () => {
      const violations = [];
      // Violation events are dispatched as tasks, after the refusal: wait for both (5 s at most).
      const both = new Promise((resolve) => {
        document.addEventListener("securitypolicyviolation", (e) => {
          violations.push([e.effectiveDirective, e.blockedURI, e.disposition]);
          if (violations.length === 2) resolve();
        });
        setTimeout(resolve, 5000);
      });
      const script = document.createElement("script");
      script.textContent = "window.inlineRan = true";
      document.head.append(script);
      document.body.setAttribute("style", "background: red");
      await both;
      return { violations, inlineRan: window.inlineRan === true, background: getComputedStyle(document.body).backgroundColor };
    });
    assert.deepEqual(refused.violations, [["script-src-elem", "inline", "enforce"], ["style-src-attr", "inline", "enforce"]]);
    assert.equal(refused.inlineRan, false, "the inline script did not run");
    assert.notEqual(refused.background, "rgb(255, 0, 0)", "the inline style was not applied");
    // The console lines travel to this process apart from evaluate's answer: wait for them.
    await waitFor("the two refusals on the console", () => ({ ok: errors.length >= 2, value: errors }), 5000, 50);
    assert.equal(errors.length, 2, errors.join("\n"));
    assert.match(errors[0], /inline script violates the following Content Security Policy directive 'script-src 'self''/);
    assert.match(errors[1], /inline style violates the following Content Security Policy directive 'style-src 'self''/);
    await context.close();
  });

  test("sign-in: a tenant key is 'not an admin key'; the admin key is kept in sessionStorage only and sent as a Bearer token", async () => {
    const { context, page, errors } = await openConsole(stack, null);
    await signIn(page, DEV_KEY);
    await page.waitForSelector("#sign-in-error:not([hidden])");
    assert.equal((await page.textContent("#sign-in-error")).trim(), "not an admin key");
    assert.equal(await page.isVisible("#console"), false);
    assert.equal(await page.evaluate(() => sessionStorage.length), 0, "a refused key is not kept");

    const authorizations = [];
    page.on("request", (request) => {
      if (request.url().includes(ADMIN)) authorizations.push(request.headers().authorization);
    });
    await signIn(page, DEV_ADMIN_KEY);
    assert.equal(await settled(page, "jobs"), "ready", await problemOf(page, "jobs"));
    assert.equal(await page.isVisible("#sign-in"), false);
    assert.deepEqual(await page.evaluate(() => Object.values(sessionStorage)), [DEV_ADMIN_KEY]);
    assert.equal(await page.evaluate(() => localStorage.length), 0, "never in localStorage");
    assert.ok(authorizations.length > 0 && authorizations.every((a) => a === `Bearer ${DEV_ADMIN_KEY}`), JSON.stringify(authorizations));

    // A reload keeps the tab signed in; signing out forgets the key.
    await page.reload();
    await page.waitForSelector("body[data-ready=true]");
    assert.equal(await settled(page, "jobs"), "ready");
    await page.click("#sign-out");
    assert.equal(await page.isVisible("#sign-in"), true);
    assert.equal(await page.evaluate(() => sessionStorage.length), 0);
    assert.deepEqual(errors, []);
    await context.close();
  });

  test("jobs: newest first with state, provider, attempts and tokens; filters; pages by cursor; a row opens the job", { timeout: 120_000 }, async () => {
    const { context, page, errors } = await openConsole(stack);
    assert.equal(await settled(page, "jobs"), "ready", await problemOf(page, "jobs"));
    const api = await adminGet(stack, `${ADMIN}/jobs?limit=50`);
    const ours = new Set(jobs.map((j) => j.key));

    // Every job once (the duplicate made none), newest first.
    const listed = await listedKeys(page);
    assert.deepEqual(listed.filter((k) => ours.has(k)), jobs.map((j) => j.key).reverse(), "newest first");
    assert.equal(listed.length, jobs.length, "one row per job: the duplicate request created none");
    assert.deepEqual(listed, api.jobs.map((j) => j.key), "the rows are the API's jobs, in its order");
    for (const row of api.jobs) {
      const cells = await rowCells(page, "#jobs-table", "key", row.key);
      assert.equal(cells[1], row.tenant);
      assert.equal(cells[2], row.user ?? "—");
      assert.equal(cells[3], row.key);
      assert.ok(cells[4].startsWith("completed"), cells[4]);
      assert.equal(cells[4].includes("background"), row.background, `${row.key}: ${cells[4]}`);
      assert.equal(cells[5], row.model ?? "—");
      assert.equal(cells[6], row.provider ?? "—");
      assert.equal(cells[8], integer.format(row.attempts));
      assert.equal(cells[9], row.tokens === null || row.tokens === undefined ? "—" : integer.format(row.tokens));
      assert.match(cells[0], /ago|just now/, "a local date-time and how long ago");
    }
    const failover = byModel("demo-failover");
    assert.equal((await rowCells(page, "#jobs-table", "key", failover.key))[8], "2", "the failover's two attempts");
    const alice = jobs.find((j) => j.user === "alice");
    assert.equal((await rowCells(page, "#jobs-table", "key", alice.key))[2], "alice", "a user's job names its user");
    await screenshot(page, "console-jobs");

    // A user's job opens with ?user= (the admin API finds a user's job only so).
    const userView = page.waitForRequest((r) => r.url().includes(`${ADMIN}/jobs/dev/${alice.key}?user=alice`));
    await page.click(`#jobs-table tr[data-key="${alice.key}"] td:first-child`);
    await userView;
    assert.equal(await settled(page, "job"), "ready", await problemOf(page, "job"));
    assert.match(await page.textContent("#job-summary"), /User\s*alice/);
    await page.goBack();
    assert.equal(await settled(page, "jobs"), "ready");
    await page.fill("#f-user", "alice");
    await page.click("#job-filters button[type=submit]");
    assert.equal(await settled(page, "jobs"), "ready", await problemOf(page, "jobs"));
    assert.deepEqual(await listedKeys(page), [alice.key], "the user filter");
    await page.click("#f-clear");
    assert.equal(await settled(page, "jobs"), "ready");

    // Filters go to the API and narrow the list.
    await page.selectOption("#f-state", "completed");
    await page.fill("#f-model", "demo");
    await page.click("#job-filters button[type=submit]");
    assert.equal(await settled(page, "jobs"), "ready", await problemOf(page, "jobs"));
    assert.match(await page.evaluate(() => location.hash), /state=completed/);
    const demoRows = await listedKeys(page);
    for (const job of jobs.filter((j) => j.model === "demo")) assert.ok(demoRows.includes(job.key), `${job.key} is a completed demo job`);
    for (const key of demoRows) assert.equal((await rowCells(page, "#jobs-table", "key", key))[5], "demo");
    await page.click("#f-clear");
    assert.equal(await settled(page, "jobs"), "ready");
    await page.fill("#f-tenant", "tenant-b");
    await page.click("#job-filters button[type=submit]");
    assert.equal(await settled(page, "jobs"), "ready", await problemOf(page, "jobs"));
    assert.deepEqual(await listedKeys(page), []);
    assert.match(await page.textContent("#jobs-table tbody"), /No jobs match these filters/);
    await page.click("#f-clear");
    assert.equal(await settled(page, "jobs"), "ready");
    const later = new Date(Date.now() + 5 * 60_000);
    const pad = (n) => String(n).padStart(2, "0");
    await page.fill("#f-since", `${later.getFullYear()}-${pad(later.getMonth() + 1)}-${pad(later.getDate())}T${pad(later.getHours())}:${pad(later.getMinutes())}`);
    await page.click("#job-filters button[type=submit]");
    assert.equal(await settled(page, "jobs"), "ready", await problemOf(page, "jobs"));
    assert.match(await page.evaluate(() => location.hash), /since_ms=\d+/);
    assert.deepEqual(await listedKeys(page), [], "nothing created after five minutes from now");

    // Pages of 4: "Next page" sends the API's cursor; the two pages hold every job once.
    assert.equal(await go(page, "#jobs?limit=4"), "ready", await problemOf(page, "jobs"));
    const first = await listedKeys(page);
    assert.equal(first.length, 4);
    assert.equal(await page.isEnabled("#jobs-next"), true);
    const cursor = await page.getAttribute("#jobs-next", "data-cursor");
    assert.ok(cursor, "the API gave a next_cursor");
    const cursorRequest = page.waitForRequest((r) => r.url().includes(`${ADMIN}/jobs?`) && new URL(r.url()).searchParams.get("cursor") === cursor);
    await page.click("#jobs-next");
    await cursorRequest;
    assert.equal(await settled(page, "jobs"), "ready", await problemOf(page, "jobs"));
    const second = await listedKeys(page);
    assert.deepEqual([...first, ...second], jobs.map((j) => j.key).reverse(), "page 2 goes on where page 1 ended");
    assert.equal(await page.isEnabled("#jobs-next"), false, "no page after the last");
    assert.match(await page.textContent("#jobs-page"), /page 2/);

    // A click on a row opens that job.
    await go(page, "#jobs");
    await page.click(`#jobs-table tr[data-key="${failover.key}"] td:first-child`);
    assert.equal(await settled(page, "job"), "ready", await problemOf(page, "job"));
    assert.equal(await page.evaluate(() => new URLSearchParams(location.hash.split("?")[1]).get("key")), failover.key);
    assert.deepEqual(errors, []);
    await context.close();
  });

  test("a job's page: the request summary, an attempts timeline (a hedge's loser marked not used), the stored result", async () => {
    const { context, page, errors } = await openConsole(stack);

    // The failover: demo-outage failed with a 503, demo-backup answered.
    const failover = byModel("demo-failover");
    assert.equal(await go(page, jobHash("dev", failover.key)), "ready", await problemOf(page, "job"));
    const view = await adminGet(stack, `${ADMIN}/jobs/dev/${encodeURIComponent(failover.key)}`);
    assert.equal(view.tenant, "dev");
    assert.equal(view.key, failover.key);
    const summary = await page.textContent("#job-summary");
    for (const fact of ["dev", failover.key, "completed", "sync"]) assert.ok(summary.includes(fact), `${fact} in ${summary}`);
    const attempts = await page.$$eval("#job-attempts li.attempt", (items) =>
      items.map((li) => ({ outcome: li.dataset.outcome, text: li.textContent, bar: Boolean(li.querySelector(".bar")) })),
    );
    assert.deepEqual(attempts.map((a) => a.outcome), view.attempts.map((a) => a.outcome));
    assert.deepEqual(attempts.map((a) => a.outcome), ["failed", "succeeded"]);
    assert.ok(attempts.every((a) => a.bar), "a bar per attempt");
    assert.match(attempts[0].text, /demo-outage.*HTTP 503.*unavailable/s);
    assert.match(attempts[1].text, /demo-backup.*HTTP 200/s);
    const tokens = view.attempts[1].usage?.total_tokens;
    if (tokens) assert.ok(attempts[1].text.includes(`${integer.format(tokens)} tokens`), attempts[1].text);
    assert.match(await page.textContent("#job-events"), /No operator has acted/);
    assert.match(await page.textContent("#job-actions"), /None for a completed job/);
    assert.equal(await page.locator("#job-actions button").count(), 0, "no action applies to a completed job");
    const shown = await page.textContent("#job-result pre");
    assert.ok(view.result, "a completed job's view has its result");
    assert.equal(view.result.status, 200);
    assert.deepEqual(JSON.parse(shown), typeof view.result.body === "string" ? JSON.parse(view.result.body) : view.result.body);
    assert.match(shown, /^\{\n {2}"/, "pretty-printed");

    // The hedge: the slow primary lost the race; its row says its answer was not used.
    const hedge = byModel("demo-hedge");
    assert.equal(await go(page, jobHash("dev", hedge.key)), "ready", await problemOf(page, "job"));
    const hedged = await page.$$eval("#job-attempts li.attempt", (items) =>
      items.map((li) => ({ outcome: li.dataset.outcome, unused: li.classList.contains("unused"), text: li.textContent })),
    );
    const loser = hedged.find((a) => a.outcome === "lost_race");
    assert.ok(loser, JSON.stringify(hedged));
    assert.ok(loser.unused && loser.text.includes("not used"), loser.text);
    assert.ok(hedged.some((a) => a.outcome === "succeeded" && !a.unused));
    await screenshot(page, "console-job");

    // The background job says so.
    const background = byModel("demo-failover", true);
    assert.equal(await go(page, jobHash("dev", background.key)), "ready", await problemOf(page, "job"));
    assert.match(await page.textContent("#job-summary"), /background/);
    assert.deepEqual(errors, []);
    await context.close();
  });

  test("problems: the API's title and detail are shown (a job that does not exist)", async () => {
    const { context, page, errors } = await openConsole(stack);
    const missing = newKey();
    assert.equal(await go(page, jobHash("dev", missing)), "error");
    const answer = await stack.admin(`${ADMIN}/jobs/dev/${missing}`);
    assert.equal(answer.status, 404, answer.text);
    assert.equal(answer.res.headers.get("content-type"), "application/problem+json");
    const text = await problemOf(page, "job");
    assert.ok(text.includes(answer.body.title) && text.includes(answer.body.detail), `${text} shows ${answer.text}`);
    assert.equal(await page.locator("#job-body > *").count(), 0);
    assert.deepEqual(errors, []);
    await context.close();
  });

  test("cost: per tenant and per model, as the API counts them (per job: the duplicate cost nothing)", async () => {
    const { context, page, errors } = await openConsole(stack);
    assert.equal(await go(page, "#costs"), "ready", await problemOf(page, "costs"));
    assert.match(await page.textContent("#view-costs .note"), /duplicate.*creates no job and costs nothing/s);
    const costs = await adminGet(stack, `${ADMIN}/costs?since_ms=${Date.now() - 86_400_000}`);
    const dev = costs.by_tenant.find((t) => t.tenant === "dev");
    assert.equal(dev?.jobs, jobs.length, `one per job, the duplicate not counted: ${JSON.stringify(costs)}`);
    assert.ok(dev.cost_usd > 0, `PRICES gives demo a price: ${JSON.stringify(costs)}`);
    for (const [table, rows, name] of [["#cost-tenants", costs.by_tenant, "tenant"], ["#cost-models", costs.by_model, "model"]]) {
      assert.equal(await page.locator(`${table} tbody tr[data-${name}]`).count(), rows.length);
      for (const row of rows) {
        const cells = await rowCells(page, table, name, row[name] ?? "");
        assert.equal(cells[1], integer.format(row.jobs));
        assert.equal(cells[2], row.tokens === null || row.tokens === undefined ? "—" : integer.format(row.tokens));
        assert.match(cells[3], /^\$\d/);
        if (row.cost_usd > 0) assert.notEqual(cells[3], "$0.00", `${row[name]}: small amounts keep their digits`);
      }
      const total = await page.$$eval(`${table} tfoot th`, (cells) => cells.map((c) => c.textContent));
      assert.deepEqual(total.slice(0, 2), ["Total", integer.format(rows.reduce((n, r) => n + r.jobs, 0))]);
    }
    const models = costs.by_model.map((m) => m.model);
    assert.ok(models.includes("demo"), JSON.stringify(costs.by_model));
    await screenshot(page, "console-costs");

    // "All retained jobs" asks without since_ms.
    const request = page.waitForRequest((r) => r.url().includes(`${ADMIN}/costs`) && !r.url().includes("since_ms"));
    await page.selectOption("#cost-since", "all");
    await request;
    assert.equal(await settled(page, "costs"), "ready", await problemOf(page, "costs"));
    assert.deepEqual(errors, []);
    await context.close();
  });
  test("the jobs table: every column (Tokens, Cost) in view at 1280 px; on a phone each job is a card of labelled lines", async () => {
    const { context, page, errors } = await openConsole(stack);
    assert.equal(await settled(page, "jobs"), "ready", await problemOf(page, "jobs"));
    const fit = await page.$eval("#jobs-table", (table) => {
      const scroll = table.parentElement.getBoundingClientRect();
      const last = [...table.tHead.rows[0].cells].map((th) => th.getBoundingClientRect().right);
      return { scrollWidth: table.parentElement.scrollWidth, clientWidth: table.parentElement.clientWidth, right: scroll.right, cost: last.at(-1), tokens: last.at(-2) };
    });
    assert.ok(fit.scrollWidth <= fit.clientWidth, `the table fits its card at 1280 px: ${JSON.stringify(fit)}`);
    assert.ok(fit.tokens <= fit.right && fit.cost <= fit.right, `Tokens and Cost are in view: ${JSON.stringify(fit)}`);
    assert.equal(await overflowsSideways(page), false);
    await context.close();

    const phone = await openConsole(stack, DEV_ADMIN_KEY, { viewport: PHONE });
    assert.equal(await settled(phone.page, "jobs"), "ready", await problemOf(phone.page, "jobs"));
    assert.equal(await overflowsSideways(phone.page), false, "nothing to scroll sideways on a phone");
    const headers = await phone.page.$$eval("#jobs-table thead th", (ths) => ths.map((th) => th.textContent));
    const api = await adminGet(stack, `${ADMIN}/jobs?limit=50`);
    assert.equal(await phone.page.locator("#jobs-table tbody tr[data-key]").count(), api.jobs.length);
    for (const job of api.jobs) {
      const cells = await phone.page.$$eval(`#jobs-table tr[data-key="${job.key}"] td`, (tds) =>
        tds.map((td) => {
          const box = td.getBoundingClientRect();
          return { label: td.dataset.label, before: getComputedStyle(td, "::before").content, left: box.left, right: box.right, text: td.textContent.trim() };
        }),
      );
      assert.deepEqual(cells.map((c) => c.label), headers, "every field, labelled by its column");
      assert.deepEqual(cells.map((c) => c.before), headers.map((h) => JSON.stringify(h)), "the label is shown");
      for (const cell of cells) assert.ok(cell.left >= 0 && cell.right <= PHONE.width, `${cell.label} within the screen: ${JSON.stringify(cell)}`);
      assert.equal(cells[9].text, integer.format(job.tokens));
      assert.match(cells[10].text, /^\$\d/);
    }
    await screenshot(phone.page, "console-jobs-phone");
    assert.deepEqual([...errors, ...phone.errors], []);
    await phone.context.close();
  });

  test("search by key opens the job (a user's job with its user); a mistyped hash says not found", async () => {
    const { context, page, errors } = await openConsole(stack);
    assert.equal(await settled(page, "jobs"), "ready", await problemOf(page, "jobs"));
    const failover = byModel("demo-failover");
    await page.fill("#open-job input[name=tenant]", "dev");
    await page.fill("#open-job input[name=key]", ` ${failover.key} `);
    await page.click("#open-job button[type=submit]");
    assert.equal(await settled(page, "job"), "ready", await problemOf(page, "job"));
    assert.equal(await page.textContent("#job-summary h1"), failover.key);
    const alice = jobs.find((j) => j.user === "alice");
    await page.fill("#open-job input[name=key]", alice.key);
    await page.fill("#open-job input[name=user]", "alice");
    await page.click("#open-job button[type=submit]");
    assert.equal(await settled(page, "job"), "ready", await problemOf(page, "job"));
    assert.match(await page.textContent("#job-summary"), /User\s*alice/);
    await screenshot(page, "console-search-by-key");

    for (const [hash, text] of [
      ["#jbos", 'Not found: this console has no page "#jbos".'],
      ["#job?tenant=dev", 'Not found: a job\'s page needs its tenant and key (#job?tenant=…&key=…); "#job?tenant=dev" has no key.'],
      ["#job?key=abc", 'Not found: a job\'s page needs its tenant and key (#job?tenant=…&key=…); "#job?key=abc" has no tenant.'],
    ]) {
      await page.evaluate((h) => (location.hash = h), hash);
      assert.equal(await settled(page, "not-found"), "ready");
      assert.equal(await page.textContent("#not-found-text"), text);
      assert.equal(await page.isVisible("#view-not-found h1"), true, `${hash}: not a blank page`);
      assert.equal(await page.locator(".view:not([hidden])").count(), 1);
    }
    await screenshot(page, "console-not-found");
    assert.deepEqual(errors, []);
    await context.close();
  });

  test("cost: the view names its prices: the bundled table's date and the models PRICES sets", async () => {
    const { context, page, errors } = await openConsole(stack);
    assert.equal(await go(page, "#costs"), "ready", await problemOf(page, "costs"));
    const costs = await adminGet(stack, `${ADMIN}/costs`);
    assert.match(costs.prices.bundled_as_of, /^\d{4}-\d{2}-\d{2}$/);
    assert.deepEqual(costs.prices.overridden, ["demo"], "this stack's PRICES");
    assert.equal(
      await page.textContent("#cost-prices"),
      `Prices: onejob's bundled list prices as of ${costs.prices.bundled_as_of}; PRICES sets demo. A job is costed when it is indexed, with the prices of that time.`,
    );
    assert.deepEqual(errors, []);
    await context.close();
  });
});

describe("operations console on a failing upstream: dead letters, replay, resolve", () => {
  let stack;
  let llm;
  /** Dead background jobs: { key, tenant, token }. */
  const dead = [];

  /** A background job of `token`'s tenant (scripted with `faults` when given); waits until `until(job)`. */
  async function backgroundJob({ token = DEV_KEY, tenant = "dev", faults, until }) {
    const key = newKey();
    if (faults) llm.script(key, faults, tenant);
    const answer = await stack.post(key, chat(`${key} background`), { token, headers: RESPOND_ASYNC });
    assert.equal(answer.res.status, 202, answer.text);
    const job = await stack.waitForJob(key, until, { token, timeoutMs: DELIVERY_MS });
    return { key, tenant, token, job };
  }

  before(async () => {
    stack = await startStack({
      vars: {
        MAX_ATTEMPTS: "1",
        UPSTREAM_TIMEOUT_MS: "1500",
        UNKNOWN_POLICY: "block",
        RESULT_CACHE: "off",
        ADMIN_KEYS: adminKeysVar({ [ACME_KEY]: { name: "acme-ops", tenant: "tenant-b" } }),
      },
    });
    ({ llm } = stack);
    llm.scriptAll(["503*"]);
    const isDead = (j) => j.state === "dead";
    const made = await Promise.all([
      backgroundJob({ until: isDead }),
      backgroundJob({ until: isDead }),
      backgroundJob({ until: isDead }),
      backgroundJob({ token: TENANT_B_KEY, tenant: "tenant-b", until: isDead }),
    ]);
    dead.push(...made);
    // The dead-letter queue's consumer records them a moment after they die.
    await waitFor(
      "four dead letters",
      async () => {
        const answer = await stack.admin(`${ADMIN}/dead-letters`);
        const keys = new Set((answer.body?.entries ?? []).map((e) => e.key));
        return { ok: dead.every((d) => keys.has(d.key)), value: answer.text };
      },
      DELIVERY_MS,
      500,
    );
  });

  after(async () => {
    await stack?.stop();
  });

  test("dead letters: a card per cause with its count and a 24 h chart, the entries below (a click opens the job)", async () => {
    const { context, page, errors } = await openConsole(stack);
    assert.equal(await go(page, "#dead-letters"), "ready", await problemOf(page, "dead-letters"));
    const api = await adminGet(stack, `${ADMIN}/dead-letters`);
    const group = api.groups.find((g) => g.error_class === "unavailable");
    assert.equal(group?.count, 4, JSON.stringify(api.groups));
    const card = page.locator('.group[data-error-class="unavailable"]');
    assert.equal(await card.getAttribute("data-count"), "4");
    assert.match(await card.locator(".count").textContent(), /^4\s*dead jobs$/);
    assert.equal(await card.locator("svg rect").count(), 24, "one bar per hour");
    assert.equal(await card.locator("svg").getAttribute("aria-label"), `dead letters per hour, last 24 h: ${group.trend.join(", ")}`);
    assert.ok((await card.locator("svg rect.hit").count()) >= 1);
    assert.equal(await card.locator("svg rect").last().getAttribute("class"), "hit", "the newest hour, on the right, has them");
    const rows = await page.$$eval("#dl-table tbody tr[data-key]", (trs) => trs.map((tr) => tr.dataset.key));
    assert.deepEqual(new Set(rows), new Set(dead.map((d) => d.key)));
    const cells = await rowCells(page, "#dl-table", "key", dead[0].key);
    assert.deepEqual([cells[1], cells[4], cells[5], cells[7]], ["dev", "unavailable", "503", "1"]);
    await screenshot(page, "console-dead-letters");

    await page.click(`#dl-table tr[data-key="${dead[0].key}"] td:first-child`);
    assert.equal(await settled(page, "job"), "ready", await problemOf(page, "job"));
    assert.match(await page.textContent("#job-summary"), /dead/);
    assert.equal(await page.isVisible("#replay"), true, "a dead job can be replayed");
    assert.deepEqual(errors, []);
    await context.close();
  });

  test("a tenant's admin sees that tenant's dead letters; another tenant is 'this key does not reach that tenant'", async () => {
    const { context, page, errors } = await openConsole(stack, ACME_KEY);
    assert.equal(await go(page, "#dead-letters"), "ready", await problemOf(page, "dead-letters"));
    assert.equal(await page.getAttribute('.group[data-error-class="unavailable"]', "data-count"), "1");
    const tenants = await page.$$eval("#dl-table tbody tr[data-key]", (trs) => trs.map((tr) => tr.dataset.tenant));
    assert.deepEqual(tenants, ["tenant-b"]);
    await page.fill("#dl-tenant", "dev");
    await page.click("#dl-filters button[type=submit]");
    assert.equal(await settled(page, "dead-letters"), "error");
    assert.equal((await problemOf(page, "dead-letters")).trim(), "this key does not reach that tenant");
    assert.deepEqual(errors, []);
    await context.close();
  });

  test("Replay group: one keyed request replays every dead job of the cause; each job's view then has a `replayed` event", { timeout: 120_000 }, async () => {
    llm.scriptAll(["ok"]); // the provider is back
    const { context, page, errors } = await openConsole(stack);
    assert.equal(await go(page, "#dead-letters"), "ready", await problemOf(page, "dead-letters"));
    const sent = page.waitForRequest((r) => r.url().endsWith(`${ADMIN}/dead-letters/replay`) && r.method() === "POST");
    await page.click('button[data-replay="unavailable"]');
    const request = await sent;
    assert.match(request.headers()["idempotency-key"], UUID, "a new UUID as the request's Idempotency-Key");
    assert.deepEqual(request.postDataJSON(), { error_class: "unavailable" });
    await page.waitForSelector("#dl-outcome:not([hidden])");
    assert.equal(await settled(page, "dead-letters"), "ready", await problemOf(page, "dead-letters"));
    assert.match(await page.textContent("#dl-outcome"), /^Replayed 4 jobs of unavailable/);

    for (const { key, token } of dead) {
      const job = await stack.waitForJob(key, (j) => j.state === "completed", { token, timeoutMs: DELIVERY_MS });
      assert.deepEqual(job.events.map((e) => [e.action, e.by, e.request]), [["replayed", "dev-admin", request.headers()["idempotency-key"]]]);
      assert.deepEqual(job.attempts.map((a) => a.outcome), ["failed", "succeeded"]);
    }
    // The replayed entries have left the list.
    await page.click("#dl-refresh");
    assert.equal(await settled(page, "dead-letters"), "ready");
    assert.equal(await page.locator('.group[data-error-class="unavailable"]').count(), 0);

    // The job's page shows the event and both attempts.
    assert.equal(await go(page, jobHash("dev", dead[0].key)), "ready", await problemOf(page, "job"));
    const event = page.locator("#job-events li[data-action=replayed]");
    assert.equal(await event.count(), 1);
    assert.match(await event.textContent(), /replayed by dev-admin/);
    assert.deepEqual(await page.$$eval("#job-attempts li.attempt", (items) => items.map((li) => li.dataset.outcome)), ["failed", "succeeded"]);
    assert.match(await page.textContent("#job-summary"), /completed/);
    assert.deepEqual(errors, []);
    await context.close();
  });

  test("a dead job's Replay button replays that job", { timeout: 120_000 }, async () => {
    const one = await backgroundJob({ faults: ["503", "ok"], until: (j) => j.state === "dead" });
    const { context, page, errors } = await openConsole(stack);
    assert.equal(await go(page, jobHash("dev", one.key)), "ready", await problemOf(page, "job"));
    const sent = page.waitForRequest((r) => r.url().endsWith(`${ADMIN}/dead-letters/replay`));
    await page.click("#replay");
    const request = await sent;
    assert.match(request.headers()["idempotency-key"], UUID);
    assert.deepEqual(request.postDataJSON(), { tenant: "dev", key: one.key });
    await page.waitForSelector("#job-body [data-role=outcome]");
    assert.match(await page.textContent("#job-body [data-role=outcome]"), /^Replayed/);
    // The page follows the job until it completes.
    await page.waitForSelector('#job-summary .badge[data-state="completed"]', { timeout: DELIVERY_MS });
    assert.equal(await page.locator("#job-events li[data-action=replayed]").count(), 1);
    assert.deepEqual(errors, []);
    await context.close();
  });

  test("an unknown job: Resolve as succeeded with the operator's JSON; Allow one new attempt", { timeout: 180_000 }, async () => {
    const operatorBody = {
      id: "chatcmpl-from-the-dashboard",
      object: "chat.completion",
      created: 1767225600,
      model: "gpt-test",
      choices: [{ index: 0, message: { role: "assistant", content: "found in the provider's dashboard" }, finish_reason: "stop" }],
    };
    const isUnknown = (j) => j.state === "unknown";
    const [settledJob, retried] = await Promise.all([
      backgroundJob({ faults: ["hang"], until: isUnknown }),
      backgroundJob({ faults: ["hang", "ok"], until: isUnknown }),
    ]);
    const { context, page, errors } = await openConsole(stack);

    // Resolve as succeeded: not JSON is refused in the page; JSON is sent as the response body.
    assert.equal(await go(page, jobHash("dev", settledJob.key)), "ready", await problemOf(page, "job"));
    await page.fill("#resolve-body", "{ not json");
    await page.click("#resolve");
    assert.match(await page.textContent("#job-actions .problem"), /not JSON/);
    await page.fill("#resolve-body", JSON.stringify(operatorBody, null, 2));
    assert.equal(await page.isVisible("#job-actions .problem"), false, "the message goes once the text changes");
    await screenshot(page, "console-unknown");
    const sent = page.waitForRequest((r) => r.url().endsWith(`${ADMIN}/jobs/resolve`));
    await page.click("#resolve");
    const request = await sent;
    assert.match(request.headers()["idempotency-key"], UUID);
    assert.deepEqual(request.postDataJSON(), { tenant: "dev", key: settledJob.key, action: "succeeded", response: { status: 200, body: operatorBody } });
    await page.waitForSelector("#job-body [data-role=outcome]");
    assert.match(await page.textContent("#job-body [data-role=outcome]"), /^Resolved as succeeded/);
    assert.equal(await settled(page, "job"), "ready");
    assert.equal(await page.locator("#job-events li[data-action=resolved_succeeded]").count(), 1);
    assert.deepEqual(JSON.parse(await page.textContent("#job-result pre")), operatorBody, "the stored result is the operator's");
    const duplicate = await stack.post(settledJob.key, chat(`${settledJob.key} background`));
    assert.deepEqual(JSON.parse(duplicate.text), operatorBody, "callers get the operator's answer");

    // Allow one new attempt: the queue runs the job again and the page follows it.
    assert.equal(await go(page, jobHash("dev", retried.key)), "ready", await problemOf(page, "job"));
    const retry = page.waitForRequest((r) => r.url().endsWith(`${ADMIN}/jobs/resolve`));
    await page.click("#allow-attempt");
    assert.deepEqual((await retry).postDataJSON(), { tenant: "dev", key: retried.key, action: "retry" });
    await page.waitForSelector("#job-events li[data-action=allowed_attempt]");
    await page.waitForSelector('#job-summary .badge[data-state="completed"]', { timeout: DELIVERY_MS });
    assert.deepEqual(await page.$$eval("#job-attempts li.attempt", (items) => items.map((li) => li.dataset.outcome)), ["unknown", "succeeded"]);
    assert.deepEqual(errors, []);
    await context.close();
  });
  test("dead synchronous jobs are listed under Dead letters, labelled and apart from the dead letters (only background jobs are dead-lettered)", { timeout: 60_000 }, async () => {
    const key = newKey();
    llm.script(key, ["503"]);
    const answer = await stack.post(key, chat(`${key} sync`));
    assert.equal(answer.res.status, 503, answer.text);
    await waitFor(
      "the dead sync job in the jobs index",
      async () => {
        const listed = await stack.admin(`${ADMIN}/jobs?state=dead&limit=50`);
        return { ok: (listed.body?.jobs ?? []).some((j) => j.key === key && !j.background), value: listed.text };
      },
      10_000,
      300,
    );
    const { context, page, errors } = await openConsole(stack);
    assert.equal(await go(page, "#dead-letters"), "ready", await problemOf(page, "dead-letters"));
    await page.waitForSelector(`#dl-sync tbody tr[data-key="${key}"]`);
    assert.equal(await page.locator(`#dl-table tbody tr[data-key="${key}"]`).count(), 0, "not a dead letter");
    const cells = await rowCells(page, "#dl-sync", "key", key);
    assert.deepEqual([cells[1], cells[3], cells[4], cells[6]], ["dev", key, "unavailable", "1"]);
    assert.match(await page.textContent("#dl-sync-card h2"), /^Dead synchronous jobs\s*— not dead letters$/);
    const listed = (await adminGet(stack, `${ADMIN}/jobs?state=dead&limit=50`)).jobs.filter((j) => !j.background);
    assert.equal(await page.locator("#dl-sync tbody tr[data-key]").count(), listed.length);
    assert.equal(await page.textContent("#dl-sync-note"), `${listed.length} from the jobs index.`);
    await screenshot(page, "console-dead-sync");
    await page.click(`#dl-sync tr[data-key="${key}"] td:first-child`);
    assert.equal(await settled(page, "job"), "ready", await problemOf(page, "job"));
    assert.match(await page.textContent("#job-summary"), /sync/);
    assert.deepEqual(errors, []);
    await context.close();
  });
});

describe("operations console: a job type's effects", () => {
  let stack;
  before(async () => {
    // The demo provider and inbox (as `make dev`), with a triage whose email waits for an approval.
    const triage_approve = triageType({ effects: { email: { approve: true, approval_ttl_ms: 600_000 } } });
    // Breakers open after 2 failures in a row here, so the providers page has an open one to show.
    stack = await startStack({ upstream: "demo", vars: { JOB_TYPES: JSON.stringify({ triage_approve }), BREAKER_FAILURES: "2" } });
  });
  after(async () => {
    await stack?.stop();
  });

  test("a job's effects: the row written, the mail awaiting approval; Approve sends it once, shown done with its receipt", async () => {
    const key = newKey();
    const ticket = `T-${Date.now()}`;
    const run = await stack.run("triage_approve", key, triageInput(ticket));
    assert.equal(run.status, 200, run.text);
    assert.equal(run.body.state, "awaiting_approval", run.text);
    const { context, page, errors } = await openConsole(stack);
    assert.equal(await go(page, jobHash("dev", key)), "ready", await problemOf(page, "job"));
    const states = () => page.$$eval("#job-effects tr[data-effect]", (rows) => rows.map((r) => [r.dataset.effect, r.dataset.state]));
    assert.deepEqual(await states(), [["record", "done"], ["email", "awaiting_approval"]]);
    assert.match(await page.textContent("#job-effects h2"), /awaiting approval/);
    await page.click("#job-effects tr[data-effect=email] button[data-effect-action=Approve]");
    await page.waitForFunction(() => document.querySelector("#job-effects tr[data-effect=email]")?.dataset.state === "done", null, { timeout: 20_000 });
    assert.match(await page.textContent("#job-effects tr[data-effect=email]"), /approved by dev-admin/);
    const mails = (await (await fetch(`${stack.url}/demo/inbox`)).json()).rows.filter((m) => m.payload.ticket_id === ticket);
    assert.equal(mails.length, 1, "one mail, sent after the approval");
    // Approving again (the API) runs nothing twice.
    const again = await stack.admin(`${ADMIN}/jobs/dev/${encodeURIComponent(key)}/approve`, { body: {} });
    assert.equal(again.status, 200, again.text);
    assert.equal((await (await fetch(`${stack.url}/demo/inbox`)).json()).rows.filter((m) => m.payload.ticket_id === ticket).length, 1);
    await screenshot(page, "console-effects");
    assert.deepEqual(errors, []);
    await context.close();
  });
  test("awaiting approval: the actions show the payload about to be sent; after Approve the banner spans the page, Operator events names the approver, timestamps clear of the text (1280 px and a phone)", async () => {
    const key = newKey();
    const ticket = `T-${Date.now()}`;
    const run = await stack.run("triage_approve", key, triageInput(ticket));
    assert.equal(run.body.state, "awaiting_approval", run.text);
    const view = await adminGet(stack, `${ADMIN}/jobs/dev/${encodeURIComponent(key)}`);
    const email = view.effects.find((e) => e.name === "email");
    const { context, page, errors } = await openConsole(stack);
    assert.equal(await go(page, jobHash("dev", key)), "ready", await problemOf(page, "job"));
    const actions = await page.textContent("#job-actions");
    assert.doesNotMatch(actions, /None for a completed job/);
    assert.match(actions, /an effect waits for an operator's approval before it runs/);
    assert.deepEqual(JSON.parse(await page.textContent("#job-actions pre[data-effect=email]")), email.payload, "the payload the approver is about to send");
    assert.equal(await page.locator("#job-actions pre").count(), 1, "only the effect that waits");
    await screenshot(page, "console-awaiting-approval");

    await page.click("#approve");
    await page.waitForSelector("#job-body [data-role=outcome]");
    assert.equal(await page.textContent("#job-body [data-role=outcome]"), "Approved: email runs once.");
    await page.waitForFunction(() => document.querySelector("#job-effects tr[data-effect=email]")?.dataset.state === "done", null, { timeout: 20_000 });
    // The banner is a line across the page; the summary stays at the left, under it.
    const [body, banner, summary] = await Promise.all(["#job-body", "#job-body [data-role=outcome]", "#job-summary"].map((q) => page.locator(q).boundingBox()));
    assert.equal(banner.width, body.width, "the banner spans the page");
    assert.equal(summary.x, body.x, "the summary is not pushed aside");
    assert.ok(summary.y >= banner.y + banner.height, "the summary is under the banner");
    // Who approved, among the operator events (read from the effect's events: the job's own do not record it).
    const approved = page.locator("#job-events li[data-action=approved]");
    assert.equal(await approved.count(), 1);
    assert.match(await approved.textContent(), /approved\s*email\s*by dev-admin$/);
    assert.doesNotMatch(await page.textContent("#job-events"), /No operator has acted/);
    await assertEventsApart(page, "1280 px");
    await screenshot(page, "console-approved");
    assert.equal(await page.locator("#job-actions pre").count(), 0, "nothing waits any more");

    const phone = await openConsole(stack, DEV_ADMIN_KEY, { viewport: PHONE });
    assert.equal(await go(phone.page, jobHash("dev", key)), "ready", await problemOf(phone.page, "job"));
    await assertEventsApart(phone.page, "phone");
    await screenshot(phone.page, "console-approved-phone");
    const wide = await phone.page.evaluate(() => [...document.querySelectorAll("#view-job *")].filter((e) => e.getBoundingClientRect().right > innerWidth + 1).slice(0, 5).map((e) => `${e.tagName}.${e.className}#${e.id}`));
    assert.deepEqual(wide, [], "nothing wider than a phone's screen");
    assert.equal(await overflowsSideways(phone.page), false);
    assert.deepEqual([...errors, ...phone.errors], []);
    await phone.context.close();
    await context.close();
  });

  test("cost out of the box: without PRICES the bundled table prices the demo models, and the Cost view shows the table's date", async () => {
    const costs = await adminGet(stack, `${ADMIN}/costs`);
    const dev = costs.by_tenant.find((t) => t.tenant === "dev");
    assert.ok(dev?.cost_usd > 0, `the demo models have a price: ${JSON.stringify(costs)}`);
    assert.deepEqual(costs.prices.overridden, [], "no PRICES here");
    const { context, page, errors } = await openConsole(stack);
    assert.equal(await go(page, "#costs"), "ready", await problemOf(page, "costs"));
    assert.notEqual((await rowCells(page, "#cost-tenants", "tenant", "dev"))[3], "$0.00");
    assert.equal(await page.textContent("#cost-prices"), `Prices: onejob's bundled list prices as of ${costs.prices.bundled_as_of}. A job is costed when it is indexed, with the prices of that time.`);
    await screenshot(page, "console-costs-bundled");
    assert.deepEqual(errors, []);
    await context.close();
  });

  test("providers: each breaker as GET /onejob/v1/providers has it (an open one with its next probe and transition), and the routes", async () => {
    // demo-outage always answers 503: two failovers open its breaker (BREAKER_FAILURES=2).
    for (let i = 0; i < 2; i++) {
      const answer = await stack.post(newKey(), { ...chat(`failover ${i}`), model: "demo-failover" });
      assert.equal(answer.res.status, 200, answer.text);
    }
    const { context, page, errors } = await openConsole(stack);
    assert.equal(await go(page, "#providers"), "ready", await problemOf(page, "providers"));
    const api = await adminGet(stack, "/onejob/v1/providers");
    assert.equal(await page.locator("#providers-table tbody tr[data-provider]").count(), api.providers.length);
    for (const p of api.providers) {
      const cells = await rowCells(page, "#providers-table", "provider", p.name);
      assert.deepEqual(cells.slice(0, 8), [p.name, p.kind, p.breaker ? "yes" : "no", p.state.replaceAll("_", " "), integer.format(p.consecutive_failures), integer.format(p.calls), integer.format(p.failures), `${(p.error_rate * 100).toFixed(1)}%`]);
      assert.equal(await page.locator(`#providers-table tr[data-provider="${p.name}"] ol.transitions li`).count(), p.transitions.length);
    }
    const outage = api.providers.find((p) => p.name === "demo-outage");
    assert.equal(outage.state, "open", JSON.stringify(outage));
    const row = await rowCells(page, "#providers-table", "provider", "demo-outage");
    assert.match(row[8], /^in \d+\.\d\d s/, "the next probe");
    assert.match(row[9], /^closed → open/);
    assert.equal((await rowCells(page, "#providers-table", "provider", "demo"))[8], "— (no breaker: always called)");
    assert.equal(await page.locator("#routes-table tbody tr[data-model]").count(), api.routes.length);
    assert.equal((await rowCells(page, "#routes-table", "model", "demo-failover"))[1], "demo-outage (demo) → demo-backup (demo)");
    assert.equal((await rowCells(page, "#routes-table", "model", "demo-hedge"))[2], "after 300 ms");
    await screenshot(page, "console-providers");
    assert.deepEqual(errors, []);
    await context.close();
  });
});
