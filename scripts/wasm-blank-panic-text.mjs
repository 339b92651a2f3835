// Blanks the text only a panic message would show from the SDK's optimised
// wasm: core's and alloc's panic messages and the source paths of panic
// locations. With std's panic entry points made `unreachable`
// (scripts/wasm-abort-panics.mjs) and wasm-opt's dead-code removal, nothing
// reads them any more, but wasm-opt never shrinks a data segment, so they
// are still downloaded (about 370 B gzip). Blanked (zeroed in place, same
// length: no address moves), they compress to almost nothing.
//
// Checked, not assumed: the script fails if any instruction that can run
// without trapping names an address inside a blanked range (an `i32.const`
// of it), so a text that live code still reads is never blanked. The texts are found by
// content; one a new toolchain no longer has is simply not found.
//
//   node scripts/wasm-blank-panic-text.mjs IN.wasm OUT.wasm
import { readFileSync, writeFileSync } from "node:fs";
import binaryen from "binaryen";

const [input, output] = process.argv.slice(2);
if (!input || !output) {
  console.error("usage: node scripts/wasm-blank-panic-text.mjs IN.wasm OUT.wasm");
  process.exit(2);
}

// core's and alloc's panic messages (slice indexing, split_at/split_off,
// copy_from_slice, join, capacity), and any `….rs` path (a panic location).
const MESSAGES = [
  "slice index starts at ",
  " but ends at ",
  "index out of bounds: the len is ",
  " but the index is ",
  "range start index ",
  " out of range for slice of length ",
  "range end index ",
  "copy_from_slice: source slice length (",
  ") does not match destination slice length (",
  "`at` split index (is ",
  ") should be <= len (is ",
  "Tried to shrink to a larger capacity",
  "mid > len",
  "attempt to join into collection with len > usize::MAX",
  "capacity overflow",
].map((text) => new RegExp(text.replace(/[.*+?^${}()|[\]\\`]/g, "\\$&"), "g"));
const SOURCE_PATH = /[A-Za-z0-9_.\-/]+\.rs/g;

const wasm = readFileSync(input);

/** Reads an unsigned LEB128 at `at`: [value, next offset]. */
function leb(at) {
  let value = 0;
  let shift = 0;
  for (;;) {
    const byte = wasm[at++];
    value += (byte & 0x7f) * 2 ** shift;
    shift += 7;
    if (byte < 0x80) return [value, at];
  }
}
/** Reads a signed LEB128 (an i32.const) at `at`: [value, next offset]. */
function sleb(at) {
  let [value, next] = leb(at);
  const bits = 7 * (next - at);
  if (wasm[next - 1] & 0x40) value -= 2 ** bits;
  return [value, next];
}

// The data section's active segments: [address, start in the file, length].
const segments = [];
let at = 8;
while (at < wasm.length) {
  const id = wasm[at];
  const [size, payload] = leb(at + 1);
  if (id === 11) {
    let [count, p] = leb(payload);
    while (count-- > 0) {
      let flags;
      [flags, p] = leb(p);
      if (flags !== 0 || wasm[p] !== 0x41) throw new Error(`data segment with flags ${flags}: not handled`);
      let address;
      [address, p] = sleb(p + 1);
      if (wasm[p] !== 0x0b) throw new Error("data segment offset is not a constant");
      let length;
      [length, p] = leb(p + 1);
      segments.push([address >>> 0, p, length]);
      p += length;
    }
  }
  at = payload + size;
}

/** Blanked ranges of memory: [from, to). */
const blanked = [];
for (const [address, start, length] of segments) {
  const text = wasm.subarray(start, start + length).toString("latin1");
  for (const pattern of [...MESSAGES, SOURCE_PATH]) {
    for (const match of text.matchAll(pattern)) {
      wasm.fill(0, start + match.index, start + match.index + match[0].length);
      blanked.push([address + match.index, address + match.index + match[0].length]);
    }
  }
}

// What live code names: the code as wasm-opt leaves it when told traps
// never happen, which removes exactly the code that only leads to a trap
// (a panic's message being stored before its `unreachable`). Such code never
// shows the text: the engine has trapped. Any other use fails the build.
const module = binaryen.readBinary(wasm);
module.setFeatures(binaryen.Features.All);
binaryen.setTrapsNeverHappen(true);
binaryen.setShrinkLevel(2);
module.optimize();
const code = module.emitText();
module.dispose();
for (const [, constant] of code.matchAll(/i32\.const (-?\d+)/g)) {
  const address = Number(constant) >>> 0;
  const range = blanked.find(([from, to]) => address >= from && address < to);
  if (range) {
    console.error(`wasm-blank-panic-text: live code names ${address}, inside blanked text [${range}]; not blanking`);
    process.exit(1);
  }
}
writeFileSync(output, wasm);
