#!/usr/bin/env node
// The import graph of onejob-core's top-level modules, from the sources:
// every `crate::NAME` outside a comment in crates/core/src/NAME.rs or
// crates/core/src/NAME/** is an edge from that module to NAME (doc links
// such as [`crate::classify`] are comments, and do not count).
//
//   node scripts/core-graph.mjs          the edges, the cycles, the layer check
//   node scripts/core-graph.mjs --dot    the graph in Graphviz's dot
//
// The layer check reads the list in lib.rs's module doc (the lines under
// "## Layers": "- L0 `a`, `b`: …"): a module may import only modules of a
// lower layer, or of its own layer listed before it. Exits 1 on a cycle or
// a layering breach.

import { readdirSync, readFileSync, statSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

const src = path.join(path.dirname(fileURLToPath(import.meta.url)), "..", "crates", "core", "src");

function files(dir) {
  return readdirSync(dir).flatMap((name) => {
    const full = path.join(dir, name);
    return statSync(full).isDirectory() ? files(full) : name.endsWith(".rs") ? [full] : [];
  });
}

/// The code of a Rust file without its comments (line comments, doc
/// comments and block comments; strings are left as they are).
function code(text) {
  return text.replace(/\/\*[\s\S]*?\*\//g, "").replace(/\/\/.*$/gm, "");
}

const modules = new Map(); // name → set of the modules it imports
for (const entry of readdirSync(src)) {
  const full = path.join(src, entry);
  const name = entry.replace(/\.rs$/, "");
  if (name === "lib" || name === "main") continue;
  const set = modules.get(name) ?? new Set();
  const sources = statSync(full).isDirectory() ? files(full) : [full];
  for (const file of sources) {
    for (const [, used] of code(readFileSync(file, "utf8")).matchAll(/\bcrate::([a-z_][a-z0-9_]*)/g)) {
      if (used !== name) set.add(used);
    }
  }
  modules.set(name, set);
}

// Tarjan's strongly connected components: a component of more than one
// module is a cycle.
const index = new Map();
const low = new Map();
const stack = [];
const onStack = new Set();
const cycles = [];
let next = 0;
function visit(v) {
  index.set(v, next);
  low.set(v, next);
  next += 1;
  stack.push(v);
  onStack.add(v);
  for (const w of modules.get(v) ?? []) {
    if (!modules.has(w)) continue;
    if (!index.has(w)) {
      visit(w);
      low.set(v, Math.min(low.get(v), low.get(w)));
    } else if (onStack.has(w)) {
      low.set(v, Math.min(low.get(v), index.get(w)));
    }
  }
  if (low.get(v) === index.get(v)) {
    const component = [];
    let w;
    do {
      w = stack.pop();
      onStack.delete(w);
      component.push(w);
    } while (w !== v);
    if (component.length > 1) cycles.push(component.sort());
  }
}
for (const v of [...modules.keys()].sort()) if (!index.has(v)) visit(v);

if (process.argv.includes("--dot")) {
  console.log("digraph core {");
  for (const [from, to] of [...modules].sort()) for (const t of [...to].sort()) console.log(`  ${from} -> ${t};`);
  console.log("}");
  process.exit(0);
}

for (const [from, to] of [...modules].sort(([a], [b]) => a.localeCompare(b))) {
  console.log(`${from} → ${[...to].sort().join(", ") || "(nothing)"}`);
}

let failed = false;
for (const cycle of cycles) {
  console.log(`cycle: {${cycle.join(", ")}}`);
  failed = true;
}

// The layers, as lib.rs lists them.
const lib = readFileSync(path.join(src, "lib.rs"), "utf8");
const layersAt = lib.indexOf("//! ## Layers");
if (layersAt < 0) {
  console.log("lib.rs lists no layers (\"//! ## Layers\")");
  process.exit(failed ? 1 : 0);
}
const order = new Map(); // module → [layer, position]
let position = 0;
for (const line of lib.slice(layersAt).split("\n").slice(1)) {
  if (!line.startsWith("//!")) break;
  const layer = line.match(/^\/\/! - L(\d+)/);
  if (!layer) continue;
  const head = line.split(":")[0];
  for (const [, name] of head.matchAll(/`([a-z_][a-z0-9_]*)`/g)) order.set(name, [Number(layer[1]), position++]);
}
for (const name of modules.keys()) {
  if (!order.has(name)) {
    console.log(`not in lib.rs's layers: ${name}`);
    failed = true;
  }
}
for (const [from, to] of modules) {
  for (const t of to) {
    if (!order.has(from) || !order.has(t)) continue;
    const [fromLayer, fromAt] = order.get(from);
    const [toLayer, toAt] = order.get(t);
    if (toLayer > fromLayer || (toLayer === fromLayer && toAt > fromAt)) {
      console.log(`layering: ${from} (L${fromLayer}) imports ${t} (L${toLayer}), listed after it`);
      failed = true;
    }
  }
}
if (!failed) console.log(`no cycle; every import goes to a module listed before it (${modules.size} modules)`);
process.exit(failed ? 1 : 0);
