// What onejob saved (issue 21): every answer given without an upstream call
// is counted once in `GET /onejob/v1/admin/savings`, by kind (a replay from
// KV, a replay from the Ledger, a duplicate coalesced onto the running call,
// a keyless request joining its job), with the tokens and the estimated
// cost of the call it did not repeat, next to what was spent. The figures
// are exact: the fake's usage (10 prompt + 5 completion tokens) at the
// PRICES below is $0.02 a call. Runs with the KV cache read by every
// request (RESULT_CACHE=kv: the first replay is the Ledger's, which writes
// KV, the later ones KV's) and off (every replay the Ledger's); the
// upstream count stays 1 per job.
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { after, before, describe, test } from "node:test";

import { TENANT_B_KEY, adminKeysVar, assertProblem, chat, newKey, sleep, startStack, waitFor } from "../support/harness.mjs";

/** A result reaches KV just after the Ledger first replays it: the next replay asks this much later. */
const CACHE_WRITE_MS = 500;
const TENANT_B_ADMIN = "tenant-b-admin-test-key";
/** $1000 and $2000 per million tokens: 10 prompt + 5 completion tokens cost $0.02. */
const PRICE = { input_per_mtok: 1000, output_per_mtok: 2000 };
const CALL_USD = 0.02;
const CALL_TOKENS = 15;
const MODELS = { replay: "save-replay", coalesce: "save-coalesce", keyless: "save-keyless", tenantB: "save-tenant-b" };

/** The figures of answers without a call (`kinds`: how many of each kind), next to one job's spend. */
function figures(kinds, { jobs = 1 } = {}) {
  const n = Object.values(kinds).reduce((sum, k) => sum + k, 0);
  const byKind = { total: n, kv_replay: 0, ledger_replay: 0, coalesced: 0, keyless_join: 0, ...kinds };
  return {
    answered_without_call: byKind,
    upstream_calls_avoided: n,
    tokens_saved: n * CALL_TOKENS,
    cost_saved_usd: Math.round(n * CALL_USD * 1e9) / 1e9,
    jobs,
    tokens: jobs * CALL_TOKENS,
    cost_usd: Math.round(jobs * CALL_USD * 1e9) / 1e9,
  };
}

/** The row of `rows` whose `field` is `name`, without that field. */
function rowOf(rows, field, name) {
  const row = rows.find((r) => r[field] === name);
  assert.ok(row, `no ${field} ${name} in ${JSON.stringify(rows)}`);
  const { [field]: _, ...rest } = row;
  return rest;
}

