// Browsers and bundlers (Vite, webpack 5, Next.js, Parcel): the wasm is
// fetched next to this file (bundlers see `new URL(…, import.meta.url)` and
// ship it) and compiled while it downloads. Importing does not wait for it:
// `new OneJob()` works at once and requests wait for it (`ready`). The glue's
// exports are named, so a bundler leaves out what the shell does not use.
import init, { Engine, EventSplitter, Intent, bodyBuffer, fingerprintBody, intentId, lastError } from "./onejob.js";
import { bind } from "./sdk.js";

export const { OneJob, fingerprint, ready } = bind(
  { Engine, EventSplitter, Intent, bodyBuffer, fingerprintBody, intentId, lastError },
  () => init({ module_or_path: new URL("./onejob_bg.wasm", import.meta.url) }),
);
