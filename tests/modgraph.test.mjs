// The module-graph gate (scripts/modgraph.mjs): the edge has no module
// cycle and no import outside its may-import table; the core has no cycle
// and no folder importing one listed after it (CORE_ORDER). And the gate
// itself: a cycle, a forbidden import or a module with no row fails it, so it cannot pass by
// reading nothing.
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { after, test } from "node:test";
import { fileURLToPath } from "node:url";

import { CORE_ORDER, CORE_RULES, EDGE_EXCEPTIONS, EDGE_RULES, check, scanFile, stripRust } from "../scripts/modgraph.mjs";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const script = path.join(root, "scripts/modgraph.mjs");
const temps = [];

after(() => {
  for (const dir of temps) rmSync(dir, { recursive: true, force: true });
});

// Runs the checker with `args`; its exit status and output.
function modgraph(...args) {
  const run = spawnSync(process.execPath, [script, ...args], { cwd: root, encoding: "utf8" });
  return { status: run.status, out: run.stdout + run.stderr };
}

// A crate's src/ in a temp dir: `files` maps a path to its text.
function crate(files) {
  const dir = mkdtempSync(path.join(tmpdir(), "modgraph-"));
  temps.push(dir);
  const src = path.join(dir, "src");
  for (const [file, text] of Object.entries(files)) {
    mkdirSync(path.dirname(path.join(src, file)), { recursive: true });
    writeFileSync(path.join(src, file), text);
  }
  return src;
}

test("the edge: no module cycle, every import in its table", () => {
  const { status, out } = modgraph("--crate", "edge", "--graph");
  console.log(out);
  assert.equal(status, 0, out);
  assert.match(out, /ok: no cycle/);
  assert.match(out, /ok: every import is in the may-import table/);
  // The table covers every folder: no module was left out of the check.
  const result = check(path.join(root, "crates/edge/src"), EDGE_RULES);
  assert.deepEqual(result.modules.filter((m) => !(m in EDGE_RULES)), []);
  assert.ok(result.edges.length > 20, `only ${result.edges.length} edges read`);
});

test("the core: no module cycle, every folder imports only folders above it (CORE_ORDER, lib.rs's map)", () => {
  const { status, out } = modgraph("--crate", "core", "--graph");
  console.log(out);
  assert.equal(status, 0, out);
  assert.match(out, /ok: no cycle/);
  assert.match(out, /ok: every import is in the may-import table/);
  const result = check(path.join(root, "crates/core/src"), CORE_RULES);
  assert.deepEqual(result.modules.filter((m) => !(m in CORE_RULES)), []);
  assert.ok(result.edges.length > 40, `only ${result.edges.length} edges read`);
  // The order is lib.rs's: its map lists the folders in the same order.
  const lib = readFileSync(path.join(root, "crates/core/src/lib.rs"), "utf8");
  const listed = [...lib.matchAll(/^\/\/! \| \[`([a-z_]+)`\]/gm)].map((m) => m[1]);
  assert.deepEqual(listed, CORE_ORDER);
  assert.ok(result.modules.length <= 16, `core's root has ${result.modules.length} entries`);
});

test("the core's order fails an import of a folder listed below the importer", () => {
  const src = crate({
    "lib.rs": "mod wire;\nmod identity;\n",
    "wire.rs": "use crate::identity::Key;\n",
    "identity.rs": "pub struct Key;\n",
  });
  const { status, out } = modgraph("--src", src, "--rules", "core");
  assert.equal(status, 1, out);
  assert.match(out, /error: wire → identity is not in the may-import table/);
});

