// Pages of an app that uses the npm package `onejob`, as a user builds them:
// the built package is packed and installed into a fresh app, the SDKs the
// page needs are the workspace's own copies (no registry), the page is
// bundled with Vite and served from another origin than the gateway's.
//
//   const app = makeApp(["openai"]);
//   const dist = buildPage(app.dir, "page", `import OpenAI from "openai"; …`);
//   const server = await serveStatic(dist);
//   …
//   server.close(); app.remove();
//
// Or, for a page that reports `body[data-result]` when it is done:
//
//   const { page, failed, close } = await openPage(dist, stack.url);
//   …
//   await close();
import { execFileSync } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { readFile } from "node:fs/promises";
import http from "node:http";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";

import { launchChromium } from "./browser.mjs";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");
export const bin = (name) => path.join(root, "node_modules/.bin", name);
export const run = (cmd, args, cwd) => execFileSync(cmd, args, { cwd, encoding: "utf8", stdio: ["ignore", "pipe", "pipe"] });

/** `npm pack` of `dir` into `destination`: { file, files, size }. */
export function pack(dir, destination) {
  const [packed] = JSON.parse(run("npm", ["pack", "--json", "--pack-destination", destination, dir], root));
  return { file: path.join(destination, packed.filename), files: packed.files.map((f) => f.path), size: packed.size };
}

/**
 * A fresh app in a temporary folder (under `parent`, default the system's
 * temporary folder) with the built `onejob` package installed offline from
 * its tarball (it has no dependencies) and the workspace's copies of
 * `packages` (names under node_modules) linked in.
 *
 * The SDKs are linked, not packed and installed: installing a packed SDK
 * makes npm resolve its own dependencies (`ai` → `@ai-sdk/gateway`, the
 * Anthropic SDK → `@opentelemetry/api`), which needs the registry's metadata
 * that a fresh machine's `npm ci` never downloads. Through the link, the
 * bundler finds the SDK and its dependencies where `npm ci` put them.
 * `tarball` installs that file (e.g. `make package`'s) instead of packing.
 * Returns { dir, tarball (onejob's), remove() }.
 */
export function makeApp(packages = [], parent = tmpdir(), { tarball: file } = {}) {
  const dir = mkdtempSync(path.join(parent, "onejob-app-"));
  writeFileSync(path.join(dir, "package.json"), JSON.stringify({ name: "onejob-user-app", private: true, type: "module" }));
  const tarball = file ? { file } : pack(path.join(root, "crates/client/pkg"), dir);
  run("npm", ["install", "--no-audit", "--no-fund", "--offline", tarball.file], dir);
  for (const name of packages) {
    const link = path.join(dir, "node_modules", name);
    mkdirSync(path.dirname(link), { recursive: true });
    symlinkSync(path.join(root, "node_modules", name), link, "dir");
  }
  return { dir, tarball, remove: () => rmSync(dir, { recursive: true, force: true }) };
}

/** Bundles (Vite) `app`/`name` with `main` as its module; returns the built folder. */
export function buildPage(app, name, main) {
  const web = path.join(app, name);
  mkdirSync(web);
  writeFileSync(path.join(web, "index.html"), `<!doctype html><html><body><script type="module" src="./main.js"></script></body></html>`);
  writeFileSync(path.join(web, "main.js"), main);
  run(bin("vite"), ["build", "--logLevel", "warn", "--outDir", "dist", "--emptyOutDir"], web);
  return path.join(web, "dist");
}

/**
 * Serves `dist` on another origin than the gateway's, opens it in a new
 * headless Chromium with `?endpoint=<endpoint>` and waits until the page
 * sets `body[data-result]`. `failed` collects failed requests and page
 * errors (for assertion messages); `close` stops the browser and the server.
 */
export async function openPage(dist, endpoint, { timeout = 30_000 } = {}) {
  const server = await serveStatic(dist);
  const browser = await launchChromium();
  const close = async () => {
    await browser.close();
    server.close();
  };
  try {
    const page = await browser.newPage();
    const failed = [];
    page.on("requestfailed", (r) => failed.push(`${r.url()} ${r.failure()?.errorText}`));
    page.on("pageerror", (e) => failed.push(e.message));
    await page.goto(`http://localhost:${server.address().port}/?endpoint=${encodeURIComponent(endpoint)}`);
    await page.waitForFunction(() => document.body.dataset.result, null, { timeout });
    return { page, failed, close };
  } catch (error) {
    await close();
    throw error;
  }
}

/** Serves a built page's files (another origin than the gateway's). */
export async function serveStatic(dir) {
  const server = http.createServer(async (req, res) => {
    const file = path.join(dir, new URL(req.url, "http://x").pathname.replace(/^\/$/, "/index.html"));
    if (!existsSync(file)) return res.writeHead(404).end();
    const type = { ".html": "text/html", ".js": "text/javascript", ".wasm": "application/wasm" }[path.extname(file)] ?? "application/octet-stream";
    res.writeHead(200, { "Content-Type": type }).end(await readFile(file));
  });
  await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
  return server;
}
