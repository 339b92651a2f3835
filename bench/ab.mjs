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
// (1 KB, 32 KB, 256 KB), first-call p50 at 0 ms (1 KB), throughput at
// concurrency 16 on distinct keys and the CPU per request of each stack's
// workerd (the worker's runtime and wrangler's proxy, as bench/edge.mjs
// counts it, and the runtime alone); then B's guarantees: a 1000-way storm
// is 1 upstream call and 1 body, a replay is byte-identical.
import { execFileSync } from "node:child_process";
import { existsSync, readFileSync, readdirSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";

import { DEV_KEY, chat, newKey, readBody, startFakeLlm, startStack } from "../tests/support/harness.mjs";

const rounds = Number(process.argv[2] ?? process.env.BENCH_ROUNDS ?? 40);
const throughputTotal = Number(process.env.BENCH_THROUGHPUT ?? 480);
const parts = Number(process.env.BENCH_PARTS ?? 6);
const UPSTREAM_MS = 50;
const CONCURRENCY = 16;
const SIZES = [
  ["1 KB", 1024],
  ["32 KB", 32 * 1024],
  ["256 KB", 256 * 1024],
];
const here = path.dirname(fileURLToPath(import.meta.url));
const base = process.env.BENCH_BASE_DIR ? path.resolve(process.env.BENCH_BASE_DIR) : null;
if (!base || !existsSync(path.join(base, "crates/edge/build/index.js"))) {
  console.error("BENCH_BASE_DIR=<a checkout after its make build-edge> is required");
  process.exit(2);
}
const stateDir = process.env.BENCH_STATE_DIR ?? (existsSync("/dev/shm") ? "/dev/shm" : os.tmpdir());
process.env.TMPDIR = stateDir;

const more = (process.env.BENCH_MORE ?? "")
  .split(",")
  .filter(Boolean)
  .map((entry) => [entry.slice(0, entry.indexOf("=")), path.resolve(entry.slice(entry.indexOf("=") + 1))]);

const llm = await startFakeLlm();
llm.scriptAll([`delay:${UPSTREAM_MS}*`]);
const stacks = {};
try {
  stacks.A = await startStack({ llm, cwd: base, config: "wrangler.toml" });
  stacks.B = await startStack({ llm });
  stacks.passthrough = await startStack({ llm, config: "wrangler.toml", cwd: path.join(here, "passthrough") });
  for (const [name, config] of more) stacks[name] = await startStack({ llm, cwd: path.dirname(config), config: path.basename(config) });
} catch (error) {
  for (const stack of Object.values(stacks)) await stack.stop();
  await llm.close();
  throw error;
}
const NAMES = ["A", "B", "passthrough", ...more.map(([name]) => name)];

function chatBody(bytes, tag) {
  const messages = [{ role: "system", content: "You are the support assistant of Acme Billing. Answer briefly." }];
  const request = { model: "gpt-test", temperature: 0.2, max_tokens: 512, messages };
  const turn = "My card was charged twice for the March invoice (INV-20931) and the second charge shows as pending. ";
  const last = { role: "user", content: `Ticket ${tag}: ` };
  messages.push(last);
  last.content += turn.repeat(Math.max(0, Math.floor((bytes - JSON.stringify(request).length) / turn.length)));
  last.content += "x".repeat(Math.max(0, bytes - Buffer.byteLength(JSON.stringify(request))));
  return JSON.stringify(request);
}

async function timed(stack, key, body, headers = {}) {
  const at = performance.now();
  const res = await fetch(`${stack.url}/v1/chat/completions`, {
    method: "POST",
    headers: { Authorization: `Bearer ${DEV_KEY}`, "Idempotency-Key": key, "Content-Type": "application/json", ...headers },
    body,
  });
  const { text, totalMs } = await readBody(res, at);
  if (res.status !== 200) throw new Error(`status ${res.status}: ${text.slice(0, 300)}`);
  return { ms: totalMs, text };
}

const TICK_MS = 1000 / Number(execFileSync("getconf", ["CLK_TCK"], { encoding: "utf8" }).trim());
/** CPU ticks of a stack's workerd processes: { runtime, proxy } (pid → ticks). */
function cpuOf(stack) {
  const snapshot = { runtime: new Map(), proxy: new Map() };
  for (const pid of readdirSync("/proc").filter((d) => /^\d+$/.test(d))) {
    try {
      const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
      const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
      if (Number(fields[2]) !== stack.worker.pid) continue;
      const cmdline = readFileSync(`/proc/${pid}/cmdline`, "utf8");
      if (!cmdline.includes("workerd")) continue;
      const kind = cmdline.includes(`entry=${new URL(stack.url).host}`) ? "proxy" : "runtime";
      snapshot[kind].set(pid, Number(fields[11]) + Number(fields[12]));
    } catch {}
  }
  return snapshot;
}
const spent = (before, after, kinds) =>
  kinds.reduce((sum, kind) => sum + [...after[kind]].reduce((s, [pid, t]) => s + t - (before[kind].get(pid) ?? 0), 0), 0) * TICK_MS;

const quantile = (values, q) => [...values].sort((a, b) => a - b)[Math.min(values.length - 1, Math.floor(q * values.length))];
const p50 = (values) => quantile(values, 0.5);
const sleep = (t) => new Promise((r) => setTimeout(r, t));
const orderOf = (names, i) => {
  const rotated = names.map((_, j) => names[(i + j) % names.length]);
  return Math.floor(i / names.length) % 2 ? rotated.reverse() : rotated;
};
const f1 = (v) => v.toFixed(1).padStart(6);
const f2 = (v) => `×${v.toFixed(2)}`;

async function firstCalls(bodyOf) {
  const times = Object.fromEntries(NAMES.map((n) => [n, []]));
  for (let i = 0; i < rounds; i++) {
    const body = bodyOf(i);
    for (const name of orderOf(NAMES, i)) times[name].push((await timed(stacks[name], newKey(), body)).ms);
  }
  return times;
}

function report(label, times) {
  const [a, b, p] = ["A", "B", "passthrough"].map((n) => p50(times[n]));
  const others = more.map(([n]) => `  ${n} ${f1(p50(times[n]))} (/pt ${f2(p50(times[n]) / p)})`).join("");
  console.log(
    `${label.padEnd(22)} p50 A ${f1(a)}  B ${f1(b)}  pass-through ${f1(p)} ms   A/pt ${f2(a / p)}  B/pt ${f2(b / p)}  B/A ${f2(b / a)}${others}`,
  );
}

try {
  console.log(`A/B: A = ${base}, B = ${path.resolve(here, "..")}; ${rounds} rounds, ${throughputTotal} requests × ${parts} parts`);
  console.log(`load average ${os.loadavg().map((l) => l.toFixed(2)).join(" ")} at the start; state in ${stateDir}`);
  for (const name of NAMES) for (const [, bytes] of SIZES) await timed(stacks[name], newKey(), chatBody(bytes, `warm ${name}`));

  for (const [label, bytes] of SIZES) report(`first call ${label}`, await firstCalls((i) => chatBody(bytes, `${label} ${i}`)));
  llm.scriptAll(["ok*"]);
  report("first call 0 ms 1 KB", await firstCalls((i) => chatBody(1024, `zero ${i}`)));
  llm.scriptAll([`delay:${UPSTREAM_MS}*`]);

  const bodies = Array.from({ length: throughputTotal + 8 }, (_, i) => chatBody(1024, `throughput ${i}`));
  const totals = Object.fromEntries(NAMES.map((n) => [n, { requests: 0, ms: 0, cpu: 0, runtime: 0 }]));
  const per = Math.ceil(throughputTotal / parts);
  for (let c = 0; c < parts; c++) {
    for (const name of orderOf(NAMES, c)) {
      const before = cpuOf(stacks[name]);
      let next = 0;
      const at = performance.now();
      await Promise.all(
        Array.from({ length: CONCURRENCY }, async () => {
          while (next < per) {
            const n = next++;
            await timed(stacks[name], newKey(), bodies[(c * per + n) % bodies.length]);
          }
        }),
      );
      const t = totals[name];
      t.ms += performance.now() - at;
      t.requests += per;
      await sleep(600); // background work (the index, batched for 200 ms) ends
      const after = cpuOf(stacks[name]);
      t.cpu += spent(before, after, ["runtime", "proxy"]);
      t.runtime += spent(before, after, ["runtime"]);
    }
  }
  const rate = (n) => totals[n].requests / (totals[n].ms / 1000);
  const cpu = (n) => totals[n].cpu / totals[n].requests;
  const runtime = (n) => totals[n].runtime / totals[n].requests;
  for (const n of NAMES) {
    console.log(`throughput ${n.padEnd(12)} ${rate(n).toFixed(0).padStart(5)} req/s   CPU ${cpu(n).toFixed(2)} ms/request (runtime alone ${runtime(n).toFixed(2)})`);
  }
  const p = "passthrough";
  console.log(
    `throughput / pass-through: A ${f2(rate("A") / rate(p))}  B ${f2(rate("B") / rate(p))}   CPU / pass-through: A ${f2(cpu("A") / cpu(p))}  B ${f2(cpu("B") / cpu(p))}   runtime CPU / pass-through: A ${f2(runtime("A") / runtime(p))}  B ${f2(runtime("B") / runtime(p))}   B - A CPU ${(cpu("B") - cpu("A")).toFixed(2)} ms`,
  );
  for (const [n] of more) {
    console.log(`  ${n}: throughput / pass-through ${f2(rate(n) / rate(p))}   CPU / pass-through ${f2(cpu(n) / cpu(p))}   ${n} - A CPU ${(cpu(n) - cpu("A")).toFixed(2)} ms`);
  }

  // B's guarantees: a storm is one call and one body; a replay is the first answer's bytes.
  const stormKey = newKey();
  llm.scriptAll(["delay:1000"]);
  const callsBefore = llm.allCalls().length;
  const storm = await Promise.all(Array.from({ length: 1000 }, () => timed(stacks.B, stormKey, JSON.stringify(chat("storm")))));
  const calls = llm.allCalls().length - callsBefore;
  llm.scriptAll([`delay:${UPSTREAM_MS}*`]);
  const key = newKey();
  const body = chatBody(32 * 1024, "replay");
  const first = await timed(stacks.B, key, body);
  const again = await timed(stacks.B, key, body);
  console.log(
    `B: 1000-way storm ${calls} upstream call(s), ${new Set(storm.map((s) => s.text)).size} body; replay byte-identical: ${first.text === again.text}`,
  );
  console.log(`load average ${os.loadavg().map((l) => l.toFixed(2)).join(" ")} at the end`);
} finally {
  for (const stack of Object.values(stacks)) await stack.stop();
  await llm.close();
}
