// Where a wasm file's bytes go, twiggy-style, with no tool to install: reads
// the code section (each function's body size) and the name section
// (function names), then prints the largest functions ("top") and the bytes
// per crate/module ("by part"). Needs a build that still has its name
// section (the Makefile keeps a named copy before stripping it).
//
//   node scripts/wasm-top.mjs FILE.wasm [TOP=15]
import { readFileSync } from "node:fs";

const [file, topArg] = process.argv.slice(2);
if (!file) {
  console.error("usage: node scripts/wasm-top.mjs FILE.wasm [TOP]");
  process.exit(2);
}
const bytes = readFileSync(file);
const top = Number(topArg ?? 15);

let pos = 8;
const u32 = () => {
  let result = 0, shift = 0, byte;
  do {
    byte = bytes[pos++];
    result += (byte & 0x7f) * 2 ** shift;
    shift += 7;
  } while (byte & 0x80);
  return result;
};
const name = () => {
  const len = u32();
  const text = bytes.subarray(pos, pos + len).toString("utf8");
  pos += len;
  return text;
};

let imported = 0;
const bodies = []; // sizes of defined functions, in order
const names = new Map(); // function index -> name
const sections = {}; // section -> size
let dataBytes = 0;
while (pos < bytes.length) {
  const id = bytes[pos++];
  const size = u32();
  const end = pos + size;
  if (id === 0) {
    const custom = name();
    sections[`custom:${custom}`] = size;
    if (custom === "name") {
      while (pos < end) {
        const sub = bytes[pos++];
        const subSize = u32();
        const subEnd = pos + subSize;
        if (sub === 1) {
          for (let n = u32(); n > 0; n--) {
            const index = u32();
            names.set(index, name());
          }
        }
        pos = subEnd;
      }
    }
  } else {
    sections[["custom", "type", "import", "function", "table", "memory", "global", "export", "start", "element", "code", "data", "datacount"][id] ?? `id${id}`] = size;
    if (id === 2) {
      for (let n = u32(); n > 0; n--) {
        name(); name();
        const kind = bytes[pos++];
        if (kind === 0) { u32(); imported++; }
        else if (kind === 1) { pos++; const flags = u32(); u32(); if (flags & 1) u32(); }
        else if (kind === 2) { const flags = u32(); u32(); if (flags & 1) u32(); }
        else if (kind === 3) { pos += 2; }
        else if (kind === 4) { pos++; u32(); }
      }
    } else if (id === 10) {
      for (let n = u32(); n > 0; n--) {
        const bodySize = u32();
        bodies.push(bodySize);
        pos += bodySize;
      }
    } else if (id === 11) {
      dataBytes = size;
    }
  }
  pos = end;
}

// Legacy Rust mangling (_ZN…E) to a path, enough to group by crate.
function demangle(symbol) {
  const m = /^_ZN(.*)E$/.exec(symbol);
  if (!m) return symbol;
  const parts = [];
  let rest = m[1];
  while (rest.length) {
    const len = /^(\d+)/.exec(rest);
    if (!len) break;
    const n = Number(len[1]);
    parts.push(rest.slice(len[1].length, len[1].length + n));
    rest = rest.slice(len[1].length + n);
  }
  if (parts.length && /^h[0-9a-f]{16}$/.test(parts.at(-1))) parts.pop();
  return parts.join("::").replaceAll("$LT$", "<").replaceAll("$GT$", ">").replaceAll("$u20$", " ").replaceAll("$RF$", "&").replaceAll("..", "::").replaceAll("$C$", ",");
}

// The part a function belongs to: its crate, with onejob's modules and a few
// std corners kept apart (they are what the size budget is about).
function partOf(fullName) {
  let n = fullName.replace(/\[[0-9a-f]+\]/g, "").replace(/::h[0-9a-f]{16}$/, "");
  // A trait impl counts where the trait lives when it is a formatting one.
  const impl = /^<[^>]* as ([a-z_]+::fmt)::/.exec(n);
  if (impl) return impl[1];
  n = n.replace(/^<+/, "").replace(/^(impl |dyn )/, "");
  const segs = n.split("::");
  const crate = segs[0].replace(/[<>&\s]/g, "") || "?";
  if (crate === "onejob_core" || crate === "onejob_client") return `${crate}::${segs[1] ?? ""}`;
  if (crate === "core" && (segs[1] === "fmt" || segs[1] === "num" || segs[1] === "str" || segs[1] === "unicode")) return `core::${segs[1]}`;
  if (crate === "alloc" || crate === "std" || crate === "core" || crate === "dlmalloc") return crate;
  if (/^(wasm_bindgen|js_sys|web_sys)/.test(crate)) return crate;
  if (!fullName.includes("::")) return "(unnamed/glue)";
  return crate;
}

const functions = bodies.map((size, i) => ({ size, name: demangle(names.get(imported + i) ?? `func[${imported + i}]`) }));
const code = functions.reduce((s, f) => s + f.size, 0);
const total = bytes.length;
const pct = (n) => `${((100 * n) / total).toFixed(1).padStart(5)}%`;

console.log(`wasm-top: ${file}: ${total} B (code ${code} B in ${functions.length} functions, data ${dataBytes} B)`);
console.log("wasm-top: largest functions (shallow bytes)");
for (const f of [...functions].sort((a, b) => b.size - a.size).slice(0, top)) {
  console.log(`wasm-top:   ${String(f.size).padStart(7)} ${pct(f.size)}  ${f.name.slice(0, 110)}`);
}
const parts = new Map();
for (const f of functions) parts.set(partOf(f.name), (parts.get(partOf(f.name)) ?? 0) + f.size);
parts.set("(data section)", dataBytes);
console.log("wasm-top: bytes by part (code, plus the data section)");
for (const [part, size] of [...parts].sort((a, b) => b[1] - a[1]).slice(0, 25)) {
  console.log(`wasm-top:   ${String(size).padStart(7)} ${pct(size)}  ${part}`);
}
