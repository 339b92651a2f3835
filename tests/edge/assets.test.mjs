// The static assets' response headers (www/_headers, read by Workers static
// assets under `wrangler dev` too): every file of the operations console —
// its pages, its modules, its stylesheet and what it shares with the demo,
// /theme.css and /states.js — is served with `X-Content-Type-Options:
// nosniff`, so a browser runs or applies it only as the type it is served
// as. (The
// console's CSP and Referrer-Policy, and the console under them in a
// browser, are checked by tests/browser/console.test.mjs.)
import assert from "node:assert/strict";
import { after, before, test } from "node:test";

import { startStack } from "../support/harness.mjs";

let stack;
before(async () => {
  stack = await startStack({ upstream: "demo" });
});
after(async () => {
  await stack?.stop();
});

test("every console asset, /theme.css too, is served with X-Content-Type-Options: nosniff", async () => {
  // The files www/admin/index.html loads, and the page itself.
  const page = await (await fetch(`${stack.url}/admin/`)).text();
  const loaded = [...page.matchAll(/(?:href|src)="(\/[^"]+)"/g)].map((m) => m[1]);
  assert.ok(loaded.includes("/theme.css"), `the console loads the shared stylesheet: ${loaded.join(", ")}`);
  for (const route of ["/admin/", ...loaded]) {
    const res = await fetch(`${stack.url}${route}`);
    await res.arrayBuffer();
    assert.equal(res.status, 200, route);
    assert.equal(res.headers.get("x-content-type-options"), "nosniff", route);
  }
  const css = await fetch(`${stack.url}/theme.css`);
  await css.arrayBuffer();
  assert.match(css.headers.get("content-type"), /^text\/css/);
});

test("every module of the console, followed from admin.js through its imports, is JavaScript served with nosniff", async () => {
  const seen = new Set();
  const pending = ["/admin/admin.js"];
  while (pending.length > 0) {
    const route = pending.pop();
    if (seen.has(route)) continue;
    seen.add(route);
    const res = await fetch(`${stack.url}${route}`);
    const text = await res.text();
    assert.equal(res.status, 200, route);
    assert.equal(res.headers.get("x-content-type-options"), "nosniff", route);
    assert.match(res.headers.get("content-type"), /^(text|application)\/javascript/, route);
    for (const [, specifier] of text.matchAll(/^import .* from "(\.{1,2}\/[^"]+)";$/gm)) {
      pending.push(new URL(specifier, `http://console${route}`).pathname);
    }
  }
  assert.ok(seen.has("/admin/views/job.js") && seen.has("/states.js"), [...seen].join(", "));
  // The type check's configuration is in www/ but not served (www/.assetsignore).
  const config = await fetch(`${stack.url}/tsconfig.check.json`);
  await config.arrayBuffer();
  assert.equal(config.status, 404);
});
