// Node.js ≥ 20: the wasm is read from disk next to this file.
import { readFile } from "node:fs/promises";
import { fileURLToPath } from "node:url";

import { initSync, OneJob, fingerprint } from "./onejob.js";

// A bundler building for a server (Next.js server-side rendering a client
// component, say) may rewrite this literal `new URL` into the path its
// browser build serves; the file itself still sits next to this module.
const asset = new URL("./onejob_bg.wasm", import.meta.url);
const file = String(asset).startsWith("file:") ? String(asset) : String(new URL(["onejob_bg", "wasm"].join("."), import.meta.url));
initSync({ module: await readFile(fileURLToPath(file)) });

export { OneJob, fingerprint };
