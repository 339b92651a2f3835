// Dead-letter alerts (issue 9): when a cause's dead letters pass the
// threshold in a window (or at the first of class auth), exactly one alert
// per cause and window reaches the receiver, signed with HMAC-SHA256 over
// "<timestamp>.<body>", its delivery id the same on every retry.
import assert from "node:assert/strict";
import { createHmac } from "node:crypto";
import http from "node:http";
import { after, before, describe, test } from "node:test";

import { TENANT_B_KEY, chat, newKey, sleep, startStack } from "../support/harness.mjs";

const SECRET = "alert-signing-secret-for-tests";

/** A webhook receiver over real HTTP that records deliveries; fails the first `failures`. */
async function startReceiver({ failures = 0 } = {}) {
  const deliveries = [];
  let toFail = failures;
  const server = http.createServer(async (req, res) => {
    let body = "";
    for await (const chunk of req) body += chunk;
    deliveries.push({ headers: req.headers, body });
    if (toFail > 0) {
      toFail--;
      res.writeHead(503).end("not now");
      return;
    }
    res.end("ok");
  });
  await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
  return { url: `http://127.0.0.1:${server.address().port}/alerts`, deliveries, close: () => new Promise((r) => server.close(r)) };
}

const signatureOf = ({ headers, body }) =>
  `sha256=${createHmac("sha256", SECRET).update(`${headers["onejob-timestamp"]}.${body}`).digest("hex")}`;

/** Sends `count` background jobs whose every call fails with `fault`. */
async function deadJobs(stack, count, fault) {
  for (let i = 0; i < count; i++) {
    const key = newKey();
    stack.llm.script(key, [`${fault}*`]);
    const { res } = await stack.post(key, chat(`${key} dies`), { headers: { Prefer: "respond-async" } });
    assert.equal(res.status, 202);
  }
}

async function waitFor(what, check, timeoutMs = 20_000) {
  const deadline = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > deadline) assert.fail(`${what}: not within ${timeoutMs} ms`);
    await sleep(200);
  }
}

describe("dead-letter alerts", () => {
  let receiver;
  let stack;
  before(async () => {
    receiver = await startReceiver({ failures: 1 });
    stack = await startStack({
      vars: { MAX_ATTEMPTS: "1", ALERT_WEBHOOK_URL: receiver.url, ALERT_SECRET: SECRET, ALERT_THRESHOLD: "3", ALERT_WINDOW_MS: "3600000" },
    });
  });
  after(async () => {
    await stack?.stop();
    await receiver?.close();
  });

  test("past the threshold: one signed alert per cause and window, its delivery id the same on a retry", async () => {
    await deadJobs(stack, 3, "503");
    await sleep(4000);
    assert.equal(receiver.deliveries.length, 0, "3 dead letters is not more than the threshold of 3");
    await deadJobs(stack, 3, "503");
    // The first delivery is refused (503): the alert is sent again, same id.
    await waitFor("the alert delivered after a retry", () => receiver.deliveries.length >= 2, 40_000);
    await sleep(3000);
    const ids = new Set(receiver.deliveries.map((d) => d.headers["onejob-delivery"]));
    assert.equal(ids.size, 1, "one alert, retried under the same delivery id");
    for (const delivery of receiver.deliveries) {
      assert.equal(delivery.headers["onejob-signature"], signatureOf(delivery), "signed with ALERT_SECRET");
      const alert = JSON.parse(delivery.body);
      assert.equal(alert.cause, "unavailable");
      assert.ok(alert.count > 3);
      assert.ok(!delivery.body.includes("127.0.0.1"), "no upstream address in the alert");
    }
    assert.equal(receiver.deliveries.length, 2, "the accepted alert is not sent again");
    // More dead letters of the same cause in the same window: no new alert.
    await deadJobs(stack, 2, "503");
    await sleep(4000);
    assert.equal(receiver.deliveries.length, 2);
  });

  test("a dead letter of class auth (the provider refused the key) alerts at once", async () => {
    const before = receiver.deliveries.length;
    await deadJobs(stack, 1, "401");
    await waitFor("the auth alert", () => receiver.deliveries.length > before);
    const alert = JSON.parse(receiver.deliveries.at(-1).body);
    assert.equal(alert.cause, "auth");
    assert.equal(alert.count, 1);
  });
});

