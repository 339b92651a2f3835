// What bench/edge.mjs and bench/ab.mjs share: their settings, the stacks
// under `wrangler dev` beside one fake upstream, a timed chat request, the
// CPU of a stack's own processes read from /proc (Linux only), the
// interleaved rounds (each request of a round going to each stack in turn,
// the order rotating, so that drift hits all alike), and the figures'
// quantiles and formatting. Importing it starts nothing; each script says
// what it runs and prints.
//
//   node bench/<script>.mjs [rounds]   (default 40; BENCH_ROUNDS when no argument)
//   BENCH_THROUGHPUT=480               (requests per stack in each throughput phase)
//   BENCH_STATE_DIR=/tmp               (where the stacks keep their state; default
//                                      /dev/shm when there is one, see useStateDir)
import { execFileSync } from "node:child_process";
import { existsSync, readFileSync, readdirSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";

import { DEV_KEY, chat, newKey, readBody, startFakeLlm, startStack } from "../tests/support/harness.mjs";

export const rounds = Number(process.argv[2] ?? process.env.BENCH_ROUNDS ?? 40);
export const throughputTotal = Number(process.env.BENCH_THROUGHPUT ?? 480);
export const UPSTREAM_MS = 50;
export const CONCURRENCY = 16;
export const SIZES = [
  ["1 KB", 1024],
  ["32 KB", 32 * 1024],
  ["256 KB", 256 * 1024],
];
const here = path.dirname(fileURLToPath(import.meta.url));
/** This checkout (the one the bench scripts are in). */
export const thisCheckout = path.resolve(here, "..");

// ---------------------------------------------------------------- stacks

/**
 * Where the stacks keep their state (each Durable Object's SQLite file, KV):
 * BENCH_STATE_DIR, else memory (/dev/shm) when there is one. The harness
 * makes each stack's state directory in the temporary folder (os.tmpdir(),
 * which reads TMPDIR); wrangler's own temporary files go there too. Call it
 * before the stacks start.
 */
export function useStateDir() {
  const dir = process.env.BENCH_STATE_DIR ?? (existsSync("/dev/shm") ? "/dev/shm" : os.tmpdir());
  process.env.TMPDIR = dir;
  return dir;
}

/**
 * Another checkout's built worker, from the variable `name` (e.g. a worktree
 * of main after its `make build-edge`), checked against its wrangler.toml's
 * main; exits 2 when it is not built, or when `required` and unset. Null when
 * unset.
 */
export function checkoutFrom(name, { required = false } = {}) {
  if (!process.env[name]) {
    if (!required) return null;
    console.error(`${name}=<a checkout after its make build-edge> is required`);
    process.exit(2);
  }
  const dir = path.resolve(process.env[name]);
  const config = path.join(dir, "wrangler.toml");
  const main = existsSync(config) && readFileSync(config, "utf8").match(/^main\s*=\s*"([^"]+)"/m)?.[1];
  if (!main || !existsSync(path.join(dir, main))) {
    console.error(`${name}=${dir}: ${main ? `no ${main} there: run make build-edge in that checkout first` : "no wrangler.toml with a main there"}`);
    process.exit(2);
  }
  return dir;
}

/** startStack's options for the worker of `dir`'s wrangler.toml (a checkout, or a bench worker's folder). */
export const workerIn = (dir) => ({ cwd: dir, config: "wrangler.toml" });
/** startStack's options for one of bench/'s own workers ("passthrough", "storage-pattern", "sharded"). */
export const benchWorker = (name) => workerIn(path.join(here, name));

/**
 * The fake upstream (answering after UPSTREAM_MS) and one stack per entry of
 * `specs` (name → startStack's options), started in order; if one fails to
 * start, those started are stopped.
 */
export async function startStacks(specs) {
  const llm = await startFakeLlm();
  llm.scriptAll([`delay:${UPSTREAM_MS}*`]);
  const stacks = {};
  try {
    for (const [name, options] of Object.entries(specs)) stacks[name] = await startStack({ llm, ...options });
  } catch (error) {
    await stopStacks({ llm, stacks });
    throw error;
  }
  return { llm, stacks };
}

export async function stopStacks({ llm, stacks }) {
  for (const stack of Object.values(stacks)) await stack.stop();
  await llm.close();
}

// ---------------------------------------------------------------- requests

/**
 * A chat request of about `bytes` bytes as JSON: a system prompt and turns
 * of a support conversation, the last user turn naming `tag` (distinct
 * requests, distinct fingerprints). With `turns: false`, the system prompt
 * and that one user turn alone, filled to the size (bench/ab.mjs's bodies).
 */
