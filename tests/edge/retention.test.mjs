// Retention: the Ledger's alarm deletes a job when its retention ends. Runs
// its own worker with a short retention (the policy requires it to outlast
// the attempt and unknown leases: here 500 ms + 10 s slack + 500 ms).
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { after, before, test } from "node:test";

import { startFakeLlm } from "../support/fake-llm.mjs";
import { DEV_KEY, startWorker } from "../support/worker.mjs";

const RETENTION_SECONDS = 12;
let llm;
let worker;
let persistTo;

before(async () => {
  llm = await startFakeLlm();
  persistTo = mkdtempSync(path.join(tmpdir(), "onejob-retention-"));
  worker = await startWorker({
    vars: { UPSTREAM: llm.baseUrl, UPSTREAM_TIMEOUT_MS: "500", UNKNOWN_LEASE_MS: "500", RETENTION_SECONDS: String(RETENTION_SECONDS) },
    persistTo,
  });
});

after(async () => {
  await worker?.stop();
  await llm?.close();
  if (persistTo) rmSync(persistTo, { recursive: true, force: true });
});

test("an alarm deletes the job when its retention ends", async () => {
  const key = `retention-${randomUUID()}`;
  const res = await fetch(`${worker.url}/v1/chat/completions`, {
    method: "POST",
    headers: { Authorization: `Bearer ${DEV_KEY}`, "Idempotency-Key": key, "Content-Type": "application/json" },
    body: JSON.stringify({ model: "gpt-test", messages: [] }),
  });
  assert.equal(res.status, 200);
  const job = async () =>
    (await fetch(`${worker.url}/onejob/v1/jobs/${key}`, { headers: { Authorization: `Bearer ${DEV_KEY}` } })).status;
  assert.equal(await job(), 200);
  const body = await (await fetch(`${worker.url}/onejob/v1/jobs/${key}`, { headers: { Authorization: `Bearer ${DEV_KEY}` } })).json();
  assert.equal(body.expires_ms - body.created_ms, RETENTION_SECONDS * 1000);
  await new Promise((r) => setTimeout(r, RETENTION_SECONDS * 1000 + 1500));
  assert.equal(await job(), 404, "deleted by the alarm");
});
