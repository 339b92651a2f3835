// Every code block of the READMEs runs as written: README.md and the SDK's
// own README (crates/client/js/README.md, which ships in the tarball), each
// block in order, against `make dev`'s worker (wrangler dev with
// dev.vars.example, the built-in demo provider) on free ports, and each
// block's output checked against what the README says it shows.
//
// How a block runs, by its fence's language and the HTML comment on the line
// before it (`<!-- snippet: … -->`):
//
//   ```sh / ```bash      a bash script (`set -eo pipefail`; one shell per block)
//   ```js                a Node module in a fresh app that installed the SDK
//                        from its packed tarball (the official `openai` and
//                        `@anthropic-ai/sdk` are the workspace's copies)
//   snippet: server [NAME=value …]
//                        a JS block started as a Node server with PORT (and
//                        the given variables) in its environment; it must
//                        listen on `process.env.PORT ?? <default>`, and stays
//                        up for the blocks after it
//   snippet: page        a JS block bundled with Vite and run in headless
//                        Chromium, served from the last server's origin (its
//                        paths go to that server)
//   snippet: skip (why)  not run (deploys, placeholders, a picture, a
//                        deployment's configuration): reported as skipped
//                        with its reason
//
// Any other block without a comment fails the test, so a new block is either
// runnable or says why it is not. The blocks' addresses are rewritten to the
// test's own servers: http://127.0.0.1:8787 (`make dev`) to the worker's, a
// server's default port to the one it was given.
//
// What a block shows, checked: in shell, a comment line `# → …` (and `#   …`
// lines continuing it) after commands states their result, parts separated
// by " · ": a status line (`HTTP/1.1 200 OK`, or just `200`), a header
// (`Name: value`), a media type (`application/problem+json`), a JSON body
// (`{"state":"completed",…}`: an object's listed members, an array's listed
// items and then `…` more; `"…"` is any value) or a quoted text the body
// contains. The status and headers are the last curl's of those commands;
// an answer shown without `Idempotent-Replayed` must not be a replay. In
// JavaScript, a comment line `// → …` after a statement is a line the block
// prints (console.log, in a page its console), in order; `…` is any text.
//
// The blocks run twice on the same state, as a second `make dev` (which
// keeps its state for a day) would: a fixed key or ticket id replays, or is
// refused, the second time, and its `# →` lines catch that.
import assert from "node:assert/strict";
import { execFile, spawn } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { readFile } from "node:fs/promises";
import http from "node:http";
import { tmpdir } from "node:os";
import path from "node:path";
import { after, before, describe, test } from "node:test";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";

import { launchChromium } from "../support/browser.mjs";
import { freePort, startWorker } from "../support/harness.mjs";
import { bin, makeApp, run } from "../support/pages.mjs";

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");
const READMES = ["README.md", "crates/client/js/README.md"];
/** Where the READMEs say `make dev` serves. */
const MAKE_DEV_URL = "http://127.0.0.1:8787";
const BLOCK_TIMEOUT_MS = 60_000;

// ---------------------------------------------------------------- reading

/**
 * The fenced code blocks of a Markdown text: { line (1-based, the fence's),
 * lang, code, directive (the `snippet:` comment before it, or null) }.
 */
