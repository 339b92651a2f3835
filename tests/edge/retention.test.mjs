// Retention and storage hygiene: the Ledger's alarm deletes a job when its
// retention ends and leaves nothing behind, and reads never create storage.
// Runs its own worker with a short retention (the policy requires it to
// outlast the attempt and unknown leases: here 500 ms + 10 s slack + 500 ms).
import assert from "node:assert/strict";
import { existsSync, readdirSync } from "node:fs";
import path from "node:path";
import { DatabaseSync } from "node:sqlite";
import { after, before, test } from "node:test";

import { chat, newKey, sleep, startStack } from "../support/harness.mjs";

const RETENTION_SECONDS = 12;
let stack;

before(async () => {
  stack = await startStack({
    vars: { UPSTREAM_TIMEOUT_MS: "500", UNKNOWN_LEASE_MS: "500", RETENTION_SECONDS: String(RETENTION_SECONDS) },
  });
});

after(async () => {
  await stack?.stop();
});

/** The Ledger objects' SQLite files in the persisted state, with the user tables each holds. */
function ledgerDatabases() {
  const root = path.join(stack.persistTo, "v3", "do");
  if (!existsSync(root)) return [];
  const files = readdirSync(root, { recursive: true })
    .map(String)
    .filter((f) => f.endsWith(".sqlite"))
    .map((f) => path.join(root, f));
  return files.map((file) => {
    const db = new DatabaseSync(file, { readOnly: true });
    try {
      const tables = db
        .prepare("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE '\\_cf\\_%' ESCAPE '\\' AND name NOT LIKE 'sqlite\\_%' ESCAPE '\\' AND name NOT LIKE '\\_\\_miniflare%' ESCAPE '\\'")
        .all()
        .map((row) => row.name);
      return { file, tables };
    } finally {
      db.close();
    }
  });
}

test("reading 50 unknown keys stores nothing (bug 5)", async () => {
  const before = ledgerDatabases().filter((d) => d.tables.length > 0).length;
  for (let i = 0; i < 50; i++) {
    const { status } = await stack.getJob(newKey());
    assert.equal(status, 404);
  }
  const withTables = ledgerDatabases().filter((d) => d.tables.length > 0);
  assert.equal(withTables.length, before, `objects with tables: ${JSON.stringify(withTables)}`);
});

test("an alarm deletes the job when its retention ends, and leaves nothing behind", async () => {
  const key = newKey();
  const { res } = await stack.post(key, chat("keep me for 12 s"));
  assert.equal(res.status, 200);
  const { status, body: job } = await stack.getJob(key);
  assert.equal(status, 200);
  assert.equal(job.expires_ms - job.created_ms, RETENTION_SECONDS * 1000);
  assert.ok(ledgerDatabases().some((d) => d.tables.includes("job")), "the job is stored (in its one row)");
  await sleep(RETENTION_SECONDS * 1000 + 1500);
  assert.equal((await stack.getJob(key)).status, 404, "deleted by the alarm");
  const left = ledgerDatabases().filter((d) => d.tables.length > 0);
  assert.deepEqual(left, [], "no table, row or schema is left");
  // Forgotten everywhere: the KV cache does not outlive the job either.
  const again = await stack.post(key, chat("keep me for 12 s"));
  assert.equal(again.res.status, 200);
  assert.equal(again.res.headers.get("idempotent-replayed"), null, "a new job, not a replay");
  assert.equal(stack.llm.calls(key).length, 2);
});
