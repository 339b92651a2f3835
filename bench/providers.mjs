// Several providers under one job, measured with fake providers over real
// HTTP (`make bench-providers`, or `node bench/providers.mjs [intents]`):
//
// 1. A primary outage (every call 503) with a healthy backup: upstream calls
//    per intent through onejob (failover as a new attempt of the same job,
//    the primary's breaker opening after BREAKER_FAILURES) against the loop a
//    user would otherwise write: the official `openai` package at its
//    defaults (2 retries with backoff) on the primary, then the backup.
// 2. Hedging: a primary with a slow tail (15% of answers take 1.5–3 s) and a
//    steady backup (250 ms): latency p50/p95/p99 and calls per intent with
//    and without `hedge_after_ms`.
//
// Figures are wall-clock times seen by a local client on this machine.
import OpenAI from "openai";

import { chat, newKey, startStack } from "../tests/support/harness.mjs";

const intents = Number(process.argv[2] ?? 100);
const CONCURRENCY = 8;

/** Runs `task(i)` for i in 0..n with at most `limit` at once. */
async function pool(n, limit, task) {
  let next = 0;
  const results = [];
  await Promise.all(
    Array.from({ length: limit }, async () => {
      while (next < n) {
        const i = next++;
        results[i] = await task(i);
      }
    }),
  );
  return results;
}

const quantile = (values, q) => {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))];
};
const totalCalls = (fake) => fake.allCalls().length;

// 1. A primary outage.
{
  const stack = await startStack({
    providers: [{ name: "primary" }, { name: "backup" }],
    routes: { "*": { providers: [{ provider: "primary" }, { provider: "backup" }] } },
    vars: { BREAKER_FAILURES: "5", BREAKER_COOLDOWN_MS: "2000", MAX_ATTEMPTS: "4" },
  });
  try {
    const { primary, backup } = stack.fakes;
    primary.scriptAll(["503*"]);
    backup.scriptAll(["delay:50*"]);
    const started = performance.now();
    const statuses = await pool(intents, CONCURRENCY, async (i) => (await stack.post(newKey(), chat(`ticket ${i}`))).res.status);
    const seconds = (performance.now() - started) / 1000;
    const ok = statuses.filter((s) => s === 200).length;
    const p = totalCalls(primary);
    const b = totalCalls(backup);
    console.log(`outage, onejob: ${intents} intents (${ok} answered) in ${seconds.toFixed(1)} s`);
    console.log(`  primary calls ${p} (${(p / intents).toFixed(2)}/intent), backup calls ${b}, upstream calls per intent ${((p + b) / intents).toFixed(2)}`);

    // The loop a user writes without onejob: the SDK's retries, then the backup.
    const before = { p: totalCalls(primary), b: totalCalls(backup) };
    const client = (fake) => new OpenAI({ baseURL: fake.baseUrl, apiKey: "sk-test" });
    const [onPrimary, onBackup] = [client(primary), client(backup)];
    const naiveStarted = performance.now();
    await pool(intents, CONCURRENCY, async (i) => {
      const body = chat(`naive ticket ${i}`);
      try {
        return await onPrimary.chat.completions.create(body);
      } catch {
        return await onBackup.chat.completions.create(body);
      }
    });
    const naiveSeconds = (performance.now() - naiveStarted) / 1000;
    const np = totalCalls(primary) - before.p;
    const nb = totalCalls(backup) - before.b;
    console.log(`outage, openai SDK defaults then backup: ${intents} intents in ${naiveSeconds.toFixed(1)} s`);
    console.log(`  primary calls ${np} (${(np / intents).toFixed(2)}/intent), backup calls ${nb}, upstream calls per intent ${((np + nb) / intents).toFixed(2)}`);
  } finally {
    await stack.stop();
  }
}

// 2. Hedging a slow tail.
{
  const stack = await startStack({
    providers: [{ name: "primary" }, { name: "backup" }],
    routes: {
      plain: { providers: [{ provider: "primary" }, { provider: "backup" }] },
      hedged: { providers: [{ provider: "primary" }, { provider: "backup" }], hedge_after_ms: 400 },
    },
  });
  try {
    const { primary, backup } = stack.fakes;
    backup.scriptAll(["delay:250*"]);
    // The same latency for the same intent under both routes.
    const delays = Array.from({ length: intents }, () =>
      Math.random() < 0.15 ? 1500 + Math.random() * 1500 : 150 + Math.random() * 150,
    ).map(Math.round);
    for (const model of ["plain", "hedged"]) {
      const before = { p: totalCalls(primary), b: totalCalls(backup) };
      const latencies = await pool(intents, CONCURRENCY, async (i) => {
        const key = newKey();
        primary.script(key, [`delay:${delays[i]}`]);
        const started = performance.now();
        const { res, text } = await stack.post(key, chat(`ticket ${i}`, { model }));
        if (res.status !== 200) throw new Error(`${model}: ${res.status} ${text}`);
        return performance.now() - started;
      });
      const calls = totalCalls(primary) - before.p + totalCalls(backup) - before.b;
      const [p50, p95, p99] = [0.5, 0.95, 0.99].map((q) => Math.round(quantile(latencies, q)));
      console.log(`hedging, route ${model.padEnd(6)}: p50 ${p50} ms, p95 ${p95} ms, p99 ${p99} ms, upstream calls per intent ${(calls / intents).toFixed(2)}`);
    }
    console.log(`  the primary alone: p95 ${Math.round(quantile(delays, 0.95))} ms (scripted), the backup 250 ms, hedge after 400 ms`);
  } finally {
    await stack.stop();
  }
}
