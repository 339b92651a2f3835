// User tokens and quotas (issue 9): a browser holds a short-lived HS256
// token its app's server minted, never the tenant key; jobs are scoped by
// tenant and user; expired, tampered, foreign and over-scoped tokens are
// refused; each user's (and tenant's) upstream tokens per day are budgeted,
// counted once per job, so replays stay free.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";

import { DEV_KEY, RESPOND_ASYNC, assertProblem, chat, newKey, sleep, startStack } from "../support/harness.mjs";
import { DEV_TOKEN_SECRET, mintToken } from "../support/keys.mjs";

const now = () => Math.floor(Date.now() / 1000);
const token = (claims = {}, secret = DEV_TOKEN_SECRET, options) =>
  mintToken({ tenant: "dev", sub: "alice", exp: now() + 600, iat: now(), ...claims }, secret, options);

describe("user tokens", () => {
  let stack;
  before(async () => {
    stack = await startStack();
  });
  after(() => stack?.stop());

  test("a valid token runs a job scoped to its user; the tenant key sees it only with ?user=", async () => {
    const key = newKey();
    const alice = token();
    const first = await stack.post(key, chat(`${key} as alice`), { token: alice });
    assert.equal(first.res.status, 200, first.text);
    assert.equal(stack.llm.allCalls().filter((c) => c.body.includes(key)).length, 1);
    // The same user again: replayed.
    const again = await stack.post(key, chat(`${key} as alice`), { token: alice });
    assert.equal(again.res.headers.get("idempotent-replayed"), "true");
    assert.equal(again.text, first.text);
    // Another user with the same key: a job of its own (never alice's answer).
    const bob = await stack.post(key, chat(`${key} as alice`), { token: token({ sub: "bob" }) });
    assert.equal(bob.res.status, 200);
    assert.equal(bob.res.headers.get("idempotent-replayed"), null);
    assert.equal(stack.llm.allCalls().filter((c) => c.body.includes(key)).length, 2);
    // The job views: the user's own, and the tenant's key only when it names the user.
    assert.equal((await stack.getJob(key, alice)).status, 200);
    assert.equal((await stack.getJob(key, DEV_KEY)).status, 404);
    assert.equal((await stack.getJob(key, DEV_KEY, { user: "alice" })).status, 200);
  });

  test("expired, tampered, foreign and alg-none tokens are 401; over-scoped ones 403", async () => {
    const refused = async (bearer, status, slug, body = chat("refused")) => {
      const result = await stack.post(newKey(), body, { token: bearer });
      assertProblem(result, status, slug);
      assert.ok(!result.text.includes(DEV_TOKEN_SECRET));
    };
    const before = stack.llm.allCalls().length;
    await refused(token({ exp: now() - 120, iat: now() - 700 }), 401, "unauthorized");
    const [header, , signature] = token().split(".");
    const otherPayload = token({ sub: "mallory" }).split(".")[1];
    await refused(`${header}.${otherPayload}.${signature}`, 401, "unauthorized");
    await refused(token({}, "another-secret-of-at-least-32-characters"), 401, "unauthorized");
    await refused(token({ tenant: "tenant-b" }), 401, "unauthorized");
    await refused(token({}, DEV_TOKEN_SECRET, { alg: "HS512" }), 401, "unauthorized");
    await refused(token({ exp: now() + 7 * 86_400 }), 401, "unauthorized");
    // Not valid for another hour (nbf), beyond the 30 s clock-skew allowance.
    await refused(token({ nbf: now() + 3_600, exp: now() + 7_200 }), 401, "unauthorized");
    await refused(token({ nbf: now() + 120 }), 401, "unauthorized");
    await refused(token({ models: ["gpt-allowed"] }), 403, "forbidden", chat("x", { model: "gpt-other" }));
    await refused(token({ paths: ["/v1/messages"] }), 403, "forbidden");
    assert.equal(stack.llm.allCalls().length, before, "no refused token reached the provider");
    // In scope: allowed.
    const ok = await stack.post(newKey(), chat("scoped", { model: "gpt-allowed" }), {
      token: token({ models: ["gpt-allowed"], paths: ["/v1/chat/*"] }),
    });
    assert.equal(ok.res.status, 200, ok.text);
    // nbf within the skew allowance, or past: valid.
    const skewed = await stack.post(newKey(), chat("nbf skew"), { token: token({ nbf: now() + 10 }) });
    assert.equal(skewed.res.status, 200, skewed.text);
    const started = await stack.post(newKey(), chat("nbf past"), { token: token({ nbf: now() - 60 }) });
    assert.equal(started.res.status, 200, started.text);
  });
});

