// The static assets' response headers (www/_headers, read by Workers static
// assets under `wrangler dev` too): every file of the operations console —
// its pages, its script, its stylesheet and the shared stylesheet it loads,
// /theme.css — is served with `X-Content-Type-Options: nosniff`, so a
// browser runs or applies it only as the type it is served as. (The
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