for (const cache of ["kv", "off"]) {
  describe(`savings are counted once per answer without a call (RESULT_CACHE=${cache})`, () => {
    let stack;
    // The Ledger writes a result to KV when it first replays it: with the
    // cache on, the first replay is the Ledger's and the later ones KV's.
    const replays = (n) => (cache === "kv" ? { ledger_replay: 1, kv_replay: n - 1 } : { ledger_replay: n });
    const callsWith = (marker) => stack.llm.allCalls().filter((c) => c.body.includes(marker)).length;
    const savings = (query = "", token) => stack.admin(`/onejob/v1/admin/savings${query}`, token ? { token } : {});

    before(async () => {
      stack = await startStack({
        vars: {
          RESULT_CACHE: cache,
          KEYLESS: "window",
          KEYLESS_WINDOW_SECONDS: "60",
          PRICES: JSON.stringify(Object.fromEntries(Object.values(MODELS).map((m) => [m, PRICE]))),
          ADMIN_KEYS: adminKeysVar({ [TENANT_B_ADMIN]: { name: "b-ops", tenant: "tenant-b" } }),
        },
      });
    });
    after(async () => {
      await stack?.stop();
    });

    test("a first call, then replays, coalesced duplicates and keyless joins: the savings API's counts, tokens and cost, exactly", async () => {
      // Nothing saved yet: zeros, and the price table's date.
      const empty = await savings("?since_ms=0");
      assert.equal(empty.status, 200, empty.text);
      assert.equal(empty.body.totals.upstream_calls_avoided, 0);
      assert.deepEqual(empty.body.series, []);
      assert.match(empty.body.prices.bundled_as_of, /^\d{4}-\d{2}-\d{2}$/);
      assert.deepEqual(empty.body.prices.overridden, Object.values(MODELS).sort());
      assert.equal(empty.body.bucket_ms, 3_600_000);

      // A first call, then 3 replays (from KV with the cache on, else from the Ledger).
      const replayKey = newKey();
      const replayBody = chat(`${replayKey} replayed`, { model: MODELS.replay });
      const first = await stack.post(replayKey, replayBody);
      assert.equal(first.res.status, 200, first.text);
      for (let i = 0; i < 3; i += 1) {
        await sleep(CACHE_WRITE_MS);
        const again = await stack.post(replayKey, replayBody);
        assert.equal(again.res.headers.get("idempotent-replayed"), "true");
      }
      assert.equal(stack.llm.calls(replayKey).length, 1);

      // A call that takes a while and 4 identical requests during it: one call.
      const coalesceKey = newKey();
      stack.llm.script(coalesceKey, ["delay:1000"]);
      const coalesceBody = chat(`${coalesceKey} coalesced`, { model: MODELS.coalesce });
      const together = await Promise.all(Array.from({ length: 5 }, () => stack.post(coalesceKey, coalesceBody)));
      assert.deepEqual(together.map((a) => a.res.status), [200, 200, 200, 200, 200]);
      assert.equal(together.filter((a) => a.res.headers.get("idempotent-replayed") === "true").length, 4);
      assert.equal(stack.llm.calls(coalesceKey).length, 1);

      // Keyless (KEYLESS=window): 3 identical requests at once, then 1 more: one job, one call.
      const marker = randomUUID();
      const keylessBody = chat(`${marker} keyless`, { model: MODELS.keyless });
      stack.llm.scriptAll(["delay:1000"]);
      const joined = await Promise.all(Array.from({ length: 3 }, () => stack.post(undefined, keylessBody)));
      stack.llm.scriptAll([]);
      const later = await stack.post(undefined, keylessBody);
      assert.deepEqual([...joined, later].map((a) => a.res.status), [200, 200, 200, 200]);
      assert.equal(new Set([...joined, later].map((a) => a.res.headers.get("idempotency-key"))).size, 1);
      assert.equal(callsWith(marker), 1);

      // Another tenant's job and 2 replays of it.
      const bKey = newKey();
      const bBody = chat(`${bKey} tenant b`, { model: MODELS.tenantB });
      assert.equal((await stack.post(bKey, bBody, { token: TENANT_B_KEY })).res.status, 200);
      for (let i = 0; i < 2; i += 1) {
        await sleep(CACHE_WRITE_MS);
        const again = await stack.post(bKey, bBody, { token: TENANT_B_KEY });
        assert.equal(again.res.headers.get("idempotent-replayed"), "true");
      }
      assert.equal(stack.llm.calls(bKey, "tenant-b").length, 1);

      // Counted after the answers, in batches: wait for them, then a while
      // longer, to see nothing is counted twice.
      const dev = await waitFor(
        "the dev tenant's savings",
        async () => {
          const { body } = await savings("?tenant=dev&since_ms=0");
          return { ok: body.totals.upstream_calls_avoided >= 10 && body.totals.jobs >= 3, value: body };
        },
        10_000,
      );
      await sleep(1000);
      const { status, body } = await savings("?tenant=dev&since_ms=0");
      assert.equal(status, 200);
      assert.deepEqual(rowOf(body.by_model, "model", MODELS.replay), figures(replays(3)));
      assert.deepEqual(rowOf(body.by_model, "model", MODELS.coalesce), figures({ coalesced: 4 }));
      assert.deepEqual(rowOf(body.by_model, "model", MODELS.keyless), figures({ keyless_join: 3 }));
      assert.equal(body.by_model.length, 3, "only the dev tenant's models");
      assert.deepEqual(body.by_tenant.map((t) => t.tenant), ["dev"]);
      const totals = {
        answered_without_call: { total: 10, kv_replay: 0, ledger_replay: 0, coalesced: 4, keyless_join: 3, ...replays(3) },
        upstream_calls_avoided: 10,
        tokens_saved: 150,
        cost_saved_usd: 0.2,
        jobs: 3,
        tokens: 45,
        cost_usd: 0.06,
      };
      assert.deepEqual(body.totals, totals);
      assert.deepEqual(rowOf(body.by_tenant, "tenant", "dev"), totals);
      assert.deepEqual(dev.totals, totals, "nothing counted after the first full count");
      // The chart's series: this hour's bucket holds it all.
      assert.equal(body.series.length, 1);
      const { bucket_ms: bucket, ...inBucket } = body.series[0];
      assert.deepEqual(inBucket, totals);
      assert.equal(bucket % 3_600_000, 0);
      assert.ok(Date.now() - bucket < 3_600_000 + 60_000);

      // Savings are kept per hour: a since_ms inside this hour counts the whole
      // hour, saved and spent alike, and the answer says where it began.
      const inHour = (await savings(`?tenant=dev&since_ms=${bucket + 1}`)).body;
      assert.equal(inHour.since_ms, bucket);
      assert.deepEqual(inHour.totals, totals);

      // Every tenant (the dev admin reaches all): tenant-b's job and replays too.
      const all = (await savings("?since_ms=0")).body;
      assert.deepEqual(rowOf(all.by_tenant, "tenant", "tenant-b"), figures(replays(2)));
      assert.equal(all.totals.upstream_calls_avoided, 12);
      // since_ms past now's hour: nothing.
      const future = (await savings(`?since_ms=${Date.now() + 2 * 3_600_000}`)).body;
      assert.equal(future.totals.upstream_calls_avoided, 0);
      assert.equal(future.totals.jobs, 0);
    });

    test("a tenant-scoped admin sees its own tenant's savings only; another tenant's is 403", async () => {
      const own = await waitFor("tenant-b's savings", async () => {
        const answer = await savings("", TENANT_B_ADMIN);
        return { ok: answer.status === 200 && answer.body.totals.upstream_calls_avoided === 2, value: answer };
      });
      assert.deepEqual(own.body.by_tenant.map((t) => t.tenant), ["tenant-b"]);
      assert.deepEqual(own.body.by_model.map((m) => m.model), [MODELS.tenantB]);
      assert.deepEqual(own.body.totals, figures(replays(2)));
      assert.equal((await savings("?tenant=tenant-b", TENANT_B_ADMIN)).body.totals.upstream_calls_avoided, 2);
      assertProblem(await savings("?tenant=dev", TENANT_B_ADMIN), 403, "forbidden");
      // A tenant's own key is no admin key.
      const tenantKey = await savings("", TENANT_B_KEY);
      assert.equal(tenantKey.status, 401);
    });

    test("a bad query is a 400 problem naming the parameter; another method is 405", async () => {
      for (const [query, param] of [
        ["?since_ms=abc", "since_ms"],
        ["?since_ms=-1", "since_ms"],
        ["?since_ms=1&since_ms=2", "since_ms"],
        ["?bucket=day", "bucket"],
      ]) {
        const answer = await savings(query);
        const problem = assertProblem(answer, 400, "invalid-query");
        assert.match(problem.detail, new RegExp(param), query);
      }
      const post = await stack.admin("/onejob/v1/admin/savings", { method: "POST" });
      assert.equal(post.status, 405);
    });
  });
}
