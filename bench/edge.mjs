// onejob's edge against a plain pass-through Worker (bench/passthrough), a
// JavaScript worker doing onejob's storage pattern and nothing else
// (bench/storage-pattern) and the same pattern sharded (bench/sharded), all
// under `wrangler dev` on free ports, all calling the same fake upstream over
// real HTTP, measured interleaved in one run (each request of a round goes
// to each stack in turn, the order rotating, so drift hits all alike):
//
// 1. first calls (upstream 50 ms): p50 through onejob, the pass-through and
//    straight to the upstream, with 1 KB, 32 KB and 256 KB chat bodies, and
//    the ratio onejob / pass-through (issue 19's first target);
// 2. replays: from the Ledger (at once) and from KV (50 ms later);
// 3. one first call's cost at 0 ms upstream: onejob, the pass-through and
//    the storage pattern: what the pattern costs, what is onejob's own; each
//    of onejob's replayed at once, beside the pass-through's call (a
//    replay's own share of any call's time under wrangler dev);
// 4. throughput at concurrency 16 on distinct keys, and the runtime's CPU
//    per request (utime + stime of each stack's own workerd, from /proc);
// 5. the probe: one Durable Object per key against one per tenant shard
//    (16), first-call p50 and throughput, and one object's ceiling;
// 6. a 1000-way storm on one key; streams (first event, end), 100 duplicate
//    streams on one key, onejob's runtime memory while 20 MB stream through;
// 7. the targets of issue 19, each met or not.
//
//   make bench                       (node bench/edge.mjs [rounds], default 40)
//   BENCH_ROUNDS=20 make bench       (rounds; the argument wins)
//   BENCH_THROUGHPUT=480             (requests per stack in each throughput phase)
//   BENCH_ONEJOB_DIR=/tmp/base       (another checkout's built worker: before/after)
//   BENCH_VARS='{"RESULT_CACHE":"off"}'  (settings for onejob)
//   BENCH_STATE_DIR=/tmp             (where the stacks keep their state; default
//                                    /dev/shm when there is one, see below)
//   BENCH_STRICT=1                   (exit 1 when a target is not met)
//
// Figures are wall-clock times seen by a local client on this machine (and
// CPU read from /proc, Linux only); only ratios from one run compare.
//
// The stacks' state (each Durable Object's SQLite file, KV) lives in memory
// (tmpfs) by default: on this shared machine's disk every new object's
// first write waits for other processes' I/O (about 30 ms more per first
// call at 0 ms upstream, throughput halved, from one run to the next), which
// is neither onejob's cost nor production's storage. BENCH_STATE_DIR=/tmp
// measures with the disk.
//
// What it shares with bench/ab.mjs (rounds, BENCH_THROUGHPUT and
// BENCH_STATE_DIR, starting the stacks, the chat bodies and the timed call,
// the CPU read from /proc, the interleaved first calls and throughput, the
// storm, the figures' formatting) is in bench/common.mjs.
import { execFileSync } from "node:child_process";
import { readFileSync } from "node:fs";
import os from "node:os";

import { chat, newKey } from "../tests/support/harness.mjs";
import {
  CONCURRENCY, SIZES, UPSTREAM_MS, rounds, throughputTotal,
  benchWorker, checkoutFrom, startStacks, stopStacks, useStateDir, workerIn,
  chatBody, storm, timed, warmUp,
  processesOf,
  firstCalls, orderOf, throughputs,
  loadAverage, ms, p50, quantile, sleep, x,
} from "./common.mjs";

const started = performance.now();

// BENCH_ONEJOB_DIR: another checkout's built worker (for before/after runs),
// e.g. a worktree of the base commit at /tmp/base after its `make build-edge`.
const otherCheckout = checkoutFrom("BENCH_ONEJOB_DIR");

const stateDir = useStateDir();
const stateFs = (() => {
  try {
    return execFileSync("stat", ["-f", "-c", "%T", stateDir], { encoding: "utf8" }).trim();
  } catch {
    return "unknown file system";
  }
})();