test("a cycle fails the check, naming each edge and the file:line that makes it", () => {
  const src = crate({
    "lib.rs": "mod a;\nmod b;\n",
    "a.rs": "//! A.\n\nuse crate::b::Bee;\n\npub struct Ay;\n",
    "b/mod.rs": "mod inner;\n",
    "b/inner.rs": "pub struct Bee;\n\nfn f() -> crate::a::Ay {\n    crate::a::Ay\n}\n",
  });
  const { status, out } = modgraph("--src", src);
  assert.equal(status, 1, out);
  assert.match(out, /error: cycle: \{a, b\}: a → b → a/);
  assert.match(out, /a → b {2}\S*a\.rs:3/);
  assert.match(out, /b → a {2}\S*b[/\\]inner\.rs:3/);
  assert.match(out, /modgraph: FAILED/);
});

test("an import outside the table fails, and so does a module without a row", () => {
  const src = crate({
    "lib.rs": "mod http;\nmod ledger;\nmod extra;\n",
    "http.rs": "// The response helpers.\nuse crate::ledger::Store;\n",
    "ledger/mod.rs": "mod store;\npub use store::Store;\nuse crate::http;\n",
    "ledger/store.rs": "pub struct Store;\n",
    "extra.rs": "\n",
  });
  const { status, out } = modgraph("--src", src, "--rules", "edge");
  assert.equal(status, 1, out);
  assert.match(out, /error: http → ledger is not in the may-import table/);
  assert.match(out, /http\.rs:2/);
  assert.match(out, /error: module extra has no row in the may-import table/);
  assert.doesNotMatch(out, /ledger → http is not/);
});

test("no exception is left: an env file importing the demo fails, config.rs too (EffectTarget::Inbox removed the last one)", () => {
  assert.deepEqual(EDGE_EXCEPTIONS, []);
  const src = crate({
    "lib.rs": "mod demo;\nmod env;\n",
    "demo.rs": "pub const INBOX_URL: &str = \"demo:inbox\";\n",
    "env/mod.rs": "mod clock;\nmod config;\n",
    "env/config.rs": "fn ok(url: &str) -> bool {\n    url == crate::demo::INBOX_URL\n}\n",
    "env/clock.rs": "use crate::demo::INBOX_URL;\n",
  });
  const { status, out } = modgraph("--src", src, "--rules", "edge");
  assert.equal(status, 1, out);
  assert.match(out, /error: env → demo is not in the may-import table/);
  assert.match(out, /env[/\\]clock\.rs:1/);
  assert.match(out, /env[/\\]config\.rs:2/);
});

test("the reader: comments and strings skipped, use groups and super:: paths followed", () => {
  assert.equal(stripRust('let s = "crate::b"; // crate::c\n/* crate::d /* nested */ */ x'), `let s = "        ";            \n                            x`);
  assert.equal(stripRust("let c = '\"'; let l: &'a str = r#\"crate::x\"#;"), "let c = ' '; let l: &'a str = r#\"        \"#;");
  const scanned = scanFile(
    [
      "use crate::{b, c::D, self as _};",
      "/// [`crate::e`] in a doc link is no import.",
      "mod tests {",
      "    use super::*;",
      "    use super::super::f::G;",
      "}",
      "macro_rules! m { () => { $crate::h::I } }",
      "mod child;",
    ].join("\n"),
    ["a", "x"],
  );
  assert.deepEqual(
    scanned.uses.map((u) => `${u.target}:${u.line}`),
    ["b:1", "c:1", "a:4", "a:5"],
  );
  assert.deepEqual(scanned.declared.map((d) => d.name), ["child"]);
  // super::super from a file two levels down lands in another top-level module.
  const up = scanFile("use super::super::f::G;\n", ["a", "x"]);
  assert.deepEqual(up.uses.map((u) => u.target), ["f"]);
});

test("what would hide edges is an error: a glob of the crate root, a mod with no file", () => {
  const src = crate({ "lib.rs": "mod a;\nmod gone;\n", "a.rs": "use super::*;\n" });
  const result = check(src);
  assert.match(result.problems.join("\n"), /a\.rs:1: a glob import of the crate root/);
  assert.match(result.problems.join("\n"), /lib\.rs:2: mod gone; has no file/);
  assert.equal(modgraph("--src", src).status, 1);
});
