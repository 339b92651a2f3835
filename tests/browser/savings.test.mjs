// End-to-end: the console's Savings view (issue 21) in headless Chromium
// against the worker on the demo provider, as `make dev` runs it (the demo
// models' bundled pretend price, KEYLESS=window). Requests answered without
// an upstream call are made through the API first (replays, coalesced
// duplicates, a keyless join, another tenant's replay); the view must show
// the savings API's figures. Screenshots: tests/artifacts/console-savings*.png.
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { after, before, describe, test } from "node:test";

import { launchChromium, screenshot } from "../support/browser.mjs";
import { DEV_ADMIN_KEY, TENANT_B_KEY, adminKeysVar, chat, newKey, sleep, startStack, waitFor } from "../support/harness.mjs";

const ADMIN = "/onejob/v1/admin";
/** An admin of tenant-b only. */
const B_ADMIN_KEY = "tenant-b-ops-admin-key";
/** A finished result reaches KV just after its response. */
const CACHE_WRITE_MS = 500;
const PHONE = { width: 390, height: 844 };
/** The calls avoided below: 3 replays, 3 coalesced, 1 keyless join (dev), 1 replay (tenant-b). */
const AVOIDED = { dev: 7, "tenant-b": 1 };

const integer = new Intl.NumberFormat("en-US");
/** The console's dollar format (www/admin/format.js fmtUsd), in en-US. */
function fmtUsd(value) {
  const options = value !== 0 && Math.abs(value) < 1 ? { maximumSignificantDigits: 3 } : { minimumFractionDigits: 2, maximumFractionDigits: 2 };
  return new Intl.NumberFormat("en-US", { style: "currency", currency: "USD", ...options }).format(value);
}

let browser;
before(async () => {
  browser = await launchChromium();
});
after(async () => {
  await browser?.close();
});

async function openConsole(stack, key, viewport = { width: 1280, height: 900 }) {
  const context = await browser.newContext({ viewport, locale: "en-US" });
  const page = await context.newPage();
  const errors = [];
  page.on("pageerror", (error) => errors.push(error.message));
  page.on("console", (message) => {
    if (message.type() === "error" && !/^Failed to load resource/.test(message.text())) errors.push(message.text());
  });
  await page.goto(`${stack.url}/admin/#savings`);
  await page.waitForSelector("body[data-ready=true]");
  await page.fill("#admin-key", key);
  await page.click("#sign-in-form button[type=submit]");
  await settled(page);
  return { context, page, errors };
}

/** Waits until the Savings view shows the answer for the current URL; returns its state. */
async function settled(page) {
  await page.waitForFunction(
    () => {
      const section = document.getElementById("view-savings");
      return !section.hidden && section.dataset.hash === location.hash && ["ready", "error"].includes(section.dataset.state);
    },
    undefined,
    { timeout: 20_000 },
  );
  return page.getAttribute("#view-savings", "data-state");
}

/** Each cell of `table`'s row for `name` (by its data-field), as text. */
const rowFields = (page, table, attribute, name) =>
  page.$$eval(`${table} tbody tr[data-${attribute}="${name}"] td[data-field]`, (cells) => Object.fromEntries(cells.map((c) => [c.dataset.field, c.textContent.trim()])));

/** The fields a table row shows for an API row. */
const expectedFields = (row) => ({
  "calls-avoided": integer.format(row.upstream_calls_avoided),
  kv_replay: integer.format(row.answered_without_call.kv_replay),
  ledger_replay: integer.format(row.answered_without_call.ledger_replay),
  coalesced: integer.format(row.answered_without_call.coalesced),
  keyless_join: integer.format(row.answered_without_call.keyless_join),
  "tokens-saved": integer.format(row.tokens_saved),
  "cost-saved": fmtUsd(row.cost_saved_usd),
  jobs: integer.format(row.jobs),
  tokens: integer.format(row.tokens),
  "cost-spent": fmtUsd(row.cost_usd),
});