const run = await startStacks({
  onejob: { vars: JSON.parse(process.env.BENCH_VARS ?? "{}"), ...(otherCheckout ? workerIn(otherCheckout) : {}) },
  passthrough: benchWorker("passthrough"),
  pattern: benchWorker("storage-pattern"),
  sharded: benchWorker("sharded"),
});
const { llm, stacks } = run;
const { onejob, passthrough, pattern, sharded } = stacks;
const direct = { url: llm.baseUrl.replace(/\/v1$/, "") };
const NAMES = { onejob: "onejob", passthrough: "pass-through", direct: "direct", pattern: "storage pattern (JS)", sharded: "sharded (JS, 16)" };
const targetOf = { onejob, passthrough, direct, pattern, sharded };

// ---------------------------------------------------------------- helpers

/** Resident memory of a stack's workerd processes, in MB (Linux /proc). */
function workerdRssMb(stack) {
  let kb = 0;
  for (const { pid, workerd } of processesOf(stack)) {
    if (!workerd) continue;
    try {
      kb += Number(readFileSync(`/proc/${pid}/status`, "utf8").match(/VmRSS:\s+(\d+)/)?.[1] ?? 0);
    } catch {}
  }
  return kb / 1024;
}

const section = (title) => console.log(`\n== ${title}`);

const figures = {};
const targets = [];
/** Records a target: its figure, its bar and whether it is met. */
function target(name, figure, bar, met, aim) {
  targets.push({ name, figure, bar, met, aim });
}

// ---------------------------------------------------------------- the run

