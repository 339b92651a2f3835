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
//    the storage pattern: what the pattern costs, what is onejob's own;
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
import { execFileSync } from "node:child_process";
import { existsSync, readFileSync, readdirSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";

import { DEV_KEY, chat, newKey, readBody, startFakeLlm, startStack } from "../tests/support/harness.mjs";

const rounds = Number(process.argv[2] ?? process.env.BENCH_ROUNDS ?? 40);
const throughputTotal = Number(process.env.BENCH_THROUGHPUT ?? 480);
const UPSTREAM_MS = 50;
const CONCURRENCY = 16;
const SIZES = [
  ["1 KB", 1024],
  ["32 KB", 32 * 1024],
  ["256 KB", 256 * 1024],
];
const here = path.dirname(fileURLToPath(import.meta.url));
const started = performance.now();

// BENCH_ONEJOB_DIR: another checkout's built worker (for before/after runs),
// e.g. a worktree of the base commit at /tmp/base after its `make build-edge`.
const otherCheckout = process.env.BENCH_ONEJOB_DIR ? path.resolve(process.env.BENCH_ONEJOB_DIR) : null;
if (otherCheckout) {
  const config = path.join(otherCheckout, "wrangler.toml");
  const main = existsSync(config) && readFileSync(config, "utf8").match(/^main\s*=\s*"([^"]+)"/m)?.[1];
  if (!main || !existsSync(path.join(otherCheckout, main))) {
    console.error(`BENCH_ONEJOB_DIR=${otherCheckout}: ${main ? `no ${main} there: run make build-edge in that checkout first` : "no wrangler.toml with a main there"}`);
    process.exit(2);
  }
}

// The harness makes each stack's state directory in the temporary folder
// (os.tmpdir(), which reads TMPDIR); wrangler's own temporary files go there too.
const stateDir = process.env.BENCH_STATE_DIR ?? (existsSync("/dev/shm") ? "/dev/shm" : os.tmpdir());
process.env.TMPDIR = stateDir;
const stateFs = (() => {
  try {
    return execFileSync("stat", ["-f", "-c", "%T", stateDir], { encoding: "utf8" }).trim();
  } catch {
    return "unknown file system";
  }
})();

const llm = await startFakeLlm();
llm.scriptAll([`delay:${UPSTREAM_MS}*`]);
const stacks = {};
try {
  stacks.onejob = await startStack({
    llm,
    vars: JSON.parse(process.env.BENCH_VARS ?? "{}"),
    ...(otherCheckout ? { cwd: otherCheckout, config: "wrangler.toml" } : {}),
  });
  stacks.passthrough = await startStack({ llm, config: "wrangler.toml", cwd: path.join(here, "passthrough") });
  stacks.pattern = await startStack({ llm, config: "wrangler.toml", cwd: path.join(here, "storage-pattern") });
  stacks.sharded = await startStack({ llm, config: "wrangler.toml", cwd: path.join(here, "sharded") });
} catch (error) {
  for (const stack of Object.values(stacks)) await stack.stop();
  await llm.close();
  throw error;
}
const { onejob, passthrough, pattern, sharded } = stacks;
const direct = { url: llm.baseUrl.replace(/\/v1$/, "") };
const NAMES = { onejob: "onejob", passthrough: "pass-through", direct: "direct", pattern: "storage pattern (JS)", sharded: "sharded (JS, 16)" };
const targetOf = { onejob, passthrough, direct, pattern, sharded };

// ---------------------------------------------------------------- helpers

/**
 * A chat request of about `bytes` bytes as JSON: a system prompt and turns
 * of a support conversation, the last user turn naming `tag` (distinct
 * requests, distinct fingerprints).
 */
function chatBody(bytes, tag, extra = {}) {
  const system = "You are the support assistant of Acme Billing. Answer briefly, cite the invoice number, never promise a refund you cannot see in the ledger.";
  const user = "My card was charged twice for the March invoice (INV-20931) and the second charge shows as pending. Can you check whether it will be reversed? ";
  const assistant = "I can see invoice INV-20931 paid once on 3 March; the pending charge is an authorisation hold that your bank releases within five working days. ";
  const messages = [{ role: "system", content: system }];
  const request = { model: "gpt-test", temperature: 0.2, max_tokens: 512, messages, ...extra };
  const last = { role: "user", content: `Ticket ${tag}: ` };
  for (let turn = 0; JSON.stringify(request).length + 400 < bytes; turn++) {
    messages.push({ role: turn % 2 ? "assistant" : "user", content: (turn % 2 ? assistant : user).repeat(1 + (turn % 3)) });
  }
  messages.push(last);
  const size = () => Buffer.byteLength(JSON.stringify(request));
  last.content += user.repeat(Math.max(0, Math.floor((bytes - size()) / user.length)));
  last.content += "x".repeat(Math.max(0, bytes - size()));
  return JSON.stringify(request);
}

