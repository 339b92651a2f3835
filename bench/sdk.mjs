// The browser SDK's speed, in one run (make bench-sdk, after make build-client):
//
// 1. fingerprint(method, url, body) of two 32 KB chat bodies: the SDK's
//    export (the core's canonicaliser and SHA-256, in wasm) against plain
//    JavaScript (an RFC 8785 canonicaliser over JSON.parse, then
//    crypto.subtle.digest("SHA-256") of the same framed message), in Node and
//    in headless Chromium. Both must give the same hex, or the run fails.
//    "ascii": English turns, ASCII only. "multilingual": what multilingual
//    users send: accented letters, CJK, Cyrillic, symbols (✓, €, emoji),
//    quotes, backslashes, newlines and tabs, so the JSON is escape-heavy.
// 2. oj.fetch's own cost per 32 KB call (fetch answered at once, storage in
//    memory): fingerprint, record, one attempt, delivery.
// 3. Start-up in headless Chromium: from the start of `import("onejob")` to
//    the first request reaching fetch, a fresh browser context per run (no
//    caches), 10 runs, the wasm served as application/wasm.
//
//   node bench/sdk.mjs [iterations=300]
import { webcrypto } from "node:crypto";
import { readFileSync } from "node:fs";
import http from "node:http";
import path from "node:path";
import { fileURLToPath } from "node:url";

import { launchChromium } from "../tests/support/browser.mjs";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const pkg = path.join(root, "crates/client/pkg");
const iterations = Number(process.argv[2] ?? 300);

/** The benchmark itself, run in Node and (as source) in the page. */
async function measure({ fingerprint, OneJob }, iterations, subtle) {
  // A 32 KB chat body of turns made of `words` (see the header).
  const chat = (words) => {
    const request = (messages) => ({ model: "gpt-4o-mini", temperature: 0.7, top_p: 0.95, max_tokens: 512, messages });
    const messages = [];
    for (let i = 0; new TextEncoder().encode(JSON.stringify(request(messages))).length < 32 * 1024 - 700; i++) {
      const content = Array.from({ length: 60 }, (_, j) => words[(i * 7 + j) % words.length]).join(" ");
      messages.push({ role: i % 2 ? "assistant" : "user", content, name: `turn-${i}` });
    }
    return JSON.stringify(request(messages));
  };
  const bodies = {
    ascii: chat("the quick brown fox jumps over the lazy dog while a model answers in plain English".split(" ")),
    multilingual: chat([
      "Voilà", "la", "façade", "naïve", "Größe", "über", "ça", "coûte", "€12,50", "✓", "done", "✗", "→",
      "日本語の", "テキスト", "中文", "Привет,", "мир", "مرحبا", "🙂", "“smart", "quotes”",
      '"quoted"', 'he said "yes"', "C:\\Users\\zoë\\file.txt", "a\\b", "line\nbreak", "\n\n", "tab\there",
    ]),
  };
  const url = "https://gw.example/v1/chat/completions";

  // RFC 8785 in JavaScript: JSON.stringify writes numbers and strings exactly
  // as JCS wants; members sorted by UTF-16 code units (JS's default order).
  const canonicalize = (v) =>
    v === null || typeof v !== "object"
      ? JSON.stringify(v)
      : Array.isArray(v)
        ? `[${v.map(canonicalize).join(",")}]`
        : `{${Object.keys(v).sort().map((k) => `${JSON.stringify(k)}:${canonicalize(v[k])}`).join(",")}}`;
  const encoder = new TextEncoder();
  const frame = (parts) => {
    const bytes = parts.map((p) => (typeof p === "string" ? encoder.encode(p) : p));
    const out = new Uint8Array(bytes.reduce((n, b) => n + 8 + b.length, 0));
    const view = new DataView(out.buffer);
    let at = 0;
    for (const b of bytes) {
      view.setBigUint64(at, BigInt(b.length));
      out.set(b, at + 8);
      at += 8 + b.length;
    }
    return out;
  };
  const jsFingerprint = async (method, url, body) => {
    const target = new URL(url).pathname + new URL(url).search;
    const message = frame(["onejob/fingerprint/v1", method.toUpperCase(), target, "json", canonicalize(JSON.parse(body))]);
    const digest = new Uint8Array(await subtle.digest("SHA-256", message));
    return Array.from(digest, (b) => b.toString(16).padStart(2, "0")).join("");
  };

  // Per-call time of each contender: short batches alternate between them
  // (so both see the same machine, whose load moves; a batch is about a tenth
  // of `iterations` calls), the first five of each warm the engines up (wasm
  // and JS tier up alike), the median of the next twenty counts, and so does
  // the median of the twenty SDK/JS ratios of neighbouring batches.
  const batch = async (fn, n) => {
    const start = performance.now();
    for (let i = 0; i < n; i++) await fn();
    return (performance.now() - start) / n;
  };
  const median = (xs) => [...xs].sort((a, b) => a - b)[xs.length >> 1];
  const rounds = 25;
  const warm = 5;
  const size = Math.max(5, Math.round(iterations / 10));
  const perCall = async (fn) => {
    const times = [];
    for (let b = 0; b < rounds; b++) times.push(await batch(fn, size));
    return median(times.slice(warm));
  };
  const result = { bodies: {} };
  for (const [kind, body] of Object.entries(bodies)) {
    const sdk = fingerprint("POST", url, body);
    const js = await jsFingerprint("POST", url, body);
    if (sdk !== js) throw new Error(`${kind}: fingerprints differ: sdk ${sdk}, js ${js}`);
    const sdkTimes = [];
    const jsTimes = [];
    for (let b = 0; b < rounds; b++) {
      sdkTimes.push(await batch(() => fingerprint("POST", url, body), size));
      jsTimes.push(await batch(() => jsFingerprint("POST", url, body), size));
    }
    const counted = (xs) => xs.slice(warm);
    result.bodies[kind] = {
      bytes: encoder.encode(body).length,
      escapes: (body.match(/\\(u[0-9a-f]{4}|.)/gi) ?? []).length,
      nonAscii: [...body].filter((c) => c.codePointAt(0) > 0x7f).length,
      sdkMs: median(counted(sdkTimes)),
      jsMs: median(counted(jsTimes)),
      ratio: median(counted(sdkTimes).map((t, i) => t / counted(jsTimes)[i])),
    };
  }
  const body = bodies.ascii;

  // oj.fetch's own cost: fetch answers at once; each call is a new intent.
  const realFetch = globalThis.fetch;
  globalThis.fetch = async () => new Response("{}", { status: 200, headers: { "content-type": "application/json" } });
  try {
    const oj = new OneJob({ endpoint: "https://gw.example", storage: "memory" });
    let n = 0;
    result.fetchMs = await perCall(async () => {
      const res = await oj.fetch("/v1/chat/completions", { method: "POST", headers: { "Content-Type": "application/json" }, body: body.replace("turn-0", `turn-${n++}`) });
      await res.text();
    });
  } finally {
    globalThis.fetch = realFetch;
  }
  return result;
}

