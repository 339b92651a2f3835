// The SDK scenarios (scenarios.mjs) in headless Chromium, against the built
// package's browser entry (pkg/index.js, which fetches its wasm), as a page
// imports it. Every scenario runs, the browser-only ones (localStorage
// across reloads, corrupted entries) included, each as its own test, in one
// page of one browser.
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
