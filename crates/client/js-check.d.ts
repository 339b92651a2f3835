// What `tsc -p tsconfig.check.json` (the `sdk-types` suite) needs to know
// of the hosts the SDK's JavaScript shell runs in, beyond the ES2022 and DOM
// libs. Not part of the package.

// `import module from "./onejob_bg.wasm"` in workerd.js: wrangler bundles a
// .wasm import as its compiled module.
declare module "*.wasm" {
  const module: WebAssembly.Module;
  export default module;
}

// ES2024's String.prototype.toWellFormed, which savedJson() uses where the
// host has it (and replaces lone surrogates itself where not).
interface String {
  toWellFormed?(): string;
}
