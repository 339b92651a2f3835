// The module graph of the Rust crates, checked: which top-level module of a
// crate imports which, read from the source (no dependency, no build).
//
//   node scripts/modgraph.mjs                  both crates: the edge, then the core
//   node scripts/modgraph.mjs --strict-core    the same, and a core cycle fails too
//   node scripts/modgraph.mjs --crate edge     one crate (edge or core)
//   node scripts/modgraph.mjs --graph          also print what each module imports
//   node scripts/modgraph.mjs --src DIR [--rules edge]   any crate's src/ (the tests),
//                                              with the edge's table and exception
//
// What it reads: the `mod` declarations from `lib.rs` down (so only compiled
// files count, mod.rs or not), and every `crate::…` path in them (`use`
// lines, `use crate::{a, b}` groups and paths inside code), plus `super::`
// paths that climb out of a top-level module. Comments (doc links too) and
// string literals are skipped. A node is a top-level module: for the edge, a
// folder of crates/edge/src (or a one-file module); for the core, each of
// its top-level modules. `lib.rs` itself may import anything.
//
// What fails (exit 1), with the edge and the file:line that makes it:
// - the edge: any cycle, and any import outside EDGE_RULES below (the "may
//   import" table of ARCHITECTURE-REVIEW §5.2); a module with no row fails
//   too, so a new folder states what it may import;
// - both: what would hide an edge (a `mod` with no file, a `#[path]`
//   module, a glob import of the crate root);
// - the core: any cycle, and any import of a folder not above the importer
//   in CORE_ORDER (the folder order of crates/core/src/lib.rs's map).
//
// `make test` runs it as the `modgraph` suite (tests/modgraph.test.mjs), with
// tests that a synthetic cycle and a forbidden import do fail, so this gate
// cannot silently pass.