export function codeBlocks(markdown) {
  const lines = markdown.split("\n");
  const blocks = [];
  for (let i = 0; i < lines.length; i++) {
    const open = lines[i].match(/^(`{3,})\s*([\w-]*)/);
    if (!open) continue;
    const fence = open[1];
    const start = i;
    const body = [];
    for (i++; i < lines.length && !lines[i].startsWith(fence); i++) body.push(lines[i]);
    let before = start - 1;
    while (before >= 0 && lines[before].trim() === "") before--;
    const comment = before >= 0 ? lines[before].match(/^<!--\s*snippet:\s*(.*?)\s*-->\s*$/) : null;
    blocks.push({ line: start + 1, lang: open[2].toLowerCase(), code: body.join("\n"), directive: comment ? comment[1] : null });
  }
  return blocks;
}

/** How a block runs: { kind: "sh" | "node" | "server" | "page" | "skip" | "unmarked", reason?, env? }. */
export function planOf(block) {
  const directive = block.directive;
  if (directive !== null) {
    const skip = directive.match(/^skip\s*\((.+)\)$/);
    if (skip) return { kind: "skip", reason: skip[1] };
    const server = directive.match(/^server((?:\s+[A-Z_][A-Z0-9_]*=\S*)*)$/);
    if (server && block.lang === "js") {
      const env = Object.fromEntries(server[1].trim().split(/\s+/).filter(Boolean).map((pair) => pair.split(/=(.*)/s).slice(0, 2)));
      return { kind: "server", env };
    }
    if (directive === "page" && block.lang === "js") return { kind: "page" };
    return { kind: "unmarked", reason: `unknown snippet comment "${directive}" for a ${block.lang || "plain"} block` };
  }
  if (block.lang === "sh" || block.lang === "bash") return { kind: "sh" };
  if (block.lang === "js" || block.lang === "javascript") return { kind: "node" };
  return { kind: "unmarked", reason: `a ${block.lang || "plain"} block without <!-- snippet: skip (why) -->` };
}

// ---------------------------------------------------------------- checking

const ANY = "\u0000any";
const REST = "\u0000rest";

/** A README's JSON shape (`{"a":1,…}`, `"…"`, `[x, …]`) as a value for `matchesShape`. */
export function parseShape(text) {
  const json = text
    .replace(/"…"/g, JSON.stringify(ANY))
    .replace(/\{\s*…[^{}]*?\}/g, "{}")
    .replace(/,\s*…\s*\}/g, "}")
    .replace(/\[\s*…\s*\]/g, `[${JSON.stringify(REST)}]`)
    .replace(/,\s*…\s*\]/g, `,${JSON.stringify(REST)}]`);
  return JSON.parse(json);
}

/** Whether `actual` has what `shape` lists (objects: those members; arrays: those items, then REST for more). */
export function matchesShape(actual, shape) {
  if (shape === ANY) return true;
  if (Array.isArray(shape)) {
    if (!Array.isArray(actual)) return false;
    const open = shape.at(-1) === REST;
    const items = open ? shape.slice(0, -1) : shape;
    if (open ? actual.length < items.length : actual.length !== items.length) return false;
    return items.every((item, i) => matchesShape(actual[i], item));
  }
  if (shape !== null && typeof shape === "object") {
    if (actual === null || typeof actual !== "object" || Array.isArray(actual)) return false;
    return Object.entries(shape).every(([name, value]) => name in actual && matchesShape(actual[name], value));
  }
  return actual === shape;
}

/** Splits a `# →` expectation into its " · " parts, JSON kept whole. */
function partsOf(text) {
  const parts = [];
  let depth = 0;
  let inString = false;
  let current = "";
  for (let i = 0; i < text.length; i++) {
    const c = text[i];
    if (inString) {
      if (c === "\\") {
        current += c + (text[i + 1] ?? "");
        i++;
        continue;
      }
      if (c === '"') inString = false;
    } else if (c === '"') inString = true;
    else if (c === "{" || c === "[") depth++;
    else if (c === "}" || c === "]") depth--;
    if (depth === 0 && !inString && text.startsWith(" · ", i)) {
      parts.push(current.trim());
      current = "";
      i += 2;
      continue;
    }
    current += c;
  }
  if (current.trim()) parts.push(current.trim());
  return parts;
}

/** The last response in a `curl -D` header dump: { status, reason, headers (lower-cased names) }. */
function lastResponse(dump) {
  const blocks = dump.split(/\r?\n\r?\n/).filter((b) => b.startsWith("HTTP/"));
  const last = blocks.at(-1);
  if (!last) return null;
  const [statusLine, ...lines] = last.split(/\r?\n/);
  const [, status, reason = ""] = statusLine.match(/^HTTP\/[\d.]+ (\d{3}) ?(.*)$/);
  const headers = {};
  for (const line of lines) {
    const at = line.indexOf(":");
    if (at > 0) headers[line.slice(0, at).trim().toLowerCase()] = line.slice(at + 1).trim();
  }
  return { status: Number(status), reason, headers };
}

/**
 * Checks one `# →` expectation against a step's stdout and its last
 * response (null if no curl ran); returns the problems (empty: it holds).
 */
export function checkShellStep(expectation, stdout, response) {
  const problems = [];
  // What curl printed: with -i, the headers come first.
  const body = stdout.replace(/^(HTTP\/[\d.]+ \d{3}[^]*?\r?\n\r?\n)+/, "").trim();
  let statusShown = false;
  let replayShown = false;
  const needResponse = (what) => {
    if (!response) problems.push(`${what}: no curl response in this step`);
    return response;
  };
  for (let part of partsOf(expectation)) {
    const status = part.match(/^(?:HTTP\/[\d.]+ )?(\d{3})(?: ([A-Z][A-Za-z -]*))?(?:\s+([{[].*))?$/s);
    if (status) {
      statusShown = true;
      const r = needResponse(part);
      if (r && r.status !== Number(status[1])) problems.push(`status ${r.status}, the README shows ${status[1]}`);
      if (r && status[2] && r.reason && r.reason.toLowerCase() !== status[2].toLowerCase()) problems.push(`reason "${r.reason}", the README shows "${status[2]}"`);
      if (!status[3]) continue;
      part = status[3];
    }
    if (/^[{[]/.test(part)) {
      let shape;
      try {
        shape = parseShape(part);
      } catch (error) {
        problems.push(`cannot read the JSON the README shows (${error.message}): ${part}`);
        continue;
      }
      let actual;
      try {
        actual = JSON.parse(body);
      } catch {
        problems.push(`the body is not JSON: ${body.slice(0, 300)}`);
        continue;
      }
      if (!matchesShape(actual, shape)) problems.push(`the body ${JSON.stringify(actual)} lacks what the README shows: ${part}`);
    } else if (/^"[^]*"$/.test(part)) {
      const text = JSON.parse(part);
      if (!body.includes(text)) problems.push(`the body lacks ${part}: ${body.slice(0, 300)}`);
    } else if (/^[a-z]+\/[\w.+-]+$/.test(part)) {
      const r = needResponse(part);
      const type = r?.headers["content-type"] ?? "";
      if (r && type.split(";")[0].trim() !== part) problems.push(`Content-Type "${type}", the README shows ${part}`);
    } else if (/^[A-Za-z][\w-]*: /.test(part)) {
      const [name, value] = part.split(/: (.*)/s);
      if (name.toLowerCase() === "idempotent-replayed") replayShown = true;
      const r = needResponse(part);
      const actual = r?.headers[name.toLowerCase()];
      if (r && actual !== value) problems.push(`${name}: ${actual ?? "(absent)"}, the README shows ${value}`);
    } else {
      problems.push(`cannot read this part of a # → line: "${part}"`);
    }
  }
  if (statusShown && !replayShown && response?.headers["idempotent-replayed"]) {
    problems.push("the answer is a replay (Idempotent-Replayed: true), the README shows a new one: a key or id that an earlier run already used?");
  }
  return problems;
}

/** `// → …` lines of a JS block: the lines it prints, in order (`…`: any text). */
const printedLines = (code) => [...code.matchAll(/^\s*\/\/ → (.*)$/gm)].map((m) => m[1].trim());

/** Checks that `output`'s lines contain each of `expected` (`…` any text), in order. */
export function checkPrinted(expected, output) {
  const lines = output.split("\n").map((l) => l.trim());
  let at = 0;
  for (const want of expected) {
    const pattern = new RegExp(`^${want.split("…").map((s) => s.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")).join(".*")}$`);
    const found = lines.findIndex((line, i) => i >= at && pattern.test(line));
    if (found < 0) return [`never printed "${want}" (after line ${at}) in:\n${output}`];
    at = found + 1;
  }
  return [];
}

// ---------------------------------------------------------------- running

const execFileAsync = promisify(execFile);

/**
 * A shell block as a script: each `# →` line (with its `#   ` continuation
 * lines) becomes a step marker; `curl` dumps each response's headers for the
 * checks. Returns { script, expectations }.
 */
export function shellScript(code, dir) {
  const expectations = [];
  const out = [
    "set -eo pipefail",
    `__dir=${JSON.stringify(dir)}`,
    '__headers="$__dir/headers.0"; : > "$__headers"',
    'curl() { command curl -D "$__headers" "$@"; }',
  ];
  const lines = code.split("\n");
  for (let i = 0; i < lines.length; i++) {
    // A result shown in a comment of another form would go unchecked.
    if (/^\s*#\s+(HTTP\/[\d.]+ \d{3}|\d{3} [{[])/.test(lines[i]) && !/^\s*# → /.test(lines[i])) {
      throw new Error(`a result shown as "${lines[i].trim()}": write it as "# → …" so that it is checked`);
    }
    const expect = lines[i].match(/^\s*# → (.*)$/);
    if (!expect) {
      out.push(lines[i]);
      continue;
    }
    let text = expect[1];
    while (i + 1 < lines.length && /^\s*# {3}\S/.test(lines[i + 1])) text += ` ${lines[++i].replace(/^\s*# {3}/, "")}`;
    const n = expectations.length;
    expectations.push(text.trim());
    out.push(`printf '\\n<<<onejob-step ${n}>>>\\n'; __headers="$__dir/headers.${n + 1}"; : > "$__headers"`);
  }
  return { script: out.join("\n") + "\n", expectations };
}

async function runShell(code, { cwd, env }) {
  const dir = mkdtempSync(path.join(tmpdir(), "onejob-snippet-"));
  try {
    const { script, expectations } = shellScript(code, dir);
    const file = path.join(dir, "block.sh");
    writeFileSync(file, script);
    let stdout;
    try {
      ({ stdout } = await execFileAsync("bash", [file], { cwd, env, timeout: BLOCK_TIMEOUT_MS, maxBuffer: 16 << 20 }));
    } catch (error) {
      assert.fail(`the block failed (${error.code ?? error.signal}):\n${error.stdout}\n${error.stderr}`);
    }
    const segments = stdout.split(/\n<<<onejob-step \d+>>>\n/);
    const problems = [];
    expectations.forEach((expectation, n) => {
      const dumpFile = path.join(dir, `headers.${n}`);
      const dump = existsSync(dumpFile) ? readFileSync(dumpFile, "utf8") : "";
      for (const problem of checkShellStep(expectation, segments[n] ?? "", lastResponse(dump))) problems.push(`# → ${expectation}\n  ${problem}`);
    });
    assert.deepEqual(problems, [], `\n${problems.join("\n")}\n--- output:\n${stdout}`);
    return { expectations: expectations.length };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

async function runNode(code, { cwd, env, name }) {
  const file = path.join(cwd, `${name}.mjs`);
  writeFileSync(file, code);
  let stdout;
  try {
    ({ stdout } = await execFileAsync(process.execPath, [file], { cwd, env, timeout: BLOCK_TIMEOUT_MS, maxBuffer: 16 << 20 }));
  } catch (error) {
    assert.fail(`the block failed (${error.code ?? error.signal}):\n${error.stdout}\n${error.stderr}`);
  }
  const problems = checkPrinted(printedLines(code), stdout);
  assert.deepEqual(problems, [], problems.join("\n"));
}

/** Starts a server block with PORT; resolves once the port accepts connections. */
async function startServer(code, { cwd, env, name }) {
  const file = path.join(cwd, `${name}.mjs`);
  writeFileSync(file, code);
  const port = await freePort();
  const child = spawn(process.execPath, [file], { cwd, env: { ...env, PORT: String(port) }, stdio: ["ignore", "pipe", "pipe"] });
  let output = "";
  child.stdout.on("data", (d) => (output += d));
  child.stderr.on("data", (d) => (output += d));
  const deadline = Date.now() + 15_000;
  for (;;) {
    if (child.exitCode !== null) assert.fail(`the server block exited (${child.exitCode}):\n${output}`);
    const up = await new Promise((resolve) => {
      const req = http.get({ host: "127.0.0.1", port, path: "/" }, (res) => {
        res.resume();
        resolve(true);
      });
      req.on("error", () => resolve(false));
    });
    if (up) break;
    if (Date.now() > deadline) {
      child.kill("SIGKILL");
      assert.fail(`the server block never listened on PORT=${port}:\n${output}`);
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  const defaultPort = code.match(/process\.env\.PORT\s*\?\?\s*(\d+)/)?.[1];
  assert.ok(defaultPort, "a server block listens on process.env.PORT ?? <its default port>");
  return {
    port,
    defaultPort,
    output: () => output,
    stop: () =>
      new Promise((resolve) => {
        if (child.exitCode !== null) return resolve();
        child.once("exit", resolve);
        child.kill("SIGTERM");
      }),
  };
}

/** Bundles a page block with Vite in `app` (once per text); returns its dist folder. */
const pages = new Map();
function buildPageBlock(code, app, name) {
  if (pages.has(code)) return pages.get(code);
  const web = path.join(app, name);
  mkdirSync(web, { recursive: true });
  writeFileSync(path.join(web, "index.html"), `<!doctype html><html><body><script type="module" src="./main.js"></script></body></html>`);
  // The block as it is, imported by a wrapper that reports when it has run.
  writeFileSync(path.join(web, "snippet.js"), code);
  writeFileSync(
    path.join(web, "main.js"),
    `import("./snippet.js").then(() => { document.body.dataset.result = "ok"; }, (error) => { console.log("ERROR " + (error?.stack ?? error)); document.body.dataset.result = "error"; });\n`,
  );
  run(bin("vite"), ["build", "--logLevel", "warn", "--outDir", "dist", "--emptyOutDir"], web);
  const dist = path.join(web, "dist");
  pages.set(code, dist);
  return dist;
}

/** Serves `dist`, and sends every other path to `backend` (a server block's port), as one origin. */
async function serveApp(dist, backend) {
  const server = http.createServer(async (req, res) => {
    const pathname = new URL(req.url, "http://x").pathname.replace(/^\/$/, "/index.html");
    const file = path.join(dist, pathname);
    if (existsSync(file)) {
      const type = { ".html": "text/html", ".js": "text/javascript", ".wasm": "application/wasm" }[path.extname(file)] ?? "application/octet-stream";
      return res.writeHead(200, { "Content-Type": type }).end(await readFile(file));
    }
    if (!backend) return res.writeHead(404).end();
    const upstream = http.request({ host: "127.0.0.1", port: backend, path: req.url, method: req.method, headers: req.headers }, (answer) => {
      res.writeHead(answer.statusCode, answer.headers);
      answer.pipe(res);
    });
    upstream.on("error", () => res.writeHead(502).end());
    req.pipe(upstream);
  });
  await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
  return server;
}

async function runPage(code, { app, name, backend, browser }) {
  const dist = buildPageBlock(code, app, name);
  const server = await serveApp(dist, backend);
  const page = await browser.newPage();
  const printed = [];
  page.on("console", (message) => printed.push(message.text()));
  page.on("pageerror", (error) => printed.push(`ERROR ${error.message}`));
  try {
    await page.goto(`http://localhost:${server.address().port}/`);
    await page.waitForFunction(() => document.body.dataset.result, null, { timeout: BLOCK_TIMEOUT_MS });
    const output = printed.join("\n");
    assert.equal(await page.getAttribute("body", "data-result"), "ok", output);
    const problems = checkPrinted(printedLines(code), output);
    assert.deepEqual(problems, [], problems.join("\n"));
  } finally {
    await page.close();
    server.close();
  }
}

// ---------------------------------------------------------------- the READMEs

describe("the checker itself", () => {
  test("reads a README's JSON shapes: listed members, `…` items, `\"…\"` values", () => {
    const shape = parseShape('{"state":"completed","output":{"category":"billing",…},"effects":[{"name":"record",…},…],"key":"…"}');
    assert.ok(matchesShape({ state: "completed", key: "k", output: { category: "billing", priority: "high" }, effects: [{ name: "record", x: 1 }, {}] }, shape));
    assert.ok(!matchesShape({ state: "completed", key: "k", output: { category: "account" }, effects: [{ name: "record" }] }, shape));
    assert.ok(!matchesShape({ state: "completed", output: { category: "billing" }, effects: [{ name: "record" }] }, shape), "a listed member is required");
    assert.ok(!matchesShape([1, 2], parseShape("[1]")), "an array without … has exactly its items");
  });

  test("fails a step whose answer is not what its # → line shows, or is a replay it does not show", () => {
    const response = { status: 200, reason: "OK", headers: { "content-type": "application/json", "idempotent-replayed": "true", "onejob-attempt": "1" } };
    assert.deepEqual(checkShellStep("HTTP/1.1 200 OK · OneJob-Attempt: 1 · Idempotent-Replayed: true", "", response), []);
    assert.equal(checkShellStep("HTTP/1.1 200 OK · OneJob-Attempt: 1", "", response).length, 1, "an unshown replay");
    // The status, its reason, the media type, and a replay it does not show.
    assert.equal(checkShellStep("HTTP/1.1 422 Unprocessable Entity · application/problem+json", "", response).length, 4);
    assert.equal(checkShellStep('200 {"state":"completed"}', '{"state":"dead"}', { ...response, headers: {} }).length, 1);
    assert.equal(checkShellStep("a sentence", "", response).length, 1, "an unreadable part");
  });

  test("fails a JavaScript block that does not print its // → lines in order", () => {
    assert.deepEqual(checkPrinted(["200 category: …", "done"], "x\n200 category: billing\ndone"), []);
    assert.equal(checkPrinted(["done", "200 …"], "200 x\ndone").length, 1);
  });

  test("refuses a result shown in a shell comment it would not check", () => {
    assert.throws(() => shellScript("curl -i x\n#   HTTP/1.1 200 OK · Idempotent-Replayed: true", "/tmp"), /write it as "# → …"/);
    assert.equal(shellScript("curl -i x\n# → HTTP/1.1 200 OK\n#   · OneJob-Attempt: 1", "/tmp").expectations[0], "HTTP/1.1 200 OK · OneJob-Attempt: 1");
  });

  test("every block is runnable or marked: an unmarked block of another language is refused", () => {
    assert.equal(planOf({ lang: "toml", directive: null }).kind, "unmarked");
    assert.equal(planOf({ lang: "", directive: null }).kind, "unmarked");
    assert.deepEqual(planOf({ lang: "sh", directive: "skip (deploys)" }), { kind: "skip", reason: "deploys" });
    assert.equal(planOf({ lang: "sh", directive: "skip" }).kind, "unmarked", "a skip names its reason");
    assert.deepEqual(planOf({ lang: "js", directive: "server ALERT_SECRET=s" }), { kind: "server", env: { ALERT_SECRET: "s" } });
  });
});

describe("every README snippet runs as written against make dev's worker", () => {
  let worker;
  let persistTo;
  let app;
  let browser;
  before(async () => {
    persistTo = mkdtempSync(path.join(tmpdir(), "onejob-snippets-"));
    // No vars of its own: dev.vars.example over wrangler.toml, as `make dev`.
    worker = await startWorker({ persistTo });
    // The SDK from its packed tarball, the official SDKs the workspace's.
    app = makeApp(["openai", "@anthropic-ai/sdk"]);
    browser = await launchChromium();
  });
  after(async () => {
    await browser?.close();
    await worker?.stop();
    app?.remove();
    if (persistTo) rmSync(persistTo, { recursive: true, force: true });
  });

  const env = () => ({ ...process.env, PATH: `${path.join(ROOT, "node_modules/.bin")}:${process.env.PATH}` });
  const counts = { run: 0, skipped: 0 };

  for (const readme of READMES) {
    const blocks = codeBlocks(readFileSync(path.join(ROOT, readme), "utf8"));
    test(`${readme} has code blocks`, () => assert.ok(blocks.length > 0));
    for (const pass of [1, 2]) {
      const servers = [];
      // Addresses in the blocks, rewritten to the test's servers.
      const rewrite = (code) => {
        let out = code.replaceAll(MAKE_DEV_URL, worker.url);
        for (const server of servers) out = out.replace(new RegExp(`(127\\.0\\.0\\.1|localhost):${server.defaultPort}\\b`, "g"), `127.0.0.1:${server.port}`);
        return out;
      };
      for (const block of blocks) {
        const plan = planOf(block);
        const shown = block.lang || "plain";
        const title = `${readme}:${block.line} (${shown}${plan.kind === "skip" || plan.kind === shown ? "" : `, ${plan.kind}`})${pass === 2 ? ", again on the same state" : ""}`;
        if (plan.kind === "skip") {
          if (pass === 1) {
            counts.skipped++;
            test(title, { skip: plan.reason }, () => {});
          }
          continue;
        }
        test(title, { timeout: BLOCK_TIMEOUT_MS * 2 }, async () => {
          const name = `block-${path.basename(path.dirname(path.join(ROOT, readme)))}-${block.line}`;
          if (plan.kind === "unmarked") assert.fail(`${plan.reason}: make it runnable or mark it <!-- snippet: skip (why) -->`);
          const code = rewrite(block.code);
          if (plan.kind === "sh") await runShell(code, { cwd: app.dir, env: env() });
          else if (plan.kind === "node") await runNode(code, { cwd: app.dir, env: env(), name });
          else if (plan.kind === "server") servers.push(await startServer(code, { cwd: app.dir, env: { ...env(), ...plan.env }, name }));
          else if (plan.kind === "page") await runPage(code, { app: app.dir, name, backend: servers.at(-1)?.port, browser });
          if (pass === 1) counts.run++;
        });
      }
      test(`${readme}: its servers stop${pass === 2 ? " (again)" : ""}`, async () => {
        for (const server of servers.splice(0)) await server.stop();
      });
    }
  }

  test("runs or skips every block", () => {
    console.log(`snippets: ${counts.run} run, ${counts.skipped} skipped (each with its reason)`);
    assert.ok(counts.run > 0);
  });
});
