// The SDK scenarios (scenarios.mjs) in headless Chromium, against the built
// package's browser entry (pkg/index.js, which fetches its wasm), as a page
// imports it. Every scenario runs, the browser-only ones (localStorage
// across reloads, corrupted entries) included, each as its own test, in one
// page of one browser.
import assert from "node:assert/strict";
import { mkdtempSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { after, before, test } from "node:test";
import { fileURLToPath } from "node:url";

import { launchChromium } from "../support/browser.mjs";
import { serveStatic } from "../support/pages.mjs";
import { scenarios } from "./scenarios.mjs";

const here = path.dirname(fileURLToPath(import.meta.url));
const pkg = path.resolve(here, "../../crates/client/pkg");

let site, server, browser, page;
const pageErrors = [];

before(async () => {
  // One origin with the package under /pkg/ and this folder under /sdk/.
  site = mkdtempSync(path.join(tmpdir(), "onejob-sdk-page-"));
  symlinkSync(pkg, path.join(site, "pkg"));
  symlinkSync(here, path.join(site, "sdk"));
  writeFileSync(path.join(site, "index.html"), "<!doctype html><html><body></body></html>");
  server = await serveStatic(site);
  // serveStatic types .js, .html and .wasm; module scripts named .mjs must
  // be served as JavaScript too, or the browser refuses to run them.
  const [files] = server.listeners("request");
  server.removeAllListeners("request").on("request", (req, res) => {
    if (new URL(req.url, "http://x").pathname.endsWith(".mjs")) {
      const writeHead = res.writeHead.bind(res);
      res.writeHead = (status, headers) =>
        writeHead(status, status === 200 ? { ...headers, "Content-Type": "text/javascript" } : headers);
    }
    return files(req, res);
  });

  browser = await launchChromium();
  page = await browser.newPage();
  page.on("pageerror", (error) => pageErrors.push(error.message));
  await page.goto(`http://127.0.0.1:${server.address().port}/`);
  await page.evaluate(async () => {
    const sdk = await import("/pkg/index.js");
    await (sdk.ready ?? Promise.resolve());
    const harness = await import("/sdk/stub.mjs");
    const { scenarios } = await import("/sdk/scenarios.mjs");
    harness.useSdk(sdk);
    globalThis.__sdkTests = { harness, scenarios };
  });
});

after(async () => {
  await browser?.close();
  await new Promise((resolve) => (server ? server.close(resolve) : resolve()));
  if (site) rmSync(site, { recursive: true, force: true }); // the links only, not what they point to
});

for (const scenario of scenarios) {
  test(scenario.name, { timeout: 30_000 }, async (t) => {
    pageErrors.length = 0;
    try {
      const logs = await page.evaluate(async (name) => {
        const { harness, scenarios } = globalThis.__sdkTests;
        harness.script([]);
        return harness.runScenario(scenarios.find((s) => s.name === name));
      }, scenario.name);
      for (const line of logs) t.diagnostic(line);
    } finally {
      for (const message of pageErrors) t.diagnostic(`page error: ${message}`);
    }
  });
}

// The browser entry does not wait for its wasm at import: a page that builds a
// client and sends at once must work, and what needs the wasm says so by name.
// The wasm is held back 600 ms so every step below runs before it has loaded.
test("before the wasm has loaded: new OneJob() works at once, requests wait for it, aborts do not", { timeout: 30_000 }, async () => {
  const fresh = await browser.newPage();
  try {
    await fresh.route("**/pkg/onejob_bg.wasm", async (route) => {
      await new Promise((resolve) => setTimeout(resolve, 600));
      await route.continue();
    });
    await fresh.goto(`http://127.0.0.1:${server.address().port}/`);
    const seen = await fresh.evaluate(async () => {
      const started = performance.now();
      const { OneJob, fingerprint, ready } = await import("/pkg/index.js");
      const importMs = performance.now() - started;
      // (Stubbed after the import, which has already asked the real fetch for the wasm.)
      const { script, calls } = await import("/sdk/stub.mjs");
      script([{ status: 200, delayMs: 50 }]);
      const errorName = (f) => {
        try {
          f();
          return "none";
        } catch (error) {
          return error.name;
        }
      };
      const oj = new OneJob({ endpoint: "https://gateway.test", storage: "memory", retry: { baseMs: 1, capMs: 5 } });
      const beforeReady = {
        fingerprint: errorName(() => fingerprint("POST", "https://gateway.test/v1/x", "{}")),
        intents: errorName(() => oj.intents()),
        badOption: errorName(() => new OneJob({ storage: "disk" })),
        storage: oj.storage,
      };
      // A policy only core can judge (capMs below baseMs) is accepted now and refused by the first request.
      const refused = new OneJob({ endpoint: "https://gateway.test", retry: { baseMs: 100, capMs: 10 } })
        .fetch("/v1/x", { method: "POST", body: "{}" })
        .then(() => "sent", (error) => error.name);
      const post = (signal) =>
        oj.fetch("/v1/chat/completions", { method: "POST", body: '{"q":1}', signal }, { intent: "early" });
      const clicks = Array.from({ length: 5 }, () => post());
      const controller = new AbortController();
      const abortedAt = performance.now();
      const aborted = post(controller.signal).then(() => "resolved", (error) => error.name);
      controller.abort();
      const abortResult = await aborted;
      const abortMs = performance.now() - abortedAt;
      const callsBeforeReady = calls().length;
      await ready;
      const statuses = (await Promise.all(clicks)).map((r) => r.status);
      return {
        importMs, beforeReady, callsBeforeReady, abortResult, abortMs, statuses,
        calls: calls().length, refused: await refused,
        afterReady: fingerprint("POST", "https://gateway.test/v1/x", "{}").length,
      };
    });
    assert.ok(seen.importMs < 500, `import waited for the wasm (${seen.importMs} ms)`);
    assert.deepEqual(seen.beforeReady, { fingerprint: "OneJobError", intents: "OneJobError", badOption: "OneJobConfigError", storage: "memory" });
    assert.equal(seen.callsBeforeReady, 0);
    assert.equal(seen.abortResult, "AbortError");
    assert.ok(seen.abortMs < 100, `the abort took ${seen.abortMs} ms`);
    assert.deepEqual(seen.statuses, [200, 200, 200, 200, 200]);
    assert.equal(seen.calls, 1, "five early clicks joined one request");
    assert.equal(seen.refused, "OneJobConfigError");
    assert.equal(seen.afterReady, 64);
  } finally {
    await fresh.close();
  }
});

// A wasm that could not be loaded (the network was down, say) is loaded again
// by the next request, not given up on until a reload.
test("a failed wasm load is tried again by the next request", { timeout: 30_000 }, async () => {
  const fresh = await browser.newPage();
  try {
    let wasmRequests = 0;
    await fresh.route("**/pkg/onejob_bg.wasm", async (route) => {
      wasmRequests += 1;
      if (wasmRequests === 1) await route.fulfill({ status: 503, body: "down" });
      else await route.continue();
    });
    await fresh.goto(`http://127.0.0.1:${server.address().port}/`);
    const seen = await fresh.evaluate(async () => {
      const { OneJob, fingerprint, ready } = await import("/pkg/index.js");
      const { script, calls } = await import("/sdk/stub.mjs");
      const realFetch = globalThis.fetch;
      script([{ status: 200 }]);
      // The stub answers the requests; the wasm still comes from the server.
      const stub = globalThis.fetch;
      globalThis.fetch = (url, init) => (String(url).endsWith(".wasm") ? realFetch(url, init) : stub(url, init));
      const readyError = await ready.then(() => "loaded", (error) => error.name);
      let fingerprintError = "none";
      try {
        fingerprint("POST", "https://gateway.test/v1/x", "{}");
      } catch (error) {
        fingerprintError = error.name;
      }
      const oj = new OneJob({ endpoint: "https://gateway.test", storage: "memory" });
      const response = await oj.fetch("/v1/x", { method: "POST", body: "{}" });
      return { readyError, fingerprintError, status: response.status, calls: calls().length, after: fingerprint("POST", "https://gateway.test/v1/x", "{}").length };
    });
    assert.deepEqual(seen, { readyError: "OneJobError", fingerprintError: "OneJobError", status: 200, calls: 1, after: 64 });
    assert.equal(wasmRequests, 2);
  } finally {
    await fresh.close();
  }
});

// A server that sends the wasm as another type than application/wasm (some
// static servers do) cannot have it compiled while it streams in; the browser
// entry then compiles it once it has all come.
test("a wasm served as another type than application/wasm still loads", { timeout: 30_000 }, async () => {
  const fresh = await browser.newPage();
  try {
    const types = [];
    await fresh.route("**/pkg/onejob_bg.wasm", async (route) => {
      const response = await route.fetch();
      types.push(response.headers()["content-type"]);
      await route.fulfill({ response, headers: { ...response.headers(), "content-type": "application/octet-stream" } });
    });
    await fresh.goto(`http://127.0.0.1:${server.address().port}/`);
    const seen = await fresh.evaluate(async () => {
      // The streaming compile is tried first, and refuses the type.
      const streaming = WebAssembly.instantiateStreaming;
      let refused = "not refused";
      WebAssembly.instantiateStreaming = (...args) =>
        streaming.apply(WebAssembly, args).catch((error) => {
          refused = error.name;
          throw error;
        });
      const { fingerprint, ready } = await import("/pkg/index.js");
      const readyError = await ready.then(() => "loaded", (error) => `${error.name}: ${error.message}`);
      return { refused, readyError, length: fingerprint("POST", "https://gateway.test/v1/x", "{}").length };
    });
    assert.deepEqual(seen, { refused: "TypeError", readyError: "loaded", length: 64 });
    assert.deepEqual(types, ["application/wasm"], "served once, by a server that said application/wasm");
  } finally {
    await fresh.close();
  }
});
