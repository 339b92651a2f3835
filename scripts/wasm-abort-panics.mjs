// Makes a panic in the SDK's wasm trap at once, the way std's
// `panic_immediate_abort` would (which needs a nightly `-Zbuild-std`): the
// bodies of std's panic entry points become `unreachable`, so the panic
// hook, its message formatting and with them all of `core::fmt` the engine
// otherwise links (about 4 KB raw, 2.2 KB gzip) are left unreachable and
// removed by the wasm-opt run that follows.
//
// Nothing observable is lost. wasm32-unknown-unknown panics with
// `panic = "abort"`, which ends in `unreachable` anyway (a `RuntimeError` in
// JavaScript); the hook's message goes to std's stderr there, which discards
// it; the engine sets no hook of its own. Every function stubbed diverges
// (`-> !`), so `unreachable` is a valid body for it.
//
//   node scripts/wasm-abort-panics.mjs IN.wasm OUT.wasm
//
// IN needs its name section (wasm-bindgen's output keeps it). Fails when std's
// panic handler is not found by name, rather than let the bytes come back.
import { readFileSync, writeFileSync } from "node:fs";
import binaryen from "binaryen";

const [input, output] = process.argv.slice(2);
if (!input || !output) {
  console.error("usage: node scripts/wasm-abort-panics.mjs IN.wasm OUT.wasm");
  process.exit(2);
}

// std's #[panic_handler] (core's panics call it), std's own `begin_panic`
// path, and the allocation-failure handler (its hook formats the size).
const ENTRY_POINTS = [
  /::rust_begin_unwind$/,
  /^std\[[0-9a-f]+\]::panicking::panic_with_hook$/,
  /^core\[[0-9a-f]+\]::panicking::panic_fmt$/,
  /::__rust_alloc_error_handler$/,
];

const module = binaryen.readBinary(readFileSync(input));
const stubbed = [];
for (let i = 0; i < module.getNumFunctions(); i++) {
  const fn = module.getFunctionByIndex(i);
  const info = binaryen.getFunctionInfo(fn);
  if (info.module !== "" || !ENTRY_POINTS.some((re) => re.test(info.name))) continue;
  binaryen.Function.setBody(fn, module.unreachable());
  stubbed.push(info.name);
}
if (!stubbed.some((name) => name.endsWith("::rust_begin_unwind"))) {
  console.error(`wasm-abort-panics: no rust_begin_unwind in ${input} (a build without its name section, or std renamed it)`);
  process.exit(1);
}
// Keep the names: the size report reads them after this step.
binaryen.setDebugInfo(true);
writeFileSync(output, module.emitBinary());
module.dispose();
