// An object written by the build before the job's one row (its job in
// `jobs`, its owner in `meta`, every response in `responses` and
// `response_chunks`) keeps working after a deploy: its next touch migrates
// it in one step, and it answers, replays and shows as before.
//
// The test build (`faults`) writes that older layout on purpose for a key
// starting with `legacy-schema-`: after each of the job's writes the Ledger
// rewrites its object into the older tables and forgets what it knew, as a
// deploy's restart does (crates/edge/src/ledger/store/legacy.rs). So every
// step of these jobs — the claim, the response, the result, the replay —
// starts from an older object. The SQLite files are read to check that the
// older layout was there and is migrated.
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { existsSync, readdirSync } from "node:fs";
import path from "node:path";
import { DatabaseSync } from "node:sqlite";
import { after, before, test } from "node:test";

import { chat, newKey, startStack } from "../support/harness.mjs";

let stack;

before(async () => {
  // Every replay from the Ledger (none from KV).
  stack = await startStack({ faults: true, vars: { RESULT_CACHE: "off", UPSTREAM_TIMEOUT_MS: "2000" } });
});

after(async () => {
  await stack?.stop();
});

const legacyKey = () => `legacy-schema-${randomUUID()}`;

/** The tables and rows of the Ledger object holding `key`'s job, read from its SQLite file. */
function ledgerOf(key) {
  const root = path.join(stack.persistTo, "v3", "do");
  const files = existsSync(root) ? readdirSync(root, { recursive: true }).map(String).filter((f) => f.endsWith(".sqlite")) : [];
  for (const file of files) {
    const db = new DatabaseSync(path.join(root, file), { readOnly: true });
    try {
      const tables = db.prepare("SELECT name FROM sqlite_master WHERE type = 'table'").all().map((row) => row.name);
      const owner = tables.includes("job") ? db.prepare("SELECT meta FROM job").get()?.meta : null;
      if (!owner?.includes(key)) continue;
      const job = db.prepare("SELECT version, attempt FROM job").get();
      const responses = tables.includes("responses") ? db.prepare("SELECT attempt, status, size FROM responses ORDER BY attempt").all() : [];
      return { tables, job, responses: responses.map((row) => ({ ...row })) };
    } finally {
      db.close();
    }
  }
  return null;
}

async function firstAndReplay(key, script, content) {
  stack.llm.script(key, script);
  const first = await stack.post(key, chat(content));
  const replay = await stack.post(key, chat(content));
  assert.equal(replay.res.status, first.res.status, replay.text);
  assert.equal(replay.text, first.text, "the same body bytes");
  assert.equal(replay.res.headers.get("idempotent-replayed"), "true");
  assert.equal(replay.res.headers.get("onejob-attempt"), first.res.headers.get("onejob-attempt"));
  assert.equal(stack.llm.calls(key).length, script.length, "no call again");
  return { first, replay };
}

test("a job kept in the older layout at every step answers, replays and shows as before", async () => {
  const key = legacyKey();
  const { first } = await firstAndReplay(key, ["ok"], "an older object");
  assert.equal(first.res.status, 200, first.text);
  const { status, body } = await stack.getJob(key);
  assert.equal(status, 200, "its owner (the older `meta`) was migrated: the tenant sees it");
  assert.equal(body.state, "completed");
  const ledger = ledgerOf(key);
  assert.ok(ledger, "the job's object, by its owner's key");
  assert.ok(!ledger.tables.includes("jobs") && !ledger.tables.includes("meta"), `migrated: ${ledger.tables}`);
  // A small response goes in the job's row in this layout: in `responses`, it was the older layout's.
  assert.equal(ledger.job.attempt, null);
  assert.deepEqual(ledger.responses, [{ attempt: 1, status: 200, size: Buffer.byteLength(first.text) }]);
});

test("an older object's response in chunks (over 256 KB) replays whole", async () => {
  const key = legacyKey();
  const { first } = await firstAndReplay(key, ["big:400000"], "a large answer");
  assert.equal(first.res.status, 200);
  assert.ok(first.text.length > 400_000);
});

test("an older object with two attempts: the winner's response, written into an older object, replays", async () => {
  const key = legacyKey();
  const { first } = await firstAndReplay(key, ["503", "ok"], "retried");
  assert.equal(first.res.status, 200, first.text);
  assert.equal(first.res.headers.get("onejob-attempt"), "2");
  const ledger = ledgerOf(key);
  assert.ok(ledger.responses.some((row) => row.attempt === 2 && row.status === 200), JSON.stringify(ledger));
});

test("a job of this build keeps its job, owner and small response in one row, and no other table", async () => {
  const key = newKey();
  const { first } = await firstAndReplay(key, ["ok"], "a new object");
  assert.equal(first.res.status, 200);
  const ledger = ledgerOf(key);
  assert.deepEqual(ledger.tables.filter((t) => !t.startsWith("_cf_") && !t.startsWith("sqlite_") && !t.startsWith("__miniflare")), ["job"]);
  assert.equal(ledger.job.attempt, 1);
  assert.deepEqual(ledger.responses, []);
});