import { existsSync, readFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");

// What each top-level module of crates/edge/src may import from the crate
// (onejob_core, worker and the other dependencies are always allowed). An
// entry `{ module, only: [files] }` allows the import from those files only.
// Mirrors ARCHITECTURE-REVIEW §5.2; each module's own doc says the same.
export const EDGE_RULES = {
  // Leaf: the edge's own failures, by kind (EdgeError); anyone may import it.
  error: [],
  // Leaf: what a provider answered, and a response as stored.
  answer: ["error"],
  // The only code that reads Env, Date and Math (configuration, bindings,
  // clock, randomness, retry budgets).
  env: ["error"],
  // Building responses and reading request bodies: never env, ledger, upstream, demo.
  http: ["error", "answer"],
  // The Worker ↔ Durable Object protocol and the clients of the objects.
  api: ["error", "env"],
  // The demo provider, its inbox and its routes; imported by upstream,
  // effects and routes only (see who lists it below).
  demo: ["error", "env", "answer", "http"],
  // Calling providers; into the demo one way.
  upstream: ["error", "env", "answer", "demo"],
  // Effect destinations; into the demo one way.
  effects: ["error", "env", "demo"],
  // The operators' D1 index; alerts are signed webhooks (effects::webhook);
  // telemetry (ops/telemetry.rs) reads a job's view through its Ledger's
  // client (api) after the answer, and is called by the gateway (routes).
  ops: ["error", "env", "api", "effects"],
  // The KV cache of finished results.
  cache: ["error", "env", "http"],
  // The queue producer and consumer.
  queue: ["error", "env", "api", "ops"],
  // The Durable Objects other than the Ledger: imported by nothing but lib.rs.
  objects: ["error", "env", "api", "http"],
  // The stateless front: never the Ledger; upstream only for the contract check.
  routes: ["error", "env", "api", "http", "cache", "ops", "demo", { module: "upstream", only: ["routes/check.rs"] }],
  // The Ledger Durable Object and everything private to it.
  ledger: ["error", "env", "api", "http", "answer", "upstream", "effects", "ops", "queue", "cache"],
};

// Edges that break the table on purpose, each with the change that removes it.
export const EDGE_EXCEPTIONS = [];

// The core's folders in layer order, as crates/core/src/lib.rs lists them:
// a folder may import only the folders above it.
export const CORE_ORDER = [
  "wire", "identity", "retry", "upstream", "job_type", "job", "config", "demo",
  "front", "ledger", "operators", "telemetry", "api", "deployment",
];
export const CORE_RULES = Object.fromEntries(CORE_ORDER.map((m, i) => [m, CORE_ORDER.slice(0, i)]));

export const CRATES = {
  edge: { src: "crates/edge/src", rules: EDGE_RULES, exceptions: EDGE_EXCEPTIONS, strict: true },
  core: { src: "crates/core/src", rules: CORE_RULES, exceptions: [], strict: true },
};

// `text` with comments and the contents of string and char literals
// replaced by spaces (newlines kept, so offsets and lines stay).
export function stripRust(text) {
  const out = text.split("");
  const blank = (from, to) => {
    for (let k = from; k < to; k++) if (out[k] !== "\n") out[k] = " ";
  };
  const ident = (c) => c !== undefined && /[A-Za-z0-9_]/.test(c);
  let i = 0;
  while (i < text.length) {
    const c = text[i];
    const next = text[i + 1];
    if (c === "/" && next === "/") {
      const end = text.indexOf("\n", i);
      const stop = end === -1 ? text.length : end;
      blank(i, stop);
      i = stop;
    } else if (c === "/" && next === "*") {
      let depth = 1;
      let j = i + 2;
      while (j < text.length && depth > 0) {
        if (text[j] === "/" && text[j + 1] === "*") (depth++, (j += 2));
        else if (text[j] === "*" && text[j + 1] === "/") (depth--, (j += 2));
        else j++;
      }
      blank(i, j);
      i = j;
    } else if ((c === "r" || (c === "b" && next === "r")) && !ident(text[i - 1]) && /^b?r#*"/.test(text.slice(i, i + 300))) {
      const open = text.slice(i).match(/^b?r(#*)"/);
      const close = `"${open[1]}`;
      const start = i + open[0].length;
      const end = text.indexOf(close, start);
      const stop = end === -1 ? text.length : end;
      blank(start, stop);
      i = stop + close.length;
    } else if (c === '"') {
      let j = i + 1;
      while (j < text.length && text[j] !== '"') j += text[j] === "\\" ? 2 : 1;
      blank(i + 1, j);
      i = j + 1;
    } else if (c === "'") {
      // A char literal ('x', '\n', '\u{1f}', '\''), else a lifetime or label.
      let end = -1;
      if (next === "\\") end = text.indexOf("'", i + 3);
      else {
        const cp = text.codePointAt(i + 1);
        const width = cp !== undefined && cp > 0xffff ? 2 : 1;
        if (text[i + 1 + width] === "'" && next !== "'") end = i + 1 + width;
      }
      if (end !== -1) {
        blank(i + 1, end);
        i = end + 1;
      } else i++;
    } else i++;
  }
  return out.join("");
}

const lineOf = (text, index) => {
  let line = 1;
  for (let k = 0; k < index; k++) if (text.charCodeAt(k) === 10) line++;
  return line;
};

// The first name of each item of a `{…}` use group that starts at `open`,
// and the index after its closing brace.
function useGroup(text, open) {
  let depth = 0;
  let item = "";
  const names = [];
  let j = open;
  for (; j < text.length; j++) {
    const c = text[j];
    if (c === "{") {
      depth++;
      if (depth === 1) continue;
    } else if (c === "}") {
      depth--;
      if (depth === 0) break;
    }
    if (depth === 1 && c === ",") {
      names.push(item);
      item = "";
    } else item += c;
  }
  names.push(item);
  const firsts = names
    .map((n) => n.trim().match(/^([A-Za-z_]\w*)/))
    .filter(Boolean)
    .map((m) => m[1])
    .filter((n) => n !== "self");
  return { names: firsts, end: j + 1 };
}

// One source file: the child modules it declares (`mod x;`) and the crate
// paths it uses, each with the module it is written in (file module plus
// inline `mod x { … }` blocks) and its line.
export function scanFile(text, modPath) {
  const code = stripRust(text);
  const declared = [];
  const uses = [];
  const globs = [];
  const token =
    /(\$)?\b(crate|super)\b((?:\s*::\s*super\b)*)\s*::\s*(\{|\*|[A-Za-z_]\w*)|\bmod\s+([A-Za-z_]\w*)\s*([;{])|[{}]/g;
  let depth = 0;
  const inline = []; // [{ name, depth }]
  const here = () => [...modPath, ...inline.map((m) => m.name)];
  let m;
  while ((m = token.exec(code))) {
    if (m[0] === "{") depth++;
    else if (m[0] === "}") {
      depth--;
      while (inline.length && inline[inline.length - 1].depth > depth) inline.pop();
    } else if (m[5]) {
      if (m[6] === ";") declared.push({ name: m[5], inline: inline.map((x) => x.name), line: lineOf(code, m.index) });
      else {
        depth++;
        inline.push({ name: m[5], depth });
      }
    } else if (m[2]) {
      if (m[1]) continue; // `$crate::` in a macro
      const line = lineOf(code, m.index);
      let base;
      if (m[2] === "crate") base = [];
      else {
        const climbs = 1 + (m[3].match(/super/g) || []).length;
        base = here().slice(0, Math.max(0, here().length - climbs));
      }
      let names = [m[4]];
      if (m[4] === "{") {
        const group = useGroup(code, m.index + m[0].length - 1);
        names = group.names;
        token.lastIndex = group.end;
      }
      for (const name of names) {
        // A glob of the crate root would bring in every module unseen.
        if (name === "*" && base.length === 0) {
          globs.push(line);
          continue;
        }
        // The top-level module the path lands in (none: an item of lib.rs).
        const target = base.length > 0 ? base[0] : name;
        uses.push({ from: here(), target, line });
      }
    }
  }
  return { declared, uses, globs };
}

// The crate under `srcDir`: its files (found through `mod` declarations
// from lib.rs), top-level modules, and the edges between those.
export function analyze(srcDir) {
  const files = [];
  const problems = [];
  const visit = (file, modPath, isModRs) => {
    const text = readFileSync(file, "utf8");
    const scanned = scanFile(text, modPath);
    files.push({ file, modPath, ...scanned });
    for (const m of stripRust(text).matchAll(/#\s*\[\s*path\s*=/g)) {
      problems.push(`${rel(file)}:${lineOf(text, m.index)}: a #[path] module is not followed by this check`);
    }
    for (const line of scanned.globs) {
      problems.push(`${rel(file)}:${line}: a glob import of the crate root hides which modules it uses`);
    }
    const dir = isModRs ? path.dirname(file) : path.join(path.dirname(file), path.basename(file, ".rs"));
    for (const decl of scanned.declared) {
      const at = path.join(dir, ...decl.inline);
      const candidates = [path.join(at, `${decl.name}.rs`), path.join(at, decl.name, "mod.rs")];
      const found = candidates.find((c) => existsSync(c));
      if (!found) {
        problems.push(`${rel(file)}:${decl.line}: mod ${decl.name}; has no file (${candidates.map(rel).join(" or ")})`);
        continue;
      }
      visit(found, [...modPath, ...decl.inline, decl.name], found.endsWith(`${path.sep}mod.rs`));
    }
  };
  const lib = path.join(srcDir, "lib.rs");
  if (!existsSync(lib)) throw new Error(`${rel(lib)} not found`);
  visit(lib, [], true);
  const modules = [...new Set(files.filter((f) => f.modPath.length > 0).map((f) => f.modPath[0]))].sort();
  const edges = [];
  for (const f of files) {
    for (const use of f.uses) {
      const from = use.from[0];
      // lib.rs (the entry points) may import anything; an item of lib.rs is no module.
      if (from === undefined || !modules.includes(use.target) || use.target === from) continue;
      edges.push({ from, to: use.target, file: f.file, line: use.line });
    }
  }
  return { srcDir, files, modules, edges, problems };
}

// Strongly connected components of more than one module, each with one
// cycle through it spelled out as edges (with their first witness).
export function cyclesOf(modules, edges) {
  const next = new Map(modules.map((m) => [m, new Set()]));
  for (const e of edges) next.get(e.from).add(e.to);
  let index = 0;
  const idx = new Map();
  const low = new Map();
  const stack = [];
  const onStack = new Set();
  const sccs = [];
  const strong = (v) => {
    idx.set(v, index);
    low.set(v, index++);
    stack.push(v);
    onStack.add(v);
    for (const w of [...next.get(v)].sort()) {
      if (!idx.has(w)) {
        strong(w);
        low.set(v, Math.min(low.get(v), low.get(w)));
      } else if (onStack.has(w)) low.set(v, Math.min(low.get(v), idx.get(w)));
    }
    if (low.get(v) === idx.get(v)) {
      const scc = [];
      let w;
      do {
        w = stack.pop();
        onStack.delete(w);
        scc.push(w);
      } while (w !== v);
      if (scc.length > 1) sccs.push(scc.sort());
    }
  };
  for (const m of modules) if (!idx.has(m)) strong(m);
  return sccs.map((scc) => {
    // The shortest cycle from the SCC's first module back to itself.
    const start = scc[0];
    const prev = new Map([[start, null]]);
    const queue = [start];
    let last = null;
    while (queue.length && last === null) {
      const v = queue.shift();
      for (const w of [...next.get(v)].sort()) {
        if (!scc.includes(w)) continue;
        if (w === start) {
          last = v;
          break;
        }
        if (!prev.has(w)) {
          prev.set(w, v);
          queue.push(w);
        }
      }
    }
    const walk = [start];
    for (let v = last; v !== start; v = prev.get(v)) walk.splice(1, 0, v);
    walk.push(start);
    const cycle = walk.slice(0, -1).map((from, k) => edges.find((e) => e.from === from && e.to === walk[k + 1]));
    return { modules: scc, cycle };
  });
}

// `edge` comes from one of `files` (paths under src/), or `files` is unset.
const fromFiles = (edge, files) =>
  files === undefined || files.some((f) => path.normalize(edge.file).endsWith(path.sep + path.normalize(f)));

const allowed = (rules, edge) => {
  const entry = (rules[edge.from] || []).find((r) => (typeof r === "string" ? r : r.module) === edge.to);
  if (entry === undefined) return false;
  return typeof entry === "string" || fromFiles(edge, entry.only);
};

// The crate checked: its cycles, and the imports outside `rules` (none
// checked without rules).
export function check(srcDir, rules = null, exceptions = []) {
  const graph = analyze(srcDir);
  const isException = (x, e) => x.from === e.from && x.to === e.to && fromFiles(e, x.only);
  const excepted = (e) => exceptions.some((x) => isException(x, e));
  const kept = graph.edges.filter((e) => !excepted(e));
  const cycles = cyclesOf(graph.modules, kept);
  const violations = [];
  const notes = [];
  if (rules) {
    for (const m of graph.modules) {
      if (!(m in rules)) violations.push({ module: m, text: `module ${m} has no row in the may-import table` });
    }
    for (const m of Object.keys(rules)) {
      if (!graph.modules.includes(m)) notes.push(`the table has a row for ${m}, which is not a module of the crate`);
    }
    for (const e of kept) {
      if (e.from in rules && !allowed(rules, e)) violations.push({ edge: e });
    }
  }
  for (const x of exceptions) {
    if (!graph.edges.some((e) => isException(x, e))) {
      notes.push(`the known exception ${x.from} → ${x.to} no longer occurs: drop it from the exceptions`);
    }
  }
  return { ...graph, cycles, violations, notes, exceptions };
}

function rel(file) {
  const r = path.relative(ROOT, file);
  return r.startsWith("..") ? file : r;
}

const where = (e) => `${rel(e.file)}:${e.line}`;

// The report of one checked crate, as lines; `fails` says whether it fails.
export function report(result, { name, strict, graph = false }) {
  const lines = [];
  const pairs = new Map();
  for (const e of result.edges) {
    const k = `${e.from} → ${e.to}`;
    if (!pairs.has(k)) pairs.set(k, []);
    pairs.get(k).push(e);
  }
  lines.push(`modgraph: ${name} (${rel(result.srcDir)}): ${result.modules.length} modules, ${pairs.size} edges between them`);
  for (const p of result.problems) lines.push(`  error: ${p}`);
  if (graph) {
    for (const m of result.modules) {
      const to = [...new Set(result.edges.filter((e) => e.from === m).map((e) => e.to))].sort();
      lines.push(`  ${m} → ${to.length ? to.join(", ") : "(nothing)"}`);
    }
  }
  const cycleWord = strict ? "error: cycle" : "cycle (reported; fails only with --strict-core)";
  for (const c of result.cycles) {
    lines.push(`  ${cycleWord}: {${c.modules.join(", ")}}: ${[...c.cycle.map((e) => e.from), c.cycle[0].from].join(" → ")}`);
    for (const e of c.cycle) lines.push(`    ${e.from} → ${e.to}  ${where(e)}`);
  }
  if (result.cycles.length === 0) lines.push("  ok: no cycle");
  const byEdge = new Map();
  for (const v of result.violations) {
    if (v.module) lines.push(`  error: ${v.text} (scripts/modgraph.mjs, EDGE_RULES or CORE_ORDER)`);
    else {
      const k = `${v.edge.from} → ${v.edge.to}`;
      if (!byEdge.has(k)) byEdge.set(k, []);
      byEdge.get(k).push(v.edge);
    }
  }
  for (const [k, es] of byEdge) {
    lines.push(`  error: ${k} is not in the may-import table (scripts/modgraph.mjs, EDGE_RULES or CORE_ORDER):`);
    for (const e of es) lines.push(`    ${where(e)}`);
  }
  if (result.violations.length === 0 && result.rulesChecked) lines.push("  ok: every import is in the may-import table");
  for (const x of result.exceptions) {
    const seen = result.edges.filter((e) => e.from === x.from && e.to === x.to && fromFiles(e, x.only));
    if (seen.length) lines.push(`  known exception: ${x.from} → ${x.to} (${x.why}): ${seen.map(where).join(", ")}`);
  }
  for (const n of result.notes) lines.push(`  note: ${n}`);
  const fails = result.problems.length > 0 || result.violations.length > 0 || (strict && result.cycles.length > 0);
  return { lines, fails };
}

function main(argv) {
  const args = argv.slice(2);
  const flag = (f) => args.includes(f);
  const value = (f) => {
    const i = args.indexOf(f);
    return i === -1 ? undefined : args[i + 1];
  };
  const strictCore = flag("--strict-core");
  const graph = flag("--graph");
  const runs = [];
  if (value("--src")) {
    const rulesName = value("--rules");
    const edge = rulesName === "edge";
    runs.push({
      name: path.basename(path.dirname(path.resolve(value("--src")))),
      src: path.resolve(value("--src")),
      rules: edge ? EDGE_RULES : rulesName === "core" ? CORE_RULES : null,
      exceptions: edge ? EDGE_EXCEPTIONS : [],
      strict: true,
    });
  } else {
    const names = args.filter((a, i) => args[i - 1] === "--crate");
    for (const name of names.length ? names : ["edge", "core"]) {
      const c = CRATES[name];
      if (!c) {
        console.error(`modgraph: no crate ${name} (edge or core)`);
        return 2;
      }
      runs.push({ name, src: path.join(ROOT, c.src), rules: c.rules, exceptions: c.exceptions, strict: c.strict || strictCore });
    }
  }
  let failed = false;
  for (const r of runs) {
    const result = check(r.src, r.rules, r.exceptions);
    result.rulesChecked = Boolean(r.rules);
    const { lines, fails } = report(result, { name: r.name, strict: r.strict, graph });
    console.log(lines.join("\n"));
    if (fails) failed = true;
  }
  console.log(failed ? "modgraph: FAILED" : "modgraph: ok");
  return failed ? 1 : 0;
}

if (process.argv[1] && import.meta.url === pathToFileURL(path.resolve(process.argv[1])).href) {
  process.exit(main(process.argv));
}
