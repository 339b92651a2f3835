// An A/B of two builds of onejob in one run, beside the pass-through: the
// build of another checkout (A, e.g. a worktree of main after its `make
// build-edge`) and this checkout's (B), each under its own `wrangler dev`,
// all three calling one fake upstream, every request of a round going to
// each stack in turn (the order rotating), so that a loaded, shared machine
// slows all three alike. Only the ratios of one run compare.
//
//   BENCH_BASE_DIR=/work/wt-base node bench/ab.mjs [rounds]   (default 40)
//   BENCH_THROUGHPUT=480   requests per stack in the throughput phase
//   BENCH_PARTS=6          parts it is interleaved in
//   BENCH_STATE_DIR=/tmp   the stacks' state (default /dev/shm, as bench/edge.mjs)
//   BENCH_MORE=C=/tmp/c/wrangler.toml,…   more stacks, each a wrangler.toml
//                          (a variant's configuration or build), in the same rounds
//
// It prints, for A, B and the pass-through: first-call p50 at 50 ms upstream
// (1 KB, 32 KB, 256 KB), first-call p50 at 0 ms (1 KB) and, after each of
// A's and B's, a replay at once (beside the pass-through's call at 0 ms: a
// replay's own share of a call's time under wrangler dev), throughput at
// concurrency 16 on distinct keys and the CPU per request of each stack's
// workerd (the worker's runtime and wrangler's proxy, as bench/edge.mjs
// counts it, and the runtime alone); then B's guarantees: a 1000-way storm
// is 1 upstream call and 1 body, a replay is byte-identical.
//
// The settings, stacks, requests, CPU readings and interleaved rounds it
// shares with bench/edge.mjs are in bench/common.mjs: first calls and
// throughput are measured by the same functions (its chat bodies a system
// prompt and one user turn, edge.mjs's a conversation).
import path from "node:path";

import { newKey } from "../tests/support/harness.mjs";
import {
  SIZES, UPSTREAM_MS, rounds, throughputTotal, thisCheckout,
  benchWorker, checkoutFrom, startStacks, stopStacks, useStateDir, workerIn,
  chatBody, storm, timed, warmUp,
  firstCalls, throughputs,
  f1, loadAverage, p50, x,
} from "./common.mjs";

const parts = Number(process.env.BENCH_PARTS ?? 6);
const base = checkoutFrom("BENCH_BASE_DIR", { required: true });
const stateDir = useStateDir();

const more = (process.env.BENCH_MORE ?? "")
  .split(",")
  .filter(Boolean)
  .map((entry) => [entry.slice(0, entry.indexOf("=")), path.resolve(entry.slice(entry.indexOf("=") + 1))]);

const run = await startStacks({
  A: workerIn(base),
  B: {},
  passthrough: benchWorker("passthrough"),
  ...Object.fromEntries(more.map(([name, config]) => [name, { cwd: path.dirname(config), config: path.basename(config) }])),
});
const { llm, stacks } = run;
const NAMES = ["A", "B", "passthrough", ...more.map(([name]) => name)];
/** A chat body of `bytes`: a system prompt and one user turn. */
const body = (bytes, tag) => chatBody(bytes, tag, { turns: false });

function report(label, times) {
  const [a, b, p] = ["A", "B", "passthrough"].map((n) => p50(times[n]));
  const others = more.map(([n]) => `  ${n} ${f1(p50(times[n]))} (/pt ${x(p50(times[n]) / p)})`).join("");
  console.log(
    `${label.padEnd(22)} p50 A ${f1(a)}  B ${f1(b)}  pass-through ${f1(p)} ms   A/pt ${x(a / p)}  B/pt ${x(b / p)}  B/A ${x(b / a)}${others}`,
  );
}

try {
  console.log(`A/B: A = ${base}, B = ${thisCheckout}; ${rounds} rounds, ${throughputTotal} requests × ${parts} parts`);
  console.log(`load average ${loadAverage()} at the start; state in ${stateDir}`);
  await warmUp(stacks, NAMES, body);

  for (const [label, bytes] of SIZES) report(`first call ${label}`, await firstCalls(stacks, NAMES, (i) => body(bytes, `${label} ${i}`)));
  llm.scriptAll(["ok*"]);
  // A and B replay each of these at once (the Ledger answers): beside the
  // pass-through's call in the same rounds, a replay's own share of the
  // time any call through this runtime takes.
  const replays = { A: [], B: [] };
  const replay = (name) => async (key, sent) => replays[name].push((await timed(stacks[name], key, sent)).ms);
  const zero = await firstCalls(stacks, NAMES, (i) => body(1024, `zero ${i}`), { A: replay("A"), B: replay("B") });
  report("first call 0 ms 1 KB", zero);
  const floor = p50(zero.passthrough);
  const [ra, rb] = [p50(replays.A), p50(replays.B)];
  console.log(
    `${"replay (Ledger) 1 KB".padEnd(22)} p50 A ${f1(ra)}  B ${f1(rb)}  pass-through call at 0 ms ${f1(floor)} ms   A/pt ${x(ra / floor)}  B/pt ${x(rb / floor)}   a replay's own share: A ${(ra - floor).toFixed(1)} ms, B ${(rb - floor).toFixed(1)} ms`,
  );
  llm.scriptAll([`delay:${UPSTREAM_MS}*`]);

  const bodies = Array.from({ length: throughputTotal + 8 }, (_, i) => body(1024, `throughput ${i}`));
  const totals = await throughputs(
    NAMES.map((name) => ({ name, stack: stacks[name] })),
    (i) => bodies[i % bodies.length],
    parts,
  );
  const rate = (n) => totals[n].rate;
  const cpu = (n) => totals[n].cpuPerRequest;
  const runtime = (n) => totals[n].runtimePerRequest;
  for (const n of NAMES) {
    console.log(`throughput ${n.padEnd(12)} ${rate(n).toFixed(0).padStart(5)} req/s   CPU ${cpu(n).toFixed(2)} ms/request (runtime alone ${runtime(n).toFixed(2)})`);
  }
  const p = "passthrough";
  console.log(
    `throughput / pass-through: A ${x(rate("A") / rate(p))}  B ${x(rate("B") / rate(p))}   CPU / pass-through: A ${x(cpu("A") / cpu(p))}  B ${x(cpu("B") / cpu(p))}   runtime CPU / pass-through: A ${x(runtime("A") / runtime(p))}  B ${x(runtime("B") / runtime(p))}   B - A CPU ${(cpu("B") - cpu("A")).toFixed(2)} ms`,
  );
  for (const [n] of more) {
    console.log(`  ${n}: throughput / pass-through ${x(rate(n) / rate(p))}   CPU / pass-through ${x(cpu(n) / cpu(p))}   ${n} - A CPU ${(cpu(n) - cpu("A")).toFixed(2)} ms`);
  }

  // B's guarantees: a storm is one call and one body; a replay is the first answer's bytes.
  const stormed = await storm(llm, stacks.B);
  const key = newKey();
  const replayed = body(32 * 1024, "replay");
  const first = await timed(stacks.B, key, replayed);
  const again = await timed(stacks.B, key, replayed);
  console.log(
    `B: 1000-way storm ${stormed.calls} upstream call(s), ${stormed.bodies} body; replay byte-identical: ${first.text === again.text}`,
  );
  console.log(`load average ${loadAverage()} at the end`);
} finally {
  await stopStacks(run);
}
