// Browsers and bundlers (Vite, webpack 5, Next.js, Parcel): the wasm is
// fetched next to this file (bundlers see `new URL(…, import.meta.url)` and
// ship it) and compiled while it downloads. Importing does not wait for it:
// `new OneJob()` works at once and requests wait for it (`ready`).
import init, * as wasm from "./onejob.js";
import { bind } from "./sdk.js";

export const { OneJob, fingerprint, ready } = bind(wasm, () =>
  init({ module_or_path: new URL("./onejob_bg.wasm", import.meta.url) }),
);
