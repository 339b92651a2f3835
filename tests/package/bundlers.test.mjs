// The bundler matrix: the packed `onejob` package in a tiny app built with
// each bundler at its defaults (no onejob-specific configuration), and a
// no-bundler page importing the package's files from a CDN-style path; each
// page runs in headless Chromium against the gateway (another origin) and
// must get a completion, with one upstream call, and compute the same
// fingerprint as Node. Vite, webpack 5, Next.js (app router, a client
// component, built and served by `next build` / `next start`) and the
// no-bundler page use the default entry (the wasm as a separate file,
// streamed); esbuild and Rollup,
// which do not copy `new URL("x.wasm", import.meta.url)` assets, use
// `onejob/inline` (the wasm embedded).
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { cpSync, mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import path from "node:path";
import { after, before, describe, test } from "node:test";
import { fileURLToPath } from "node:url";

import { launchChromium } from "../support/browser.mjs";
import { DEV_KEY, freePort, startStack } from "../support/harness.mjs";
import { bin, makeApp, run, serveStatic } from "../support/pages.mjs";

/** Waits until `url` answers 200. */
async function waitForHttp(url, timeoutMs = 30_000) {
  const until = Date.now() + timeoutMs;
  for (;;) {
    try {
      if ((await fetch(url)).status === 200) return;
    } catch {}
    if (Date.now() > until) throw new Error(`${url} did not answer`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");
// Next.js reports usage over the network unless told not to.
process.env.NEXT_TELEMETRY_DISABLED = "1";

let app;
let stack;
let browser;
let expectedFingerprint;

before(async () => {
  mkdirSync(path.join(root, "target"), { recursive: true });
  ({ dir: app } = makeApp([], mkdtempSync(path.join(root, "target", "bundlers-"))));
  stack = await startStack();
  browser = await launchChromium();
  // The identity Node computes with the same package (the node entry).
  const script = `import { fingerprint } from "onejob"; console.log(fingerprint("POST", "https://gw.test/v1/x?v=1", '{"b":[1.50,1e2],"a":"\\\\u00e9"}'));`;
  expectedFingerprint = run("node", ["--input-type=module", "-e", script], app).trim();
  assert.match(expectedFingerprint, /^[0-9a-f]{64}$/);
});

after(async () => {
  await browser?.close();
  await stack?.stop();
  if (app) rmSync(path.dirname(app), { recursive: true, force: true });
});

/** The page's program: one completion through oj.fetch, and a fingerprint. */
const program = (entry, who) => `import { OneJob, fingerprint } from "${entry}";
const endpoint = new URLSearchParams(location.search).get("endpoint");
try {
  const oj = new OneJob({ endpoint, token: "${DEV_KEY}", storage: "memory" });
  const res = await oj.fetch("/v1/chat/completions", { method: "POST", headers: { "Content-Type": "application/json" },
    body: JSON.stringify({ model: "gpt-test", messages: [{ role: "user", content: "bundled by ${who}" }] }) });
  const body = await res.json();
  document.body.dataset.status = String(res.status);
  document.body.dataset.key = res.headers.get("Idempotency-Key") ?? "";
  document.body.dataset.fingerprint = fingerprint("POST", "https://gw.test/v1/x?v=1", '{"b":[1.50,1e2],"a":"\\\\u00e9"}');
  document.body.textContent = body.choices[0].message.content;
  document.body.dataset.result = "ok";
} catch (error) {
  document.body.dataset.result = "error";
  document.body.textContent = String(error?.stack ?? error);
}
`;

/** A folder of the app with `main.js` and an `index.html` loading `script`. */
function source(name, entry, { script = "./main.js", module = true } = {}) {
  const dir = path.join(app, name);
  mkdirSync(dir);
  writeFileSync(path.join(dir, "main.js"), program(entry, name));
  writeFileSync(path.join(dir, "index.html"), `<!doctype html><html><body><script ${module ? 'type="module" ' : ""}src="${script}"></script></body></html>`);
  return dir;
}

/**
 * Opens `dist` (served on another origin than the gateway's), or the page at
 * `origin`, and checks the page's result.
 */
async function check(dist, { wasmFile, origin }) {
  const calls = stack.llm.allCalls().length;
  const server = origin ? null : await serveStatic(dist);
  const context = await browser.newContext();
  try {
    const page = await context.newPage();
    const errors = [];
    const wasm = [];
    page.on("pageerror", (e) => errors.push(e.message));
    page.on("response", (r) => r.url().endsWith(".wasm") && wasm.push(r.headers()["content-type"]));
    await page.goto(`${origin ?? `http://localhost:${server.address().port}`}/?endpoint=${encodeURIComponent(stack.url)}`);
    await page.waitForFunction(() => document.body.dataset.result, null, { timeout: 30_000 });
    const text = await page.textContent("body");
    assert.equal(await page.getAttribute("body", "data-result"), "ok", `${text}\n${errors.join("\n")}`);
    assert.equal(await page.getAttribute("body", "data-status"), "200");
    assert.match(await page.getAttribute("body", "data-key"), /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    assert.match(text, /echo of \d+ bytes/);
    assert.equal(await page.getAttribute("body", "data-fingerprint"), expectedFingerprint, "the same identity as in Node");
    assert.equal(stack.llm.allCalls().length, calls + 1, "one upstream call");
    assert.deepEqual(wasm, wasmFile ? ["application/wasm"] : [], "the wasm is fetched as a file (streamed) only by the default entry");
    assert.deepEqual(errors, []);
  } finally {
    await context.close();
    server?.close();
  }
}

describe("every bundler, unconfigured", () => {
  test("Vite: the default entry, the wasm emitted as an asset", async () => {
    const dir = source("vite", "onejob");
    run(bin("vite"), ["build", "--logLevel", "warn", "--outDir", "dist", "--emptyOutDir"], dir);
    assert.ok(readdirSync(path.join(dir, "dist/assets")).some((f) => f.endsWith(".wasm")));
    await check(path.join(dir, "dist"), { wasmFile: true });
  });

  test("webpack 5: the default entry, the wasm emitted as an asset", async () => {
    const dir = source("webpack", "onejob", { script: "./main.bundle.js", module: false });
    const config = `export default { mode: "production", entry: "./main.js", output: { path: new URL("./dist", import.meta.url).pathname, filename: "main.bundle.js" } };`;
    writeFileSync(path.join(dir, "webpack.config.mjs"), config);
    const build = `import webpack from "webpack"; import config from "./webpack.config.mjs";
webpack(config, (error, stats) => { if (error || stats.hasErrors()) { console.error(error ?? stats.toString("errors-only")); process.exit(1); } });`;
    // The workspace's webpack, resolved from the app as an app resolves its own.
    writeFileSync(path.join(dir, "build.mjs"), build.replace('"webpack"', JSON.stringify(path.join(root, "node_modules/webpack/lib/index.js"))));
    run("node", ["build.mjs"], dir);
    cpSync(path.join(dir, "index.html"), path.join(dir, "dist/index.html"));
    assert.ok(readdirSync(path.join(dir, "dist")).some((f) => f.endsWith(".wasm")));
    await check(path.join(dir, "dist"), { wasmFile: true });
  });

  test("esbuild: onejob/inline", async () => {
    const dir = source("esbuild", "onejob/inline");
    run(bin("esbuild"), ["main.js", "--bundle", "--format=esm", "--outdir=dist", "--log-level=warning"], dir);
    cpSync(path.join(dir, "index.html"), path.join(dir, "dist/index.html"));
    await check(path.join(dir, "dist"), { wasmFile: false });
  });

  test("Rollup (with node-resolve, as every Rollup app has): onejob/inline", async () => {
    const dir = source("rollup", "onejob/inline");
    const resolvePlugin = path.join(root, "node_modules/@rollup/plugin-node-resolve/dist/es/index.js");
    writeFileSync(
      path.join(dir, "rollup.config.mjs"),
      `import { nodeResolve } from ${JSON.stringify(resolvePlugin)};
export default { input: "main.js", output: { dir: "dist", format: "es" }, plugins: [nodeResolve({ browser: true })] };`,
    );
    run(bin("rollup"), ["-c", "rollup.config.mjs", "--silent"], dir);
    cpSync(path.join(dir, "index.html"), path.join(dir, "dist/index.html"));
    await check(path.join(dir, "dist"), { wasmFile: false });
  });

  test("Next.js (app router, a client component): the default entry; server-side rendering loads it too", async () => {
    const dir = path.join(app, "next");
    mkdirSync(path.join(dir, "app"), { recursive: true });
    writeFileSync(path.join(dir, "package.json"), JSON.stringify({ name: "next-app", private: true }));
    writeFileSync(path.join(dir, "app/layout.js"), `export default function RootLayout({ children }) { return <html><body>{children}</body></html>; }\n`);
    writeFileSync(path.join(dir, "app/page.js"), `import Ask from "./ask";\nexport default function Page() { return <Ask />; }\n`);
    // The page's program, run once the client component is mounted.
    const body = program("onejob", "next").replace(/^import .*\n/, "");
    writeFileSync(
      path.join(dir, "app/ask.js"),
      `"use client";
import { useEffect } from "react";
import { OneJob, fingerprint } from "onejob";
async function ask() {
${body}
}
export default function Ask() {
  useEffect(() => { ask(); }, []);
  return <p>asking</p>;
}
`,
    );
    run(bin("next"), ["build"], dir);
    const port = await freePort();
    const server = spawn(bin("next"), ["start", "-p", String(port), "-H", "127.0.0.1"], { cwd: dir, stdio: "ignore" });
    try {
      await waitForHttp(`http://127.0.0.1:${port}/`);
      await check(null, { wasmFile: true, origin: `http://127.0.0.1:${port}` });
    } finally {
      if (server.exitCode === null) {
        const exited = new Promise((resolve) => server.once("exit", resolve));
        server.kill();
        await exited;
      }
    }
  });

  test("no bundler: <script type=module> importing the package from a CDN-style path", async () => {
    const dir = path.join(app, "cdn");
    mkdirSync(dir);
    cpSync(path.join(app, "node_modules/onejob"), path.join(dir, "npm/onejob@0.1.0"), { recursive: true });
    writeFileSync(path.join(dir, "index.html"), `<!doctype html><html><body><script type="module">${program("/npm/onejob@0.1.0/index.js", "cdn")}</script></body></html>`);
    await check(dir, { wasmFile: true });
  });
});
