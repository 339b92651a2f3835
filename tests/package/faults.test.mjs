// The worker's builds, as `make build-edge`, `make build-edge-test` and
// `make build-edge-deploy` left them (this test builds nothing): fault
// injection (the cargo feature `faults`, crates/edge/src/env/faults.rs) is
// in the test build only. The production builds — crates/edge/build, what
// wrangler.toml runs under `make dev`, and crates/edge/build-deploy, what
// `make package` packs and a deployment uploads — hold no knob's name, so
// they cannot read one; the test build, which the edge tests that inject
// faults run, reads each.
import assert from "node:assert/strict";
import { existsSync, readFileSync } from "node:fs";
import path from "node:path";
import { test } from "node:test";
import { fileURLToPath } from "node:url";

import { unstable_readConfig } from "wrangler";

import { EDGE_BUILD, EDGE_DEPLOY_BUILD, EDGE_TEST_BUILD, FAULT_KNOBS } from "../support/worker.mjs";

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");

/** A built file's bytes as text (latin1: one character per byte, so a name in the wasm's data is found as it is). */
function built(build, file) {
  const at = path.join(ROOT, build, file);
  assert.ok(existsSync(at), `${at} is missing: run make build-edge build-edge-test build-edge-deploy`);
  return readFileSync(at, "latin1");
}

/** The names an index.js exports (the worker's entry and its Durable Object classes). */
const exported = (js) => [...js.matchAll(/export\s*\{([^}]*)\}/g)].flatMap((m) => m[1].split(",").map((n) => n.trim().split(/\s+as\s+/).pop())).filter(Boolean).sort();

test("the production builds hold no fault-injection knob", () => {
  for (const build of [EDGE_BUILD, EDGE_DEPLOY_BUILD]) {
    for (const file of ["index_bg.wasm", "index.js"]) {
      const text = built(build, file);
      assert.deepEqual(FAULT_KNOBS.filter((knob) => text.includes(knob)), [], `${build}/${file}`);
    }
    // Nor the error a failed-on-purpose send would log.
    assert.ok(!built(build, "index_bg.wasm").includes("failed (QUEUE_SEND"), `${build}: the queue's fault message`);
  }
});

test("the test build reads every knob, and is otherwise the same worker", () => {
  const wasm = built(EDGE_TEST_BUILD, "index_bg.wasm");
  for (const knob of FAULT_KNOBS) assert.ok(wasm.includes(knob), `${EDGE_TEST_BUILD}/index_bg.wasm reads ${knob}`);
  const production = exported(built(EDGE_BUILD, "index.js"));
  assert.ok(["Ledger", "ProviderHealth", "UsageMeter", "QueueCursor", "default"].every((name) => production.includes(name)), production.join(", "));
  assert.deepEqual(exported(built(EDGE_TEST_BUILD, "index.js")), production, "the same entry and Durable Objects");
  assert.deepEqual(exported(built(EDGE_DEPLOY_BUILD, "index.js")), production, "the deployment's build too");
});

test("wrangler.toml (make dev, and every test worker not asking for faults) runs the production build", () => {
  const config = unstable_readConfig({ config: path.join(ROOT, "wrangler.toml") }, { hideWarnings: true });
  assert.equal(path.relative(ROOT, config.main), path.join(EDGE_BUILD, "index.js"));
});