try {
  console.log(
    `onejob bench: ${rounds} rounds, ${throughputTotal} requests per throughput phase, concurrency ${CONCURRENCY}; onejob from ${otherCheckout ?? "this checkout"}`,
  );
  console.log(`machine: ${os.cpus().length} cores, load average ${loadAverage()} at the start; the stacks' state in ${stateDir} (${stateFs})`);
  for (const [name, stack] of Object.entries(stacks)) {
    const procs = processesOf(stack);
    console.log(`  ${NAMES[name].padEnd(22)} ${stack.url}  workerd pid(s) ${procs.filter((p) => p.workerd).map((p) => p.pid).join(",") || "none found"}`);
  }

  // Warm every isolate (and each body size once).
  await warmUp(targetOf, ["onejob", "passthrough", "pattern", "sharded", "direct"]);

  // 1. First calls at 50 ms, by body size; replays at 1 KB.
  section(`1. first calls (upstream ${UPSTREAM_MS} ms), ${rounds} keys per size, interleaved`);
  const ledgerReplay = [];
  const kvReplay = [];
  figures.first = {};
  for (const [label, bytes] of SIZES) {
    // At 1 KB the probe's pair runs in the same rounds.
    const names = bytes === 1024 ? ["onejob", "passthrough", "direct", "pattern", "sharded"] : ["onejob", "passthrough", "direct"];
    const after =
      bytes === 1024
        ? {
            onejob: async (key, body) => {
              // At once: answered by the Ledger, which then writes the result
              // to KV; 50 ms later, as an official SDK's retry (RESULT_CACHE's
              // default reads KV for retries only): by the KV read-through cache.
              ledgerReplay.push((await timed(onejob, key, body)).ms);
              await sleep(50);
              kvReplay.push((await timed(onejob, key, body, { "x-stainless-retry-count": "1" })).ms);
            },
          }
        : {};
    const times = await firstCalls(targetOf, names, (i) => chatBody(bytes, `${label} ${i}`), after);
    figures.first[label] = times;
    const ratio = p50(times.onejob) / p50(times.passthrough);
    console.log(
      `first call, ${label.padEnd(6)} body: p50 onejob ${ms(p50(times.onejob))}   pass-through ${ms(p50(times.passthrough))}   direct ${ms(p50(times.direct))}   onejob / pass-through ${x(ratio)}   (p95 ${ms(quantile(times.onejob, 0.95))} / ${ms(quantile(times.passthrough, 0.95))})`,
    );
    figures.first[label].ratio = ratio;
  }

  section("2. replays (1 KB body; the upstream call took 50 ms)");
  console.log(`replay from the Ledger (at once):  p50 ${ms(p50(ledgerReplay))}   p95 ${ms(quantile(ledgerReplay, 0.95))}`);
  console.log(`replay from KV (50 ms later):      p50 ${ms(p50(kvReplay))}   p95 ${ms(quantile(kvReplay, 0.95))}`);
  console.log(`a 300 ms call replayed from the Ledger is ×${(300 / p50(ledgerReplay)).toFixed(0)} faster`);

  // 3. At 0 ms upstream: what one first call costs each.
  llm.scriptAll(["ok*"]);
  section(`3. one first call's cost at 0 ms upstream (1 KB body), ${rounds} keys, interleaved`);
  // Each of onejob's first calls here is replayed at once (the Ledger
  // answers), in the same rounds: a replay beside a pass-through call.
  const zeroReplay = [];
  const replayAtOnce = { onejob: async (key, body) => zeroReplay.push((await timed(onejob, key, body)).ms) };
  const zero = await firstCalls(targetOf, ["onejob", "passthrough", "pattern", "sharded"], (i) => chatBody(1024, `zero ${i}`), replayAtOnce);
  const [z1, zp, zs] = [p50(zero.onejob), p50(zero.passthrough), p50(zero.pattern)];
  const zr = p50(zeroReplay);
  console.log(`first call p50 at 0 ms: onejob ${ms(z1)}   pass-through ${ms(zp)}   storage pattern (JS) ${ms(zs)}`);
  console.log(
    `a replay from the Ledger in the same rounds: p50 ${ms(zr)}, ×${(zr / zp).toFixed(2)} a pass-through call; its own share (replay − pass-through call) ${ms(zr - zp).trim()}`,
  );
  console.log(
    `breakdown of onejob's ${ms(z1 - zp).trim()} over the pass-through: the storage pattern (a Durable Object per key, its SQL, an alarm) ${ms(zs - zp).trim()} (${((100 * (zs - zp)) / (z1 - zp)).toFixed(0)}%), onejob's own share (auth, fingerprint, wasm, the machine, its other writes and the index) ${ms(z1 - zs).trim()} (${((100 * (z1 - zs)) / (z1 - zp)).toFixed(0)}%)`,
  );

  // Section 2's replays against this call (not a verdict: the issue's
  // 4 ms bar was set when a pass-through call at 0 ms took 3.2 ms, ×1.25
  // of it).
  console.log(
    `replays against a pass-through call at 0 ms (${ms(zp).trim()}): Ledger ${x(p50(ledgerReplay) / zp)}, KV ${x(p50(kvReplay) / zp)}, beside it in section 3 ${x(zr / zp)} (the 4 ms bar was ×1.25 of the issue's 3.2 ms pass-through call)`,
  );

  // 4 and 5. Throughput at concurrency 16, 50 ms upstream, distinct keys.
  llm.scriptAll([`delay:${UPSTREAM_MS}*`]);
  section(`4. throughput at concurrency ${CONCURRENCY}, distinct keys, upstream ${UPSTREAM_MS} ms, 1 KB bodies, ${throughputTotal} requests each, interleaved in 3 parts`);
  const bodies = Array.from({ length: throughputTotal + 8 }, (_, i) => chatBody(1024, `throughput ${i}`));
  const rates = await throughputs(
    [
      { name: "passthrough", stack: passthrough },
      { name: "onejob", stack: onejob },
      { name: "pattern", stack: pattern },
      { name: "sharded", stack: sharded },
    ],
    (i) => bodies[i % bodies.length],
  );
  for (const name of ["passthrough", "onejob", "pattern", "sharded"]) {
    const t = rates[name];
    console.log(
      `throughput ${NAMES[name].padEnd(22)} ${t.rate.toFixed(0).padStart(5)} req/s   runtime CPU ${t.cpuPerRequest.toFixed(2).padStart(5)} ms/request (its workerd: the worker's runtime ${t.runtimePerRequest.toFixed(2)}, wrangler's proxy ${(t.cpuPerRequest - t.runtimePerRequest).toFixed(2)}; not counted: wrangler's node ${t.otherPerRequest.toFixed(2)})`,
    );
  }
  const rateRatio = rates.onejob.rate / rates.passthrough.rate;
  const cpuRatio = rates.onejob.cpuPerRequest / rates.passthrough.cpuPerRequest;
  const runtimeRatio = rates.onejob.runtimePerRequest / rates.passthrough.runtimePerRequest;
  console.log(
    `throughput onejob / pass-through ${x(rateRatio)}; runtime CPU per request onejob / pass-through ${x(cpuRatio)} (the worker's runtime alone, without wrangler's proxy: ${x(runtimeRatio)})`,
  );

  section("5. probe: one Durable Object per key against one per tenant shard (JS, same storage pattern)");
  const [perKey1k, sharded1k] = [p50(figures.first["1 KB"].pattern), p50(figures.first["1 KB"].sharded)];
  console.log(`first call p50 (upstream ${UPSTREAM_MS} ms, 1 KB, in section 1's rounds): per key ${ms(perKey1k)}   16 shards ${ms(sharded1k)}   (${x(sharded1k / perKey1k)})`);
  console.log(`first call p50 at 0 ms upstream (section 3's rounds): per key ${ms(zs)}   16 shards ${ms(p50(zero.sharded))}   (${x(p50(zero.sharded) / zs)})`);
  console.log(
    `throughput at concurrency ${CONCURRENCY} (section 4): per key ${rates.pattern.rate.toFixed(0)} req/s, ${rates.pattern.cpuPerRequest.toFixed(2)} ms CPU/request   16 shards ${rates.sharded.rate.toFixed(0)} req/s, ${rates.sharded.cpuPerRequest.toFixed(2)} ms CPU/request   (${x(rates.sharded.rate / rates.pattern.rate)} the rate)`,
  );
  // One object's ceiling: with no upstream wait, what the tenant's keys get
  // when they all share one object, against one object each.
  llm.scriptAll(["ok*"]);
  const ceiling = await throughputs(
    [
      { name: "perkey", stack: pattern },
      { name: "shards16", stack: sharded },
      { name: "shard1", stack: sharded, headers: { "X-Shards": "1" } },
    ],
    (i) => bodies[i % bodies.length],
  );
  llm.scriptAll([`delay:${UPSTREAM_MS}*`]);
  console.log(
    `at 0 ms upstream, concurrency ${CONCURRENCY}: per key ${ceiling.perkey.rate.toFixed(0)} req/s   16 shards ${ceiling.shards16.rate.toFixed(0)} req/s   1 shard (the tenant in one object) ${ceiling.shard1.rate.toFixed(0)} req/s (${ceiling.shard1.cpuPerRequest.toFixed(2)} ms CPU/request): one object's ceiling on this machine`,
  );
  console.log(
    "what sharding would cost: retention (rows of many ages per object: an expiry per row, an index, an alarm that sweeps in batches, instead of one alarm and deleteAll per key); alarms (one per object, shared by the shard's jobs: kept at the earliest expiry, and a job's own wake-ups, a stream's watchdog, a background job's outbox, need a schedule table); throughput (one object runs one request at a time: a tenant's first calls, replays and duplicates queue on its shards; the tenant's ceiling is shards × one object's, where per key only one key is limited); and every key's storage is one object's (10 GB per object)",
  );

  // 6. Storm, streams, memory.
  section("6. storm, streams, memory (onejob)");
  const stormed = await storm(llm, onejob);
  console.log(`1000-way storm on one key: ${stormed.calls} upstream call(s), ${stormed.bodies} distinct body, ${stormed.ms.toFixed(0)} ms wall (upstream 1000 ms)`);

  const streamed = JSON.stringify(chat("stream please", { stream: true }));
  const streamTimes = { upstream: [], passthrough: [], onejob: [] };
  // Every key streams (the pass-through sends the raw key, onejob a derived one).
  llm.scriptAll(["sse:20:50*"]);
  const streamTargets = { upstream: direct, passthrough, onejob };
  for (let i = 0; i < 10; i++) {
    for (const name of orderOf(["upstream", "passthrough", "onejob"], i)) streamTimes[name].push(await timed(streamTargets[name], newKey(), streamed));
  }
  for (const name of ["upstream", "passthrough", "onejob"]) {
    const first = streamTimes[name].map((t) => t.firstMs);
    const total = streamTimes[name].map((t) => t.totalMs);
    console.log(`stream (20 events, 50 ms apart) via ${name.padEnd(12)} first event p50 ${ms(p50(first))}   end p50 ${ms(p50(total))}`);
  }
  const shared = newKey();
  const before = llm.allCalls().length;
  const streamAt = performance.now();
  const copies = await Promise.all(Array.from({ length: 100 }, () => timed(onejob, shared, streamed)));
  const dupCalls = llm.allCalls().length - before;
  const dupBodies = new Set(copies.map((c) => c.text)).size;
  console.log(`100 concurrent duplicate streams: ${dupCalls} upstream call(s), ${dupBodies} distinct body, ${(performance.now() - streamAt).toFixed(0)} ms wall`);

  // The runtime's resident memory while 20 MB stream through one job.
  llm.scriptAll(["sse-big:70:300000*"]);
  const baseline = workerdRssMb(onejob);
  let peak = baseline;
  const sampler = setInterval(() => (peak = Math.max(peak, workerdRssMb(onejob))), 50);
  const big = await timed(onejob, newKey(), streamed);
  clearInterval(sampler);
  console.log(
    `a ${(big.text.length / 1e6).toFixed(1)} MB stream through onejob: its workerd's resident memory (runtime and proxy) ${baseline.toFixed(0)} MB before, at most ${peak.toFixed(0)} MB while it passed (+${(peak - baseline).toFixed(0)} MB)`,
  );

  // 7. The targets.
  const f = figures.first;
  target("first-call p50 onejob / pass-through, 1 KB", x(f["1 KB"].ratio), "≤ ×1.15 (aim ≤ ×1.10)", f["1 KB"].ratio <= 1.15, f["1 KB"].ratio <= 1.1);
  target("first-call p50 onejob / pass-through, 32 KB", x(f["32 KB"].ratio), "≤ ×1.15 (aim ≤ ×1.10)", f["32 KB"].ratio <= 1.15, f["32 KB"].ratio <= 1.1);
  target("first-call p50 onejob / pass-through, 256 KB", x(f["256 KB"].ratio), "≤ ×1.25", f["256 KB"].ratio <= 1.25);
  target("throughput onejob / pass-through (c16)", x(rateRatio), "≥ ×0.60 (aim ≥ ×0.70)", rateRatio >= 0.6, rateRatio >= 0.7);
  target("runtime CPU per request onejob / pass-through", x(cpuRatio), "≤ ×2.00", cpuRatio <= 2);
  // Absolute bars: beside them, what any call through this machine's
  // runtime costs (the pass-through at 0 ms upstream, section 3).
  const floor = `(pass-through at 0 ms: ${ms(zp).trim()}; a replay beside it, section 3: ${ms(zr).trim()}, its own share ${ms(zr - zp).trim()})`;
  target("replay p50 from the Ledger", `${ms(p50(ledgerReplay)).trim()} ${floor}`, "≤ 4 ms", p50(ledgerReplay) <= 4);
  target("replay p50 from KV", `${ms(p50(kvReplay)).trim()} ${floor}`, "≤ 4 ms", p50(kvReplay) <= 4);
  target(
    "1000-way storm",
    `${stormed.calls} call(s), ${stormed.bodies} body, ${stormed.answered} answered`,
    "1 call, 1 body, 1000 answered",
    stormed.calls === 1 && stormed.bodies === 1 && stormed.answered === 1000,
  );
  target("100 duplicate streams", `${dupCalls} call(s), ${dupBodies} body`, "1 call, 1 body", dupCalls === 1 && dupBodies === 1);
  section(`7. targets (issue 19), from this one run`);
  for (const t of targets) {
    const verdict = t.met ? (t.aim === undefined ? "met" : t.aim ? "met (aim met)" : "met (aim not met)") : "NOT MET";
    console.log(`${t.name.padEnd(46)} ${t.figure.padEnd(40)} ${t.bar.padEnd(30)} ${verdict}`);
  }
  const missed = targets.filter((t) => !t.met).length;
  console.log(`${targets.length - missed} of ${targets.length} targets met`);
  console.log(
    `\nrun took ${((performance.now() - started) / 1000).toFixed(0)} s; load average ${loadAverage()} at the end`,
  );
  if (missed && process.env.BENCH_STRICT === "1") process.exitCode = 1;
} finally {
  await stopStacks(run);
}