export function chatBody(bytes, tag, { turns = true } = {}) {
  const system = "You are the support assistant of Acme Billing. Answer briefly, cite the invoice number, never promise a refund you cannot see in the ledger.";
  const user = "My card was charged twice for the March invoice (INV-20931) and the second charge shows as pending. Can you check whether it will be reversed? ";
  const assistant = "I can see invoice INV-20931 paid once on 3 March; the pending charge is an authorisation hold that your bank releases within five working days. ";
  const messages = [{ role: "system", content: system }];
  const request = { model: "gpt-test", temperature: 0.2, max_tokens: 512, messages };
  const last = { role: "user", content: `Ticket ${tag}: ` };
  for (let turn = 0; turns && JSON.stringify(request).length + 400 < bytes; turn++) {
    messages.push({ role: turn % 2 ? "assistant" : "user", content: (turn % 2 ? assistant : user).repeat(1 + (turn % 3)) });
  }
  messages.push(last);
  const size = () => Buffer.byteLength(JSON.stringify(request));
  last.content += user.repeat(Math.max(0, Math.floor((bytes - size()) / user.length)));
  last.content += "x".repeat(Math.max(0, bytes - size()));
  return JSON.stringify(request);
}

/** One keyed call, read to its end: its text, first-byte and total times. */
export async function timed(stack, key, body, headers = {}) {
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

/** One call of each size of SIZES to each of `names` (a name → stack map `targets`), bodies by `bodyOf(bytes, tag)`: every isolate warm. */
export async function warmUp(targets, names, bodyOf = chatBody) {
  for (const name of names) {
    for (const [, bytes] of SIZES) await timed(targets[name], newKey(), bodyOf(bytes, `warm-up ${name}`));
  }
}

/**
 * 1000 concurrent calls on one key to `stack`, the upstream taking 1000 ms:
 * the upstream calls they made, their distinct bodies, how many were
 * answered and the wall time. The upstream answers after UPSTREAM_MS again
 * afterwards.
 */
export async function storm(llm, stack) {
  const key = newKey();
  llm.scriptAll(["delay:1000"]);
  const callsBefore = llm.allCalls().length;
  const at = performance.now();
  const answers = await Promise.all(Array.from({ length: 1000 }, () => timed(stack, key, JSON.stringify(chat("storm")))));
  const ms = performance.now() - at;
  const calls = llm.allCalls().length - callsBefore;
  llm.scriptAll([`delay:${UPSTREAM_MS}*`]);
  return { calls, bodies: new Set(answers.map((a) => a.text)).size, answered: answers.length, ms };
}

// ---------------------------------------------------------------- CPU (/proc)

/** The pids of a stack's own processes (its wrangler's process group), workerd's marked. */
export function processesOf(stack) {
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
export function cpuOf(stack) {
  const snapshot = { runtime: new Map(), proxy: new Map(), other: new Map() };
  for (const p of processesOf(stack)) snapshot[p.proxy ? "proxy" : p.workerd ? "runtime" : "other"].set(p.pid, p.ticks);
  return snapshot;
}
/** CPU ms spent between two snapshots in `kinds` (a process that appeared counts from zero). */
export const cpuSpent = (before, after, kinds = ["runtime", "proxy"]) =>
  kinds.reduce((sum, kind) => sum + [...after[kind]].reduce((s, [pid, ticks]) => s + ticks - (before[kind].get(pid) ?? 0), 0), 0) * TICK_MS;

// ---------------------------------------------------------------- interleaved rounds

/** The permutation of `names` for round `i`: every order in turn. */
export const orderOf = (names, i) => {
  const rotated = names.map((_, j) => names[(i + j) % names.length]);
  return Math.floor(i / names.length) % 2 ? rotated.reverse() : rotated;
};

/**
 * First calls to `names` (of the name → stack map `targets`) interleaved,
 * `rounds` rounds of `bodyOf(i)`, each on a new key: ms by name. `after[name]`,
 * when given, runs after each of that name's calls with its key and body.
 */
export async function firstCalls(targets, names, bodyOf, after = {}) {
  const times = Object.fromEntries(names.map((n) => [n, []]));
  for (let i = 0; i < rounds; i++) {
    const body = bodyOf(i);
    for (const name of orderOf(names, i)) {
      const key = newKey();
      times[name].push((await timed(targets[name], key, body)).ms);
      if (after[name]) await after[name](key, body);
    }
  }
  return times;
}

/**
 * Throughput at CONCURRENCY on distinct keys: each stack of `runs` ({ name,
 * stack, headers }) takes `throughputTotal` requests in `chunks` parts, the
 * parts interleaved. Per stack: req/s (requests over the time its parts
 * took) and the CPU per request of its workerd (runtime and proxy), of the
 * runtime alone and of the rest (wrangler's node), read after each part has
 * settled: background work such as KV writes and the index counts.
 */
export async function throughputs(runs, bodyOf, chunks = 3) {
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

// ---------------------------------------------------------------- figures

export const quantile = (values, q) => {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))];
};
export const p50 = (values) => quantile(values, 0.5);
/** A figure with one decimal, six wide. */
export const f1 = (v) => v.toFixed(1).padStart(6);
/** Milliseconds, six wide. */
export const ms = (v) => `${f1(v)} ms`;
/** A ratio: ×1.23. */
export const x = (v) => `×${v.toFixed(2)}`;
/** The load average, as "0.52 0.61 0.70". */
export const loadAverage = () =>
  os
    .loadavg()
    .map((l) => l.toFixed(2))
    .join(" ");
export const sleep = (t) => new Promise((r) => setTimeout(r, t));
