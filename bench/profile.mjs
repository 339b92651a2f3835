// Where a first call's runtime CPU goes: this checkout's onejob (or the
// pass-through) alone under `wrangler dev`, first calls at concurrency 16 on
// distinct keys (upstream at 0 ms), while Linux `perf` samples the stack's
// runtime workerd with V8's perf map on (MINIFLARE_WORKERD_V8_FLAGS=
// --perf-basic-prof: the wasm functions keep their Rust names). It prints the
// runtime CPU per call (from /proc, as bench/ab.mjs reads it) and each part's
// share of the samples — inclusive: a sample counts for every part on its
// stack — in % and in ms per call.
//
//   node bench/profile.mjs [calls]      (default 1500; after `make build-edge`)
//   BENCH_SIZE=32768                    (the chat body's bytes; default 1024)
//   BENCH_PROFILE_TARGET=passthrough    (profile bench/passthrough instead;
//                                      storage-pattern: bench/storage-pattern)
//   BENCH_PROFILE_TOP=40                (how many of onejob's functions to list)
//   BENCH_PROFILE_REPLAYS=1             (profile replays instead: each key's first
//                                      call is made before perf starts, then
//                                      replayed at once, as a retry would be)
//
// Needs `perf` (linux-perf) and perf_event_paranoid ≤ 2. An A/B of two builds
// tells a change's cost only when it is larger than the run's noise (about
// 0.2 ms of CPU per call on a loaded machine); a step's share of the samples
// is steadier: this is how to find what a change should aim at, and to check
// that a step it removed is gone. The samples include perf's own overhead
// (a few %), so the ms per call here are a little above bench/ab.mjs's.
import { execFileSync, spawn } from "node:child_process";
import { rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";

import { newKey } from "../tests/support/harness.mjs";
import {
  CONCURRENCY, benchWorker, chatBody, cpuOf, cpuSpent, loadAverage, processesOf, sleep,
  startStacks, stopStacks, thisCheckout, timed, useStateDir, workerIn,
} from "./common.mjs";

const calls = Number(process.argv[2] ?? 1500);
const size = Number(process.env.BENCH_SIZE ?? 1024);
const top = Number(process.env.BENCH_PROFILE_TOP ?? 40);
const BENCH_WORKERS = ["passthrough", "storage-pattern"];
const target = BENCH_WORKERS.includes(process.env.BENCH_PROFILE_TARGET) ? process.env.BENCH_PROFILE_TARGET : "onejob";
const replays = target === "onejob" && Boolean(process.env.BENCH_PROFILE_REPLAYS);
try {
  execFileSync("perf", ["--version"], { stdio: "ignore" });
} catch {
  console.error("bench/profile.mjs needs Linux perf (apt-get install linux-perf)");
  process.exit(2);
}
process.env.MINIFLARE_WORKERD_V8_FLAGS = [process.env.MINIFLARE_WORKERD_V8_FLAGS, "--perf-basic-prof"].filter(Boolean).join(" ");
useStateDir();
const data = path.join(os.tmpdir(), `onejob-profile-${process.pid}.data`);

/**
 * The parts a sample is counted in: a name and a pattern of a frame on its
 * stack (perf's symbol names: workerd's C++, V8's "JS:" frames, the wasm's
 * Rust paths).
 */
const PARTS = [
  ["onejob's wasm and its calls out (any onejob_ frame)", /^JS:onejob_/],
  ["  the gateway (routes)", /^JS:onejob_edge::routes/],
  ["  the fingerprint (canonical JSON, SHA-256)", /^JS:onejob_core::(front::fingerprint|canonical|digest)/],
  ["  the hand-off to the Ledger (api::client)", /^JS:onejob_edge::api::client::ledger/],
  ["  the Ledger's drive", /^JS:onejob_edge::ledger::submit::.*drive/],
  ["    its upstream call", /^JS:onejob_edge::upstream::call/],
  ["    its writes (driver::persist, save_response)", /^JS:onejob_edge::ledger::(driver::persist|store::Store::save_response)/],
  ["  the store (every SQLite call of the Ledger)", /^JS:onejob_edge::ledger::store::/],
  ["    the job's tables created (Store::create)", /^JS:onejob_edge::ledger::store::Store::create/],
  ["    which tables exist (Store::present)", /^JS:onejob_edge::ledger::store::Store::present/],
  ["  the operators' index (after the answer)", /^JS:onejob_edge::ledger::index::/],
  ["  the answer (run_answer, into_response)", /^JS:onejob_edge::(ledger::run::.*run_answer|http::JobResult::into_response)/],
  ["workerd: a new object (its SQLite opened)", /worker_new_actor/],
  ["workerd: SQL statements run (SqlStorage::exec)", /SqlStorage::exec$/],
  ["  of which statements parsed (prepareSql)", /SqliteDatabase::prepareSql/],
  ["workerd: alarms set (setAlarm)", /setAlarm/],
  ["workerd: fetches out (onejob: the Ledger's, the upstream's)", /workerd::api::fetchImpl/],
  ["workerd: requests in (onejob: the gateway's, the Ledger's)", /ServiceWorkerGlobalScope::request/],
  ["V8: garbage collection", /Scavenger|MarkCompact|Heap::CollectGarbage/],
  ["wrangler dev: local observability (its tail collector)", /TailStreamTarget|collector\.worker/],
  ["wrangler dev: the Durable Objects' SQL wrapper", /__mf_do_wrapper/],
  ["wrangler dev: the D1 simulator (the index's database)", /database\.worker/],
];

/** perf script's stacks: one array of symbol names per sample. */
function stacksOf(file) {
  const text = execFileSync("perf", ["script", "-i", file, "-F", "ip,sym"], { encoding: "utf8", maxBuffer: 1 << 30, stdio: ["ignore", "pipe", "ignore"] });
  const samples = [];
  let current = [];
  for (const line of text.split("\n")) {
    if (!line.trim()) {
      if (current.length) samples.push(current);
      current = [];
      continue;
    }
    const at = line.trim().indexOf(" ");
    current.push(at < 0 ? line.trim() : line.trim().slice(at + 1));
  }
  if (current.length) samples.push(current);
  return samples;
}

/** A wasm function's name without its hash and tier: one name per function. */
const nameOf = (frame) => frame.replace(/::h[0-9a-f]{16}/, "").replace(/-\d+-(liftoff|turbofan|maglev)$/, "");

const run = await startStacks({ profiled: target === "onejob" ? workerIn(thisCheckout) : benchWorker(target) });
const stack = run.stacks.profiled;
run.llm.scriptAll(["ok*"]);
try {
  const body = (i) => chatBody(size, `profile ${i}`, { turns: false });
  for (let i = 0; i < 50; i++) await timed(stack, newKey(), body(i)); // warm: compiled, optimised
  // Replays: the jobs, made first (outside the profile), then each call below replays one.
  const keys = Array.from({ length: calls }, () => newKey());
  if (replays) {
    let made = 0;
    await Promise.all(Array.from({ length: CONCURRENCY }, async () => {
      while (made < calls) {
        const n = made++;
        await timed(stack, keys[n], body(1000 + n));
      }
    }));
    await sleep(600);
  }
  const pids = processesOf(stack).filter((p) => p.workerd && !p.proxy).map((p) => p.pid);
  const perf = spawn("perf", ["record", "-F", "999", "-g", "-o", data, "-p", pids.join(",")], { stdio: "ignore" });
  await sleep(500);
  const load = loadAverage();
  const before = cpuOf(stack);
  let next = 0;
  const at = performance.now();
  await Promise.all(
    Array.from({ length: CONCURRENCY }, async () => {
      while (next < calls) {
        const n = next++;
        await timed(stack, keys[n], body(1000 + n));
      }
    }),
  );
  const seconds = (performance.now() - at) / 1000;
  await sleep(600); // the answers' background work (the index, batched for 200 ms)
  const cpuMs = cpuSpent(before, cpuOf(stack), ["runtime"]) / calls;
  perf.kill("SIGINT");
  await new Promise((resolve) => perf.on("exit", resolve));
  const samples = stacksOf(data);
  const share = (test) => samples.filter((s) => s.some(test)).length / samples.length;
  const what = replays ? "replays (the Ledger's, at once)" : "first calls";
  console.log(`${target}: ${calls} ${what} of ${size} B at concurrency ${CONCURRENCY} (upstream 0 ms), ${(calls / seconds).toFixed(0)} req/s; load average ${load} at the start`);
  console.log(`runtime CPU per call ${cpuMs.toFixed(2)} ms (with perf sampling it); ${samples.length} samples`);
  console.log("\nshare of the runtime's samples (inclusive), and its ms per call:");
  for (const [label, pattern] of PARTS) {
    const s = share((frame) => pattern.test(frame));
    if (s > 0) console.log(`${(100 * s).toFixed(1).padStart(6)}%  ${(s * cpuMs).toFixed(3).padStart(6)} ms  ${label}`);
  }
  if (target === "onejob") {
    const counts = new Map();
    for (const s of samples) {
      for (const name of new Set(s.filter((f) => /^JS:onejob_/.test(f)).map(nameOf))) counts.set(name, (counts.get(name) ?? 0) + 1);
    }
    console.log(`\nonejob's functions, inclusive (the ${top} largest):`);
    for (const [name, n] of [...counts].sort((a, b) => b[1] - a[1]).slice(0, top)) {
      const s = n / samples.length;
      console.log(`${(100 * s).toFixed(1).padStart(6)}%  ${(s * cpuMs).toFixed(3).padStart(6)} ms  ${name.slice(3, 150)}`);
    }
  }
} finally {
  await stopStacks(run);
  rmSync(data, { force: true });
}
