// Lets an entry instantiate the SDK's wasm itself: wasm-bindgen's glue
// (`onejob.js`) also exports its import object (`imports()`) and the step
// that finishes loading an instance (`finish(instance, module)`), with their
// types. The browser entry (js/index.js) loads the wasm with these, in a few
// lines, instead of the glue's `init`, whose generality (old calling forms,
// byte and module inputs, a console warning) it does not need: the bundle
// leaves `init` out.
//
// Checked, not assumed: the script fails when the glue's export line or the
// two functions are not where wasm-bindgen writes them.
//
//   node scripts/wasm-glue-loader.mjs PKG
import { readFileSync, writeFileSync } from "node:fs";
import path from "node:path";

const pkg = process.argv[2];
if (!pkg) {
  console.error("usage: node scripts/wasm-glue-loader.mjs PKG");
  process.exit(2);
}
const fail = (message) => {
  console.error(`wasm-glue-loader: ${message}`);
  process.exit(1);
};

const glueFile = path.join(pkg, "onejob.js");
let glue = readFileSync(glueFile, "utf8");
const exportLine = "export { initSync, __wbg_init as default };";
for (const needed of [exportLine, "function __wbg_get_imports() {", "function __wbg_finalize_init(instance, module) {"]) {
  if (glue.split(needed).length !== 2) fail(`${glueFile}: \`${needed}\` not found once`);
}
glue = glue.replace(exportLine, "export { initSync, __wbg_init as default, __wbg_get_imports as imports, __wbg_finalize_init as finish };");
writeFileSync(glueFile, glue);

const typesFile = path.join(pkg, "onejob.d.ts");
const types = readFileSync(typesFile, "utf8");
if (!types.includes("export interface InitOutput {")) fail(`${typesFile}: no InitOutput`);
writeFileSync(
  typesFile,
  `${types}
/** The import object the wasm is instantiated with, for an entry that instantiates it itself. */
export function imports(): WebAssembly.Imports;

/** Finishes loading an instance made with \`imports()\`; returns its exports, as \`initSync\` does. */
export function finish(instance: WebAssembly.Instance, module: WebAssembly.Module): InitOutput;
`,
);