/** One keyed call, read to its end: its text, first-byte and total times. */
async function timed(stack, key, body, headers = {}) {
  const at = performance.now();
  const res = await fetch(`${stack.url}/v1/chat/completions`, {
    method: "POST",
    headers: { Authorization: `Bearer ${DEV_KEY}`, "Idempotency-Key": key, "Content-Type": "application/json", ...headers },
    body,
  });
  const { text, firstByteMs, totalMs } = await readBody(res, at);
  if (res.status !== 200) throw new Error(`status ${res.status}: ${text.slice(0, 300)}`);
  return { ms: totalMs, firstMs: firstByteMs, totalMs, text, status: res.status };
}

/** The pids of a stack's own processes (its wrangler's process group), workerd's marked. */
function processesOf(stack) {
  const group = stack.worker.pid;
  const found = [];
  for (const pid of readdirSync("/proc").filter((d) => /^\d+$/.test(d))) {
    try {
      const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
      const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
      if (Number(fields[2]) !== group) continue;
      const cmdline = readFileSync(`/proc/${pid}/cmdline`, "utf8");
      const workerd = cmdline.includes("workerd");
      // wrangler runs two: its proxy on the stack's port, and the runtime of the worker.
      const proxy = workerd && cmdline.includes(`entry=${new URL(stack.url).host}`);
      found.push({ pid, workerd, proxy, ticks: Number(fields[11]) + Number(fields[12]) });
    } catch {}
  }
  return found;
}

const TICK_MS = (() => {
  try {
    return 1000 / Number(execFileSync("getconf", ["CLK_TCK"], { encoding: "utf8" }).trim());
  } catch {
    return 10;
  }
})();

/** CPU ticks of a stack's processes, by kind: its workerd (the worker's runtime, wrangler's proxy) and its wrangler. */
function cpuOf(stack) {
  const snapshot = { runtime: new Map(), proxy: new Map(), other: new Map() };
  for (const p of processesOf(stack)) snapshot[p.proxy ? "proxy" : p.workerd ? "runtime" : "other"].set(p.pid, p.ticks);
  return snapshot;
}
/** CPU ms spent between two snapshots in `kinds` (a process that appeared counts from zero). */
const cpuSpent = (before, after, kinds = ["runtime", "proxy"]) =>
  kinds.reduce((sum, kind) => sum + [...after[kind]].reduce((s, [pid, ticks]) => s + ticks - (before[kind].get(pid) ?? 0), 0), 0) * TICK_MS;

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

const quantile = (values, q) => {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))];
};
const p50 = (values) => quantile(values, 0.5);
const ms = (v) => `${v.toFixed(1).padStart(6)} ms`;
const x = (v) => `×${v.toFixed(2)}`;
const section = (title) => console.log(`\n== ${title}`);
const sleep = (t) => new Promise((r) => setTimeout(r, t));
/** The permutation of `names` for round `i`: every order in turn. */
const orderOf = (names, i) => {
  const rotated = names.map((_, j) => names[(i + j) % names.length]);
  return Math.floor(i / names.length) % 2 ? rotated.reverse() : rotated;
};

/** First calls of `names` interleaved, `rounds` rounds of `bodyOf(i)`: ms by name. */
async function firstCalls(names, bodyOf, { afterOnejob } = {}) {
  const times = Object.fromEntries(names.map((n) => [n, []]));
  for (let i = 0; i < rounds; i++) {
    const body = bodyOf(i);
    for (const name of orderOf(names, i)) {
      const key = newKey();
      times[name].push((await timed(targetOf[name], key, body)).ms);
      if (name === "onejob" && afterOnejob) await afterOnejob(key, body);
    }
  }
  return times;
}

/**
 * Throughput at `concurrency` on distinct keys: each stack of `runs` takes
 * `throughputTotal` requests in `chunks` parts, the parts interleaved. Per
 * stack: req/s (requests over the time its parts took) and the CPU of its
 * workerd per request (read after each part has settled: background work
 * such as KV writes and the index counts).
 */
