// Node.js ≥ 20: the wasm is read from disk next to this file and compiled
// at import, so everything is usable at once.
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";

import * as wasm from "./onejob.js";
import { bind } from "./sdk.js";

// A bundler building for a server (Next.js server-side rendering a client
// component, say) may rewrite this literal `new URL` into the path its
// browser build serves; the file itself still sits next to this module.
const asset = new URL("./onejob_bg.wasm", import.meta.url);
const file = String(asset).startsWith("file:") ? String(asset) : String(new URL(["onejob_bg", "wasm"].join("."), import.meta.url));
const instance = wasm.initSync({ module: readFileSync(fileURLToPath(file)) });

export const { OneJob, fingerprint, ready } = bind(wasm, () => instance, instance);