describe("dead letters of jobs that die by time", () => {
  let stack;
  before(async () => {
    stack = await startStack({ vars: { MAX_ATTEMPTS: "1", UPSTREAM_TIMEOUT_MS: "1000", UNKNOWN_LEASE_MS: "1000" } });
  });
  after(() => stack?.stop());

  test("a background job whose last attempt timed out dies when its lease ends, and is a dead letter", async () => {
    const key = newKey();
    stack.llm.script(key, ["hang"]);
    const { res } = await stack.post(key, chat(`${key} times out`), { headers: { Prefer: "respond-async" } });
    assert.equal(res.status, 202);
    const dead = await stack.waitForJob(key, (job) => job.state === "dead", { timeoutMs: 30_000 });
    assert.equal(dead.attempts.length, 1);
    let entry;
    for (let i = 0; i < 40 && !entry; i++) {
      const listed = await (await fetch(`${stack.url}/onejob/v1/admin/dead-letters`, { headers: { Authorization: "Bearer onejob-dev-admin-key" } })).json();
      entry = listed.entries.find((e) => e.key === key);
      if (!entry) await sleep(500);
    }
    assert.ok(entry, "the job that died by time is listed");
    assert.equal(entry.error_class, "timeout_after_send");
    assert.equal(stack.llm.calls(key).length, 1, "never a second call");
  });
});

describe("alerts in Slack's incoming-webhook format (ALERT_FORMAT=slack) and budget alerts", () => {
  let receiver;
  let stack;
  before(async () => {
    receiver = await startReceiver();
    // No ALERT_SECRET: Slack's URL is the secret. tenant-b's quota is 40
    // tokens a day (every fake answer costs 15); its alert is due at 0.5.
    stack = await startStack({
      vars: {
        MAX_ATTEMPTS: "1",
        ALERT_FORMAT: "slack",
        ALERT_WEBHOOK_URL: receiver.url,
        QUOTAS: JSON.stringify({ "tenant-b": { tenant_tokens_per_day: 40 } }),
        QUOTA_ALERT_SHARE: "0.5",
      },
    });
  });
  after(async () => {
    await stack?.stop();
    await receiver?.close();
  });

  test("a dead-letter alert is a Slack message: text and blocks, no idempotency key", async () => {
    const key = newKey();
    stack.llm.script(key, ["401*"]);
    const { res } = await stack.post(key, chat(`${key} dies`), { headers: { Prefer: "respond-async" } });
    assert.equal(res.status, 202);
    await waitFor("the auth alert", () => receiver.deliveries.some((d) => JSON.parse(d.body).text?.includes("cause auth")));
    const delivery = receiver.deliveries.find((d) => JSON.parse(d.body).text?.includes("cause auth"));
    const message = JSON.parse(delivery.body);
    assert.equal(message.text, "onejob: 1 dead letters of cause auth");
    assert.equal(message.blocks[0].type, "section");
    assert.equal(message.blocks[0].text.type, "mrkdwn");
    assert.match(message.blocks[1].elements[0].text, /onejob-alert-auth-\d+/);
    assert.equal(delivery.headers["onejob-signature"], undefined, "nothing to sign with");
    assert.ok(!delivery.body.includes(key), "a channel sees no key");
  });

  test("a budget alert once the tenant passes the share of its quota, once a day", async () => {
    const budget = () => receiver.deliveries.filter((d) => JSON.parse(d.body).text?.includes("daily token quota"));
    const call = async (i) => {
      const key = newKey();
      const { res } = await stack.post(key, chat(`budget ${i} ${key}`), { token: TENANT_B_KEY });
      return res.status;
    };
    assert.equal(await call(1), 200);
    await sleep(1500);
    assert.equal(budget().length, 0, "15 of 40 is under half");
    assert.equal(await call(2), 200);
    await waitFor("the budget alert", () => budget().length > 0);
    const message = JSON.parse(budget()[0].body);
    assert.equal(message.text, "onejob: tenant `tenant-b` has used 50% of its daily token quota");
    assert.match(message.blocks[0].text.text, /\*30\* of \*40\* tokens/);
    assert.match(message.blocks[1].elements[0].text, /onejob-budget-[0-9a-f]{16}-tenant_tokens_per_day-\d+/);
    assert.equal(await call(3), 200);
    await sleep(2000);
    assert.equal(budget().length, 1, "at most once per tenant, quota and day");
  });
});