async function throughputs(runs, bodyOf, chunks = 3) {
  const totals = Object.fromEntries(runs.map(({ name }) => [name, { requests: 0, ms: 0, cpuMs: 0, runtimeCpuMs: 0, otherCpuMs: 0 }]));
  const per = Math.ceil(throughputTotal / chunks);
  for (let c = 0; c < chunks; c++) {
    for (const run of orderOf(runs, c)) {
      const before = cpuOf(run.stack);
      let next = 0;
      const at = performance.now();
      const worker = async () => {
        while (next < per) {
          const n = next++;
          await timed(run.stack, newKey(), bodyOf(c * per + n), run.headers);
        }
      };
      await Promise.all(Array.from({ length: CONCURRENCY }, worker));
      const t = totals[run.name];
      t.ms += performance.now() - at;
      t.requests += per;
      await sleep(600); // the answers' background work ends (KV writes; the index, batched for 200 ms)
      const after = cpuOf(run.stack);
      t.cpuMs += cpuSpent(before, after);
      t.runtimeCpuMs += cpuSpent(before, after, ["runtime"]);
      t.otherCpuMs += cpuSpent(before, after, ["other"]);
    }
  }
  for (const t of Object.values(totals)) {
    t.rate = t.requests / (t.ms / 1000);
    t.cpuPerRequest = t.cpuMs / t.requests;
    t.runtimePerRequest = t.runtimeCpuMs / t.requests;
    t.otherPerRequest = t.otherCpuMs / t.requests;
  }
  return totals;
}

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
  console.log(`machine: ${os.cpus().length} cores, load average ${os.loadavg().map((l) => l.toFixed(2)).join(" ")} at the start; the stacks' state in ${stateDir} (${stateFs})`);
  for (const [name, stack] of Object.entries(stacks)) {
    const procs = processesOf(stack);
    console.log(`  ${NAMES[name].padEnd(22)} ${stack.url}  workerd pid(s) ${procs.filter((p) => p.workerd).map((p) => p.pid).join(",") || "none found"}`);
  }

  // Warm every isolate (and each body size once).
  for (const name of ["onejob", "passthrough", "pattern", "sharded", "direct"]) {
    for (const [, bytes] of SIZES) await timed(targetOf[name], newKey(), chatBody(bytes, `warm-up ${name}`));
  }

  // 1. First calls at 50 ms, by body size; replays at 1 KB.
  section(`1. first calls (upstream ${UPSTREAM_MS} ms), ${rounds} keys per size, interleaved`);
  const ledgerReplay = [];
  const kvReplay = [];
  figures.first = {};
  for (const [label, bytes] of SIZES) {
    // At 1 KB the probe's pair runs in the same rounds.
    const names = bytes === 1024 ? ["onejob", "passthrough", "direct", "pattern", "sharded"] : ["onejob", "passthrough", "direct"];
    const afterOnejob =
      bytes === 1024
        ? async (key, body) => {
            // At once: answered by the Ledger, which then writes the result
            // to KV; 50 ms later, as an official SDK's retry (RESULT_CACHE's
            // default reads KV for retries only): by the KV read-through cache.
            ledgerReplay.push((await timed(onejob, key, body)).ms);
            await sleep(50);
            kvReplay.push((await timed(onejob, key, body, { "x-stainless-retry-count": "1" })).ms);
          }
        : undefined;
    const times = await firstCalls(names, (i) => chatBody(bytes, `${label} ${i}`), { afterOnejob });
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
  const zero = await firstCalls(["onejob", "passthrough", "pattern", "sharded"], (i) => chatBody(1024, `zero ${i}`));
  const [z1, zp, zs] = [p50(zero.onejob), p50(zero.passthrough), p50(zero.pattern)];
  console.log(`first call p50 at 0 ms: onejob ${ms(z1)}   pass-through ${ms(zp)}   storage pattern (JS) ${ms(zs)}`);
  console.log(
    `breakdown of onejob's ${ms(z1 - zp).trim()} over the pass-through: the storage pattern (a Durable Object per key, its SQL, an alarm) ${ms(zs - zp).trim()} (${((100 * (zs - zp)) / (z1 - zp)).toFixed(0)}%), onejob's own share (auth, fingerprint, wasm, the machine, its other writes and the index) ${ms(z1 - zs).trim()} (${((100 * (z1 - zs)) / (z1 - zp)).toFixed(0)}%)`,
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
  const stormKey = newKey();
  llm.scriptAll(["delay:1000"]);
  const callsBefore = llm.allCalls().length;
  const stormAt = performance.now();
  const storm = await Promise.all(Array.from({ length: 1000 }, () => timed(onejob, stormKey, JSON.stringify(chat("storm")))));
  const stormMs = performance.now() - stormAt;
  const stormCalls = llm.allCalls().length - callsBefore;
  const stormBodies = new Set(storm.map((s) => s.text)).size;
  llm.scriptAll([`delay:${UPSTREAM_MS}*`]);
  console.log(`1000-way storm on one key: ${stormCalls} upstream call(s), ${stormBodies} distinct body, ${stormMs.toFixed(0)} ms wall (upstream 1000 ms)`);

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
  const floor = `(pass-through at 0 ms: ${ms(zp).trim()})`;
  target("replay p50 from the Ledger", `${ms(p50(ledgerReplay)).trim()} ${floor}`, "≤ 4 ms", p50(ledgerReplay) <= 4);
  target("replay p50 from KV", `${ms(p50(kvReplay)).trim()} ${floor}`, "≤ 4 ms", p50(kvReplay) <= 4);
  target(
    "1000-way storm",
    `${stormCalls} call(s), ${stormBodies} body, ${storm.length} answered`,
    "1 call, 1 body, 1000 answered",
    stormCalls === 1 && stormBodies === 1 && storm.length === 1000,
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
    `\nrun took ${((performance.now() - started) / 1000).toFixed(0)} s; load average ${os.loadavg().map((l) => l.toFixed(2)).join(" ")} at the end`,
  );
  if (missed && process.env.BENCH_STRICT === "1") process.exitCode = 1;
} finally {
  for (const stack of Object.values(stacks)) await stack.stop();
  await llm.close();
}
