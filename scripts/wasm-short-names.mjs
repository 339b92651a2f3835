// Gives the SDK's wasm imports and exports one- or two-letter names, in the
// wasm and in wasm-bindgen's glue (and its types) alike. wasm-bindgen names
// them after the Rust items (`engine_submit`, `__wbindgen_malloc`), and its
// imports carry a 16-digit hash each (`__wbg_parse_cf5fe3faa0f7ee8d`): text
// both files download, which random hex makes the worst to compress.
// Nothing but the glue calls them: the exports an app or the shell reaches
// are the glue's own functions and classes, whose names do not change. The
// instance's `memory` keeps its name (the shell views the body buffer in it).
//
// Checked, not assumed: every name renamed in the glue must be found there
// in the form wasm-bindgen writes (`wasm.NAME`, an import object's `NAME:
// function`), and none may be left after; else the script fails.
//
//   node scripts/wasm-short-names.mjs PKG   (onejob_bg.wasm, onejob.js and their .d.ts)
import { readFileSync, writeFileSync } from "node:fs";
import path from "node:path";

const pkg = process.argv[2];
if (!pkg) {
  console.error("usage: node scripts/wasm-short-names.mjs PKG");
  process.exit(2);
}
const fail = (message) => {
  console.error(`wasm-short-names: ${message}`);
  process.exit(1);
};
const file = (name) => path.join(pkg, name);

/** Short names in order: a…z, A…Z, then two letters. */
const LETTERS = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ";
const shortName = (i) => (i < LETTERS.length ? LETTERS[i] : LETTERS[Math.floor(i / LETTERS.length) - 1] + LETTERS[i % LETTERS.length]);
/** The names kept as they are. */
const KEPT_EXPORTS = new Set(["memory"]);
const MODULE = "./onejob_bg.js";
const SHORT_MODULE = "o";

// --- The wasm: its import (2) and export (7) sections, rewritten.
const bytes = readFileSync(file("onejob_bg.wasm"));
let pos = 0;
const u32 = () => {
  let result = 0;
  let shift = 0;
  for (;;) {
    const b = bytes[pos++];
    result += (b & 0x7f) * 2 ** shift;
    if (b < 0x80) return result;
    shift += 7;
  }
};
const name = () => {
  const len = u32();
  const text = bytes.subarray(pos, pos + len).toString("utf8");
  pos += len;
  return text;
};
const leb = (n) => {
  const out = [];
  do {
    let b = n % 128;
    n = Math.floor(n / 128);
    if (n > 0) b |= 0x80;
    out.push(b);
  } while (n > 0);
  return Buffer.from(out);
};
const encodeName = (text) => {
  const utf8 = Buffer.from(text, "utf8");
  return Buffer.concat([leb(utf8.length), utf8]);
};
/** Skips a table's or a memory's limits. */
const limits = () => {
  const flags = bytes[pos++];
  u32();
  if (flags & 1) u32();
};

if (bytes.readUInt32LE(0) !== 0x6d736100) fail(`${file("onejob_bg.wasm")} is not a wasm module`);
/** Old name → new name, for the glue. */
const imports = new Map();
const exports = new Map();
const sections = [bytes.subarray(0, 8)];
pos = 8;
while (pos < bytes.length) {
  const start = pos;
  const id = bytes[pos++];
  const size = u32();
  const end = pos + size;
  if (id !== 2 && id !== 7) {
    sections.push(bytes.subarray(start, end));
    pos = end;
    continue;
  }
  const count = u32();
  const entries = [leb(count)];
  for (let i = 0; i < count; i++) {
    if (id === 2) {
      const module = name();
      const field = name();
      if (module !== MODULE) fail(`an import from ${module}, not ${MODULE}`);
      const descStart = pos;
      const kind = bytes[pos++];
      if (kind === 0) u32();
      else if (kind === 1) {
        pos++;
        limits();
      } else if (kind === 2) limits();
      else if (kind === 3) pos += 2;
      else if (kind === 4) {
        pos++;
        u32();
      } else fail(`import ${field}: unknown kind ${kind}`);
      const short = shortName(imports.size);
      imports.set(field, short);
      entries.push(encodeName(SHORT_MODULE), encodeName(short), bytes.subarray(descStart, pos));
    } else {
      const field = name();
      const descStart = pos;
      pos++; // kind
      u32(); // index
      const short = KEPT_EXPORTS.has(field) ? field : shortName(exports.size);
      if (short !== field) exports.set(field, short);
      entries.push(encodeName(short), bytes.subarray(descStart, pos));
    }
  }
  if (pos !== end) fail(`section ${id} did not end where its size says`);
  const body = Buffer.concat(entries);
  sections.push(Buffer.from([id]), leb(body.length), body);
}

// --- The glue and its types, the same names replaced where they name the wasm's.
const escape = (text) => text.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
/**
 * Replaces each name of `map` inside `pattern` (its `NAME` placeholder) in
 * `text`; each must be found at least `min` times.
 */
const rename = (text, what, map, pattern, min) => {
  const alternatives = [...map.keys()].map(escape).join("|");
  const [before, after] = pattern.split("NAME");
  const re = new RegExp(`(${before})(${alternatives})(?![\\w$])(${after})`, "gm");
  const seen = new Map();
  const out = text.replace(re, (_, pre, old, post) => {
    seen.set(old, (seen.get(old) ?? 0) + 1);
    return pre + map.get(old) + post;
  });
  for (const old of map.keys()) {
    if ((seen.get(old) ?? 0) < min) fail(`${what}: ${old} not found as ${pattern}`);
  }
  return out;
};
const used = (old) => new RegExp(`\\bwasm\\.${escape(old)}(?![\\w$])`).test(glueText);

const glueText = readFileSync(file("onejob.js"), "utf8");
// Exports the glue never calls (wasm-bindgen's abort hooks) are renamed in the
// wasm only.
const called = new Map([...exports].filter(([old]) => used(old)));
let glue = rename(glueText, "onejob.js", called, "\\bwasm\\.NAME", 1);
glue = rename(glue, "onejob.js", imports, "^\\s+NAME(?=: function\\()", 1);
const moduleKey = `"${MODULE}": import0`;
if (glue.split(moduleKey).length !== 2) fail(`onejob.js: the import object's ${moduleKey} not found once`);
glue = glue.replace(moduleKey, `"${SHORT_MODULE}": import0`);
for (const old of [...called.keys(), ...imports.keys()]) {
  if (new RegExp(`(\\bwasm\\.|^\\s+)${escape(old)}(?![\\w$])`, "m").test(glue)) fail(`onejob.js: ${old} left after renaming`);
}

// The types of the instance's exports (those the glue calls; the others are
// not declared): the glue's `InitOutput`, and the wasm's own.
const types = rename(readFileSync(file("onejob.d.ts"), "utf8"), "onejob.d.ts", called, "\\breadonly NAME(?=:)", 1);
const wasmTypes = rename(readFileSync(file("onejob_bg.wasm.d.ts"), "utf8"), "onejob_bg.wasm.d.ts", called, "\\bexport const NAME(?=:)", 1);

writeFileSync(file("onejob_bg.wasm"), Buffer.concat(sections));
writeFileSync(file("onejob.js"), glue);
writeFileSync(file("onejob.d.ts"), types);
writeFileSync(file("onejob_bg.wasm.d.ts"), wasmTypes);
