// onejob's edge against a plain pass-through Worker (bench/passthrough),
// both under `wrangler dev`, both calling the same fake upstream over real
// HTTP (50 ms per call), measured interleaved in one run:
//
// - first-call latency p50/p95 of each, and their ratio;
// - replay latency (from the Ledger, and from KV) against the upstream's delay;
// - a 1000-way storm on one key: upstream calls, identical bodies, wall time;
// - throughput at concurrency 16 on distinct keys, and its ratio;
// - a streamed answer (20 events, 50 ms apart): time to first event and to
//   the end, straight from the upstream and through each; 100 concurrent
//   duplicate streams on one key; the runtime's memory while a 20 MB stream
//   passes through onejob (no whole-body buffering).
//
//   make bench            (node bench/edge.mjs [rounds])
//
// Figures are wall-clock times seen by a local client on this machine.
import { readFileSync, readdirSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

import { DEV_KEY, chat, newKey, readBody, startFakeLlm, startStack } from "../tests/support/harness.mjs";

const rounds = Number(process.argv[2] ?? 40);
const UPSTREAM_MS = 50;
const here = path.dirname(fileURLToPath(import.meta.url));

const llm = await startFakeLlm();
llm.scriptAll([`delay:${UPSTREAM_MS}*`]);
// BENCH_ONEJOB_DIR: another checkout's built worker (for before/after runs);
// BENCH_VARS: settings for onejob, as JSON (e.g. {"RESULT_CACHE":"off"}).
const otherCheckout = process.env.BENCH_ONEJOB_DIR;
const onejob = await startStack({
  llm,
  vars: JSON.parse(process.env.BENCH_VARS ?? "{}"),
  ...(otherCheckout ? { cwd: otherCheckout, config: "wrangler.toml" } : {}),
});
const passthrough = await startStack({ llm, config: "wrangler.toml", cwd: path.join(here, "passthrough") });

/** One keyed call, read to its end: its text, first-byte and total times. */
async function timedStream(stack, key, body) {
  const started = performance.now();
  const res = await fetch(`${stack.url}/v1/chat/completions`, {
    method: "POST",
    headers: { Authorization: `Bearer ${DEV_KEY}`, "Idempotency-Key": key, "Content-Type": "application/json" },
    body,
  });
  const { text, firstByteMs, totalMs } = await readBody(res, started);
  if (res.status !== 200) throw new Error(`status ${res.status}: ${text}`);
  return { ms: totalMs, firstMs: firstByteMs, totalMs, text };
}

const timed = timedStream;

/** Resident memory of every workerd process on the machine, in MB (Linux /proc). */
function workerdRssMb() {
  let kb = 0;
  for (const pid of readdirSync("/proc").filter((d) => /^\d+$/.test(d))) {
    try {
      if (!readFileSync(`/proc/${pid}/cmdline`, "utf8").includes("workerd")) continue;
      kb += Number(readFileSync(`/proc/${pid}/status`, "utf8").match(/VmRSS:\s+(\d+)/)?.[1] ?? 0);
    } catch {}
  }
  return kb / 1024;
}

const quantile = (values, q) => {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))];
};
const fmt = (ms) => `${ms.toFixed(1).padStart(7)} ms`;
const row = (name, values) => console.log(`${name.padEnd(36)} p50 ${fmt(quantile(values, 0.5))}   p95 ${fmt(quantile(values, 0.95))}`);

async function throughput(stack, total, concurrency) {
  let next = 0;
  const started = performance.now();
  const worker = async () => {
    while (next < total) {
      next++;
      await timed(stack, newKey(), JSON.stringify(chat(`throughput ${next}`)));
    }
  };
  await Promise.all(Array.from({ length: concurrency }, worker));
  return total / ((performance.now() - started) / 1000);
}