const show = (where, r) => {
  for (const [kind, b] of Object.entries(r.bodies)) {
    console.log(
      `sdk-bench: ${where.padEnd(8)} fingerprint, ${kind.padEnd(12)} body of ${b.bytes} B (${b.nonAscii} non-ASCII characters, ${b.escapes} escapes): ` +
        `SDK ${(b.sdkMs * 1000).toFixed(0)} µs, JS (canonicalize + subtle.digest) ${(b.jsMs * 1000).toFixed(0)} µs (SDK/JS ${b.ratio.toFixed(2)})`,
    );
  }
  console.log(`sdk-bench: ${where.padEnd(8)} oj.fetch own cost per call (ascii body): ${r.fetchMs.toFixed(3)} ms`);
};

// Node.
const node = await import(path.join(pkg, "node.js"));
show("Node", await measure(node, iterations, webcrypto.subtle));

// Chromium: the package served as files, application/wasm for the wasm.
const server = http.createServer((req, res) => {
  const name = new URL(req.url, "http://x").pathname;
  if (name === "/") return res.writeHead(200, { "Content-Type": "text/html" }).end("<!doctype html><title>bench</title>");
  if (name === "/api") return res.writeHead(200, { "Content-Type": "application/json", "Access-Control-Allow-Origin": "*" }).end("{}");
  try {
    const file = readFileSync(path.join(pkg, path.basename(name)));
    const type = name.endsWith(".wasm") ? "application/wasm" : "text/javascript";
    res.writeHead(200, { "Content-Type": type, "Cache-Control": "no-store" }).end(file);
  } catch {
    res.writeHead(404).end();
  }
});
await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
const origin = `http://127.0.0.1:${server.address().port}`;
const browser = await launchChromium();
try {
  const context = await browser.newContext();
  const page = await context.newPage();
  await page.goto(`${origin}/`);
  const result = await page.evaluate(
    async ({ source, iterations }) => {
      const sdk = await import("/index.js");
      await sdk.ready;
      const measure = new Function(`return (${source})`)();
      return measure(sdk, iterations, crypto.subtle);
    },
    { source: measure.toString(), iterations },
  );
  show("Chromium", result);
  await context.close();

  // Start-up: import to a usable client, and to the first request (which
  // waits for the wasm), fresh context each run.
  const usable = [];
  const runs = [];
  for (let i = 0; i < 10; i++) {
    const fresh = await browser.newContext();
    const page = await fresh.newPage();
    await page.goto(`${origin}/`);
    const run = await page.evaluate(async (origin) => {
      let first;
      const realFetch = globalThis.fetch;
      globalThis.fetch = (...args) => {
        // (The wasm itself is fetched too; only the request counts.)
        if (String(args[0]).endsWith("/api")) first ??= performance.now();
        return realFetch(...args);
      };
      const start = performance.now();
      const { OneJob } = await import("/index.js");
      const oj = new OneJob({ endpoint: origin, storage: "memory" });
      const constructed = performance.now();
      const res = await oj.fetch("/api", { method: "POST", headers: { "Content-Type": "application/json" }, body: "{}" });
      if (res.status !== 200) throw new Error(`status ${res.status}`);
      return { usable: constructed - start, first: first - start };
    }, origin);
    usable.push(run.usable);
    runs.push(run.first);
    await fresh.close();
  }
  const median = (xs) => {
    xs.sort((a, b) => a - b);
    return `median ${((xs[4] + xs[5]) / 2).toFixed(1)} ms (10 fresh contexts; min ${xs[0].toFixed(1)}, max ${xs[9].toFixed(1)})`;
  };
  console.log(`sdk-bench: Chromium start-up, import to a usable new OneJob(): ${median(usable)}`);
  console.log(`sdk-bench: Chromium start-up, import to first request: ${median(runs)}`);
} finally {
  await browser.close();
  server.close();
}