describe("quotas", () => {
  let stack;
  before(async () => {
    // The fake answers 15 tokens per call: a user may start jobs until 30 are spent.
    stack = await startStack({ vars: { QUOTAS: JSON.stringify({ "*": { user_tokens_per_day: 30, tenant_tokens_per_day: 100000 } }) } });
  });
  after(() => stack?.stop());

  test("a user's daily token budget: new jobs refused with 429 until tomorrow, replays still free, other users unaffected", async () => {
    const carol = mintToken({ tenant: "dev", sub: "carol", exp: now() + 600, iat: now() }, DEV_TOKEN_SECRET);
    const keys = [newKey(), newKey()];
    for (const key of keys) {
      const { res, text } = await stack.post(key, chat(`${key} quota`), { token: carol });
      assert.equal(res.status, 200, text);
      await sleep(300); // the count is written after the answer
    }
    const calls = stack.llm.allCalls().length;
    const refused = await stack.post(newKey(), chat("one more"), { token: carol });
    const problem = assertProblem(refused, 429, "quota-exceeded");
    assert.equal(refused.res.headers.get("x-should-retry"), "false");
    const retryAfter = Number(refused.res.headers.get("retry-after"));
    assert.ok(retryAfter >= 1 && retryAfter <= 86_400, `Retry-After ${retryAfter} s: until the next day`);
    assert.ok(problem.retry_after_ms > 0);
    assert.equal(stack.llm.allCalls().length, calls, "refused before any upstream call");
    // A replay costs nothing and is not refused.
    const replay = await stack.post(keys[0], chat(`${keys[0]} quota`), { token: carol });
    assert.equal(replay.res.status, 200);
    assert.equal(replay.res.headers.get("idempotent-replayed"), "true");
    // Another user of the tenant has a budget of its own.
    const dave = mintToken({ tenant: "dev", sub: "dave", exp: now() + 600, iat: now() }, DEV_TOKEN_SECRET);
    const other = await stack.post(newKey(), chat("dave"), { token: dave });
    assert.equal(other.res.status, 200, other.text);
  });

  test("a background job whose user's budget is spent: its delivery asks the quota, calls nobody and defers the job to the next day", async () => {
    const erin = mintToken({ tenant: "dev", sub: "erin", exp: now() + 600, iat: now() }, DEV_TOKEN_SECRET);
    for (const key of [newKey(), newKey()]) {
      const { res, text } = await stack.post(key, chat(`${key} spend`), { token: erin });
      assert.equal(res.status, 200, text);
      await sleep(300); // the count is written after the answer
    }
    const calls = stack.llm.allCalls().length;
    const key = newKey();
    const accepted = await stack.post(key, chat(`${key} later`), { token: erin, headers: RESPOND_ASYNC });
    assert.equal(accepted.res.status, 202, accepted.text);
    // The delivery takes the message, finds the budget spent and defers
    // the job (a compare-and-swap write: its version moves) with no attempt.
    const first = JSON.parse(accepted.text);
    const job = await stack.waitForJob(key, (view) => view.version > first.version, { token: erin });
    assert.equal(job.state, "pending", JSON.stringify(job));
    assert.equal(job.attempts.length, 0);
    await sleep(2_000);
    const still = await stack.getJob(key, erin);
    assert.equal(still.body.state, "pending", "it waits for the next day");
    assert.equal(still.body.attempts.length, 0);
    assert.equal(stack.llm.allCalls().length, calls, "the spent budget made no upstream call");
  });
});