try {
  // Warm both isolates.
  for (const stack of [onejob, passthrough]) await timed(stack, newKey(), JSON.stringify(chat("warm-up")));

  const first = { onejob: [], passthrough: [] };
  const ledgerReplay = [];
  const kvReplay = [];
  for (let i = 0; i < rounds; i++) {
    const body = JSON.stringify(chat(`ticket ${i}: refund please`));
    // Interleaved, alternating which goes first, so drift hits both alike.
    const order = i % 2 ? [["onejob", onejob], ["passthrough", passthrough]] : [["passthrough", passthrough], ["onejob", onejob]];
    let key;
    for (const [name, stack] of order) {
      const k = newKey();
      if (name === "onejob") key = k;
      first[name].push((await timed(stack, k, body)).ms);
    }
    // At once: answered by the Ledger (the KV write may not have landed);
    // 50 ms later: by the KV read-through cache.
    ledgerReplay.push((await timed(onejob, key, body)).ms);
    await new Promise((r) => setTimeout(r, 50));
    kvReplay.push((await timed(onejob, key, body)).ms);
  }
  console.log(`first calls and replays over ${rounds} keys (upstream: ${UPSTREAM_MS} ms per call)`);
  row("pass-through first call", first.passthrough);
  row("onejob first call", first.onejob);
  console.log(`first-call p50 ratio onejob / pass-through: ${(quantile(first.onejob, 0.5) / quantile(first.passthrough, 0.5)).toFixed(2)}`);
  row("onejob replay (Ledger)", ledgerReplay);
  row("onejob replay (KV)", kvReplay);

  const key = newKey();
  llm.scriptAll(["delay:1000"]);
  const callsBefore = llm.allCalls().length;
  const started = performance.now();
  const storm = await Promise.all(Array.from({ length: 1000 }, () => timed(onejob, key, JSON.stringify(chat("storm")))));
  const stormMs = performance.now() - started;
  llm.scriptAll([`delay:${UPSTREAM_MS}*`]);
  console.log(
    `1000-way storm on one key: ${llm.allCalls().length - callsBefore} upstream call(s), ${new Set(storm.map((s) => s.text)).size} distinct body, ${stormMs.toFixed(0)} ms wall (upstream 1000 ms)`,
  );

  const total = 16 * 20;
  const passRate = await throughput(passthrough, total, 16);
  const onejobRate = await throughput(onejob, total, 16);
  console.log(`throughput at concurrency 16, ${total} distinct keys: pass-through ${passRate.toFixed(0)} req/s, onejob ${onejobRate.toFixed(0)} req/s (${(onejobRate / passRate).toFixed(2)}×)`);
  const streamed = JSON.stringify(chat("stream please", { stream: true }));
  const streamTimes = { onejob: [], passthrough: [] };
  // Every key streams (the pass-through sends the raw key, onejob a derived one).
  llm.scriptAll(["sse:20:50*"]);
  streamTimes.upstream = [];
  const direct = { url: llm.baseUrl.replace(/\/v1$/, "") };
  for (let i = 0; i < 10; i++) {
    for (const [name, stack] of [["upstream", direct], ["passthrough", passthrough], ["onejob", onejob]]) {
      streamTimes[name].push(await timedStream(stack, newKey(), streamed));
    }
  }
  for (const name of ["upstream", "passthrough", "onejob"]) {
    const first = streamTimes[name].map((t) => t.firstMs);
    const total = streamTimes[name].map((t) => t.totalMs);
    console.log(`stream via ${name.padEnd(11)} first event p50 ${fmt(quantile(first, 0.5))}   end p50 ${fmt(quantile(total, 0.5))}`);
  }
  const shared = newKey();
  const before = llm.allCalls().length;
  const streamStarted = performance.now();
  const copies = await Promise.all(Array.from({ length: 100 }, () => timedStream(onejob, shared, streamed)));
  console.log(
    `100 concurrent duplicate streams: ${llm.allCalls().length - before} upstream call(s), ${new Set(copies.map((c) => c.text)).size} distinct body, ${(performance.now() - streamStarted).toFixed(0)} ms wall`,
  );

  // The runtime's resident memory while 20 MB stream through one job.
  llm.scriptAll(["sse-big:70:300000*"]);
  const baseline = workerdRssMb();
  let peak = baseline;
  const sampler = setInterval(() => (peak = Math.max(peak, workerdRssMb())), 50);
  const big = await timedStream(onejob, newKey(), streamed);
  clearInterval(sampler);
  console.log(
    `a ${(big.text.length / 1e6).toFixed(1)} MB stream through onejob: workerd resident memory ${baseline.toFixed(0)} MB before, at most ${peak.toFixed(0)} MB while it passed`,
  );
} finally {
  await onejob.stop();
  await passthrough.stop();
  await llm.close();
}