describe("the console's Savings view on the demo provider", () => {
  let stack;
  let report;

  before(async () => {
    stack = await startStack({
      upstream: "demo",
      vars: { KEYLESS: "window", ADMIN_KEYS: adminKeysVar({ [B_ADMIN_KEY]: { name: "b-ops", tenant: "tenant-b" } }) },
    });
    // A job and 3 replays of it.
    const key = newKey();
    const body = chat(`Ticket ${key}: I was charged twice.`, { model: "demo" });
    assert.equal((await stack.post(key, body)).res.status, 200);
    for (let i = 0; i < 3; i++) {
      await sleep(CACHE_WRITE_MS);
      assert.equal((await stack.post(key, body)).res.headers.get("idempotent-replayed"), "true");
    }
    // A slow job (5 s) and 3 duplicates while it runs.
    const slowKey = newKey();
    const slow = chat(`Ticket ${slowKey}: where is my order?`, { model: "demo-slow" });
    const together = await Promise.all(Array.from({ length: 4 }, () => stack.post(slowKey, slow)));
    assert.equal(together.filter((a) => a.res.headers.get("idempotent-replayed") === "true").length, 3);
    // A keyless request and the same one again: joined.
    const keyless = chat(`Ticket ${randomUUID()}: cancel my plan.`, { model: "demo" });
    assert.equal((await stack.post(undefined, keyless)).res.status, 200);
    assert.equal((await stack.post(undefined, keyless)).res.headers.get("idempotent-replayed"), "true");
    // Another tenant's job, replayed once.
    const bKey = newKey();
    const bBody = chat(`Ticket ${bKey}: reset my password.`, { model: "demo" });
    assert.equal((await stack.post(bKey, bBody, { token: TENANT_B_KEY })).res.status, 200);
    await sleep(CACHE_WRITE_MS);
    assert.equal((await stack.post(bKey, bBody, { token: TENANT_B_KEY })).res.headers.get("idempotent-replayed"), "true");
    report = await waitFor("the savings counted", async () => {
      const { body: value } = await stack.admin(`${ADMIN}/savings?since_ms=${Date.now() - 86_400_000}`);
      const avoided = Object.fromEntries(value.by_tenant.map((t) => [t.tenant, t.upstream_calls_avoided]));
      return { ok: avoided.dev === AVOIDED.dev && avoided["tenant-b"] === AVOIDED["tenant-b"] && value.totals.jobs === 4, value };
    });
  });

  after(async () => {
    await stack?.stop();
  });

  test("totals, a saved-vs-spent chart and the tables per tenant and model, as the API counts them; the price table's date", async () => {
    assert.ok(report.totals.cost_saved_usd > 0, `the demo models' pretend price: ${JSON.stringify(report.totals)}`);
    assert.equal(report.totals.answered_without_call.coalesced, 3);
    assert.equal(report.totals.answered_without_call.keyless_join, 1);
    const { context, page, errors } = await openConsole(stack, DEV_ADMIN_KEY);
    assert.equal(await page.getAttribute("[data-tab=savings]", "aria-current"), "page");
    const tile = (stat) => page.textContent(`#savings-totals [data-stat=${stat}] .big`);
    assert.equal(await tile("calls-avoided"), integer.format(report.totals.upstream_calls_avoided));
    assert.equal(await tile("tokens-saved"), integer.format(report.totals.tokens_saved));
    assert.equal(await tile("cost-saved"), fmtUsd(report.totals.cost_saved_usd));
    assert.equal(await tile("cost-spent"), fmtUsd(report.totals.cost_usd));
    assert.match(await page.textContent("#savings-totals [data-stat=calls-avoided]"), /67% of 12 answers: \d+ from KV · \d+ from the Ledger · 3 coalesced · 1 keyless/);
    for (const row of report.by_tenant) assert.deepEqual(await rowFields(page, "#savings-tenants", "tenant", row.tenant), expectedFields(row), row.tenant);
    for (const row of report.by_model) assert.deepEqual(await rowFields(page, "#savings-models", "model", row.model ?? ""), expectedFields(row), row.model);
    assert.deepEqual(await page.$$eval("#savings-tenants tbody tr", (rows) => rows.map((r) => r.dataset.tenant)), ["dev", "tenant-b"]);
    assert.equal(await page.textContent("#savings-prices"), `Prices: onejob's bundled list prices as of ${report.prices.bundled_as_of}.`);
    // The chart: an hourly slot from the hour the last 24 h began in to now's, this hour's bars drawn.
    assert.ok(["24", "25"].includes(await page.getAttribute("#savings-chart figure", "data-slots")));
    assert.ok((await page.$$("#savings-chart rect.saved")).length >= 1);
    assert.ok((await page.$$("#savings-chart rect.spent")).length >= 1);
    assert.match(await page.getAttribute("#savings-chart svg", "aria-label"), new RegExp(`per hour: ${fmtUsd(report.totals.cost_saved_usd).replace("$", "\\$")} saved`));
    await screenshot(page, "console-savings");

    // One tenant: the filter asks the API for it.
    await page.fill("#savings-tenant", "tenant-b");
    await page.click("#savings-filters button[type=submit]");
    await page.waitForFunction(() => location.hash.includes("tenant=tenant-b"));
    assert.equal(await settled(page), "ready");
    assert.deepEqual(await page.$$eval("#savings-tenants tbody tr", (rows) => rows.map((r) => r.dataset.tenant)), ["tenant-b"]);
    assert.equal(await tile("calls-avoided"), "1");
    assert.deepEqual(errors, []);
    await context.close();
  });

  test("on a phone: the tiles two by two, each table row a card of labelled lines, nothing scrolls sideways", async () => {
    const { context, page, errors } = await openConsole(stack, DEV_ADMIN_KEY, PHONE);
    await screenshot(page, "console-savings-phone");
    const wide = await page.evaluate(() =>
      [...document.querySelectorAll("#view-savings *")].filter((e) => e.getBoundingClientRect().right > document.documentElement.clientWidth + 1).map((e) => `${e.tagName}#${e.id}.${e.className?.baseVal ?? e.className}`).slice(0, 8),
    );
    assert.deepEqual(wide, [], "nothing reaches past the screen's edge");
    assert.equal(await page.evaluate(() => document.documentElement.scrollWidth > document.documentElement.clientWidth), false);
    const label = await page.$eval("#savings-tenants tbody tr[data-tenant=dev] td[data-field=cost-saved]", (td) => td.dataset.label);
    assert.equal(label, "Saved");
    assert.deepEqual(errors, []);
    await context.close();
  });

  test("a tenant's admin sees that tenant's savings only; asking for another tenant shows the problem", async () => {
    const { context, page } = await openConsole(stack, B_ADMIN_KEY);
    assert.deepEqual(await page.$$eval("#savings-tenants tbody tr", (rows) => rows.map((r) => r.dataset.tenant)), ["tenant-b"]);
    assert.equal(await page.textContent("#savings-totals [data-stat=calls-avoided] .big"), "1");
    await page.evaluate(() => (location.hash = "#savings?tenant=dev"));
    assert.equal(await settled(page), "error");
    assert.match(await page.textContent("#view-savings [data-role=problem]"), /does not reach that tenant/);
    await context.close();
  });
});
