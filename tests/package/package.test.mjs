// The npm package as a user gets it: `npm pack`, installed into a fresh app,
// imported from Node (its types: types.test.mjs), bundled with Vite, and the
// bundle run in headless Chromium against the gateway (cross-origin, so CORS
// is exercised too).
import assert from "node:assert/strict";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { after, before, describe, test } from "node:test";
import { fileURLToPath } from "node:url";

import { launchChromium, screenshot } from "../support/browser.mjs";
import { startCuttingProxy } from "../support/cutting-proxy.mjs";
import { DEV_KEY, sha256, startStack, startWorker } from "../support/harness.mjs";
import { bin, buildPage, makeApp, openPage, run, serveStatic } from "../support/pages.mjs";

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");
/** Cargo.toml's [workspace.package]: the version, license and repository the npm package must declare too. */
const WORKSPACE = Object.fromEntries(
  [...readFileSync(path.join(ROOT, "Cargo.toml"), "utf8").matchAll(/^(version|license|repository) = "([^"]+)"/gm)].map((m) => [m[1], m[2]]),
);
/**
 * fingerprint("POST", "https://gw.test/v1/chat/completions", "{}"): what the
 * core's example prints for POST /v1/chat/completions with body {} (the SDK
 * fingerprints the URL's path): `printf '{}' | cargo run -p onejob-core
 * --example fingerprint -- POST /v1/chat/completions`.
 */
const EMPTY_BODY_FINGERPRINT = "67b993ac064b44914cbd265f70ee7ef9f2f95fafe13a6f5925b523eab8e4f827";

let app;
let tarball;
let worker;
let persistTo;

before(async () => {
  // The official SDK: the workspace's pinned copy, linked into the app.
  ({ dir: app, tarball } = makeApp(["openai"]));
  persistTo = mkdtempSync(path.join(tmpdir(), "onejob-pkg-"));
  worker = await startWorker({ vars: { UPSTREAM: "demo" }, persistTo });
});

after(async () => {
  await worker?.stop();
  for (const dir of [app, persistTo]) if (dir) rmSync(dir, { recursive: true, force: true });
});

