// Median latency of a first call vs a replay through the edge, on the
// built-in demo provider (which simulates ~300 ms of model time).
//
//   make build-edge && node bench/latency.mjs [rounds]
//
// Starts its own `wrangler dev` on free ports with a throw-away state folder,
// and stops it. Figures are wall-clock times seen by a local client.
import { randomUUID } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";

import { DEV_KEY, startWorker } from "../tests/support/worker.mjs";

const rounds = Number(process.argv[2] ?? 30);
const persistTo = mkdtempSync(path.join(tmpdir(), "onejob-bench-"));
const worker = await startWorker({ vars: { UPSTREAM: "demo" }, persistTo });

async function timed(key, body) {
  const started = performance.now();
  const res = await fetch(`${worker.url}/v1/chat/completions`, {
    method: "POST",
    headers: { Authorization: `Bearer ${DEV_KEY}`, "Idempotency-Key": key, "Content-Type": "application/json" },
    body,
  });
  await res.arrayBuffer();
  if (res.status !== 200) throw new Error(`status ${res.status}`);
  return { ms: performance.now() - started, replayed: res.headers.get("idempotent-replayed") === "true" };
}

const quantile = (values, q) => {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))];
};

try {
  const first = [];
  const replay = [];
  const ledgerReplay = [];
  await timed(`bench-warmup-${randomUUID()}`, JSON.stringify({ model: "demo", messages: [] }));
  for (let i = 0; i < rounds; i++) {
    const key = `bench-${randomUUID()}`;
    const body = JSON.stringify({ model: "demo", messages: [{ role: "user", content: `ticket ${i}: refund please` }] });
    first.push((await timed(key, body)).ms);
    // The first replay may come from the Ledger before the KV write lands;
    // later ones come from the KV read-through cache.
    ledgerReplay.push((await timed(key, body)).ms);
    await new Promise((r) => setTimeout(r, 50));
    replay.push((await timed(key, body)).ms);
  }
  const row = (name, values) =>
    console.log(`${name.padEnd(34)} median ${quantile(values, 0.5).toFixed(1).padStart(7)} ms   p95 ${quantile(values, 0.95).toFixed(1).padStart(7)} ms`);
  console.log(`latency over ${rounds} keys (demo provider simulates ~300 ms per call)`);
  row("first call (upstream)", first);
  row("immediate replay", ledgerReplay);
  row("replay 50 ms later", replay);
} finally {
  await worker.stop();
  rmSync(persistTo, { recursive: true, force: true });
}