describe("the npm package `onejob`", () => {
  test("packs the wasm, the typed entries, and nothing else", () => {
    for (const file of ["package.json", "onejob_bg.wasm", "onejob.js", "index.js", "node.js", "workerd.js", "inline.js", "inline.d.ts", "index.d.ts", "onejob.d.ts", "README.md", "LICENSE.txt"]) {
      assert.ok(tarball.files.includes(file), `${file} is packed`);
    }
    assert.ok(tarball.files.every((f) => !f.includes("/")), tarball.files.join(", "));
    console.log(`package tarball: ${tarball.size} bytes, ${tarball.files.length} files`);
  });

  test("imports from Node ≥ 20 through the node condition", () => {
    const script = `import { OneJob } from "onejob"; const oj = new OneJob({ endpoint: "https://gw.test" }); console.log(typeof oj.fetch, oj.storage);`;
    assert.equal(run("node", ["--input-type=module", "-e", script], app).trim(), "function memory");
    // The machine's own Node, when it is the oldest supported line (20).
    const system = "/usr/bin/node";
    if (existsSync(system) && run(system, ["--version"], app).startsWith("v20.")) {
      assert.equal(run(system, ["--input-type=module", "-e", script], app).trim(), "function memory", "Node 20");
      console.log(`package imported on Node ${run(system, ["--version"], app).trim()} too`);
    }
  });

  test("is publishable: npm publish --dry-run of the tarball, every export a packed file, license, repository and types declared", () => {
    // Offline: a dry run packs and validates the manifest without the registry.
    const published = JSON.parse(run("npm", ["publish", "--dry-run", "--json", "--offline", tarball.file], app));
    const result = published.onejob ?? published;
    assert.equal(result.id, `onejob@${WORKSPACE.version}`, "the SDK's version is the workspace's");
    assert.deepEqual(result.files.map((f) => f.path).sort(), [...tarball.files].sort());

    const manifest = JSON.parse(readFileSync(path.join(app, "node_modules/onejob/package.json"), "utf8"));
    assert.equal(manifest.private, undefined);
    assert.equal(manifest.license, WORKSPACE.license);
    assert.match(readFileSync(path.join(app, "node_modules/onejob/LICENSE.txt"), "utf8"), /^\s*Apache License\s+Version 2\.0, January 2004/);
    assert.equal(manifest.repository.url.replace(/^git\+/, "").replace(/\.git$/, ""), WORKSPACE.repository, "the workspace's repository");
    assert.equal(manifest.repository.directory, "crates/client");
    // Every file the manifest names (exports' conditions, types, side effects) is in the tarball.
    const named = (value) => (typeof value === "string" ? [value] : Object.values(value).flatMap(named));
    const targets = [...named(manifest.exports), manifest.types, ...manifest.sideEffects];
    assert.deepEqual(targets.filter((t) => !tarball.files.includes(t.replace(/^\.\//, ""))), [], "named but not packed");
    // And Node resolves each entry to the file its condition names.
    const resolve = (conditions, specifier) =>
      path.relative(app, fileURLToPath(run("node", [...conditions, "--input-type=module", "-e", `console.log(import.meta.resolve(${JSON.stringify(specifier)}))`], app).trim()));
    assert.equal(resolve([], "onejob"), "node_modules/onejob/node.js");
    assert.equal(resolve(["-C", "workerd"], "onejob"), "node_modules/onejob/workerd.js");
    assert.equal(resolve([], "onejob/inline"), "node_modules/onejob/inline.js");
  });

  test("make package writes this tarball, byte for byte, and it installs into an empty app offline and imports from Node", () => {
    const dist = mkdtempSync(path.join(tmpdir(), "onejob-dist-"));
    try {
      run("bash", ["scripts/package.sh", dist], ROOT);
      const file = path.join(dist, `onejob-${WORKSPACE.version}.tgz`);
      assert.equal(sha256(readFileSync(file)), sha256(readFileSync(tarball.file)), "the package tests install what make package ships");
      const user = makeApp([], tmpdir(), { tarball: file });
      try {
        const script = `import { OneJob, fingerprint } from "onejob"; const oj = new OneJob({ endpoint: "https://gw.test" });
console.log(oj instanceof OneJob, typeof oj.fetch, fingerprint("POST", "https://gw.test/v1/chat/completions", "{}"));`;
        assert.equal(run("node", ["--input-type=module", "-e", script], user.dir).trim(), `true function ${EMPTY_BODY_FINGERPRINT}`);
      } finally {
        user.remove();
      }
    } finally {
      rmSync(dist, { recursive: true, force: true });
    }
  });

  test("runs inside a Cloudflare Worker through the workerd condition", async () => {
    const dir = path.join(app, "worker");
    mkdirSync(path.join(dir, "src"), { recursive: true });
    writeFileSync(
      path.join(dir, "src/index.js"),
      `import { OneJob } from "onejob";
export default {
  async fetch(request, env) {
    const oj = new OneJob({ endpoint: env.GATEWAY, token: "${DEV_KEY}", storage: "memory" });
    const res = await oj.fetch("/v1/chat/completions", { method: "POST", headers: { "Content-Type": "application/json" },
      body: JSON.stringify({ model: "demo", messages: [{ role: "user", content: "from a worker" }] }) });
    return Response.json({ status: res.status, key: res.headers.get("Idempotency-Key"), storage: oj.storage });
  },
};
`,
    );
    writeFileSync(path.join(dir, "wrangler.toml"), `name = "onejob-user-worker"\nmain = "src/index.js"\ncompatibility_date = "2026-11-01"\n`);
    const user = await startWorker({ vars: { GATEWAY: worker.url }, persistTo: path.join(dir, ".state"), cwd: dir, config: "wrangler.toml" });
    try {
      const result = await (await fetch(`${user.url}/`)).json();
      assert.equal(result.status, 200, JSON.stringify(result));
      assert.match(result.key, /^[0-9a-f-]{36}$/);
      assert.equal(result.storage, "memory");
    } finally {
      await user.stop();
    }
  });

  test("the official openai package at its defaults, bundled into a page on another origin: one completion, one upstream call", async () => {
    const stack = await startStack();
    const dist = buildOpenAiPage("openai-web", `
  const completion = await openai.chat.completions.create({ model: "gpt-test", messages: [{ role: "user", content: "from the browser" }] });
  document.body.textContent = completion.choices[0].message.content;`);
    let opened;
    try {
      opened = await openPage(dist, stack.url);
      const { page, failed } = opened;
      const text = await page.textContent("body");
      assert.equal(await page.getAttribute("body", "data-result"), "ok", `${text}\n${failed.join("\n")}`);
      assert.match(text, /echo of \d+ bytes/);
      assert.equal(stack.llm.allCalls().length, 1, "one upstream call");
      const sent = stack.llm.allCalls()[0].headers;
      assert.match(sent["idempotency-key"], /^onejob-[0-9a-f]{64}$/);
      assert.equal(sent.authorization, undefined, "the tenant key never reaches the provider");
      await screenshot(page, "openai-in-browser");
    } finally {
      await opened?.close();
      await stack.stop();
    }
  });

  test("the official openai package streaming in a cross-origin page: a connection cut mid-stream is continued, every token once", async () => {
    const stack = await startStack();
    stack.llm.scriptAll(["sse:20:30*"]);
    const proxy = await startCuttingProxy(stack.url);
    const dist = buildOpenAiPage("openai-stream-web", `
  const stream = await openai.chat.completions.create({ model: "gpt-test", stream: true, messages: [{ role: "user", content: "stream in the browser" }] });
  let content = "";
  for await (const chunk of stream) content += chunk.choices[0]?.delta?.content ?? "";
  document.body.textContent = content;`);
    let opened;
    try {
      proxy.cutNextStream(7);
      opened = await openPage(dist, proxy.url);
      const { page } = opened;
      const text = await page.textContent("body");
      assert.equal(await page.getAttribute("body", "data-result"), "ok", text);
      assert.equal(proxy.cuts, 1, "the proxy cut the stream");
      assert.equal(text, Array.from({ length: 20 }, (_, i) => `token${i} `).join(""));
      assert.equal(stack.llm.allCalls().length, 1, "one upstream call");
      assert.ok(proxy.seen.some((s) => s.method === "GET" && s.path.includes("/stream?from=")), "the page's SDK asked for the rest");
    } finally {
      await opened?.close();
      await proxy.close();
      await stack.stop();
    }
  });

  test("bundles with Vite and runs in Chromium against the gateway, cross-origin", async () => {
    const web = path.join(app, "web");
    mkdirSync(web);
    writeFileSync(path.join(web, "index.html"), `<!doctype html><html><body><script type="module" src="./main.js"></script></body></html>`);
    writeFileSync(
      path.join(web, "main.js"),
      `import { OneJob } from "onejob";
const endpoint = new URLSearchParams(location.search).get("endpoint");
const oj = new OneJob({ endpoint, token: "${DEV_KEY}" });
const res = await oj.fetch("/v1/chat/completions", { method: "POST", headers: { "Content-Type": "application/json" },
  body: JSON.stringify({ model: "demo", messages: [{ role: "user", content: "bundled app: refund please" }] }) });
document.body.dataset.status = String(res.status);
document.body.dataset.key = res.headers.get("Idempotency-Key") ?? "";
document.body.textContent = await res.text();
`,
    );
    run(bin("vite"), ["build", "--logLevel", "warn", "--outDir", "dist", "--emptyOutDir"], web);
    const assets = readdirSync(path.join(web, "dist/assets"));
    assert.ok(assets.some((f) => f.endsWith(".wasm")), `the wasm is emitted: ${assets}`);

    const server = await serveStatic(path.join(web, "dist"));
    const browser = await launchChromium();
    try {
      const page = await browser.newPage();
      const errors = [];
      page.on("pageerror", (e) => errors.push(e.message));
      // localhost vs 127.0.0.1: a different origin, so the gateway's CORS headers must work.
      await page.goto(`http://localhost:${server.address().port}/?endpoint=${encodeURIComponent(worker.url)}`);
      await page.waitForFunction(() => document.body.dataset.status, null, { timeout: 20_000 });
      assert.equal(await page.getAttribute("body", "data-status"), "200", (await page.textContent("body")) + errors.join("\n"));
      assert.match(await page.getAttribute("body", "data-key"), /^[0-9a-f-]{36}$/, "the Idempotency-Key header is exposed");
      await screenshot(page, "bundled-app");
      assert.deepEqual(errors, []);
    } finally {
      await browser.close();
      server.close();
    }
  });
});

/**
 * Bundles (Vite) a page of the app that uses the official openai package
 * through `oj.fetcher()` against `?endpoint=`; `body` runs with `openai` in
 * scope and sets the page's text. The page says `data-result` ok or error.
 * Returns the built folder.
 */
function buildOpenAiPage(name, body) {
  return buildPage(
    app,
    name,
    `import OpenAI from "openai";
import { OneJob } from "onejob";
const endpoint = new URLSearchParams(location.search).get("endpoint");
const oj = new OneJob({ endpoint });
// dangerouslyAllowBrowser: the key here is a onejob tenant key, not the provider's.
const openai = new OpenAI({ baseURL: endpoint + "/v1", apiKey: "${DEV_KEY}", fetch: oj.fetcher(), dangerouslyAllowBrowser: true });
try {${body}
  document.body.dataset.result = "ok";
} catch (error) {
  document.body.dataset.result = "error";
  document.body.textContent = String(error);
}
`,
  );
}
