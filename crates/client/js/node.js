// Node.js ≥ 20: the wasm is read from disk next to this file.
import { readFile } from "node:fs/promises";

import { initSync, OneJob, fingerprint } from "./onejob.js";

initSync({ module: await readFile(new URL("./onejob_bg.wasm", import.meta.url)) });

export { OneJob, fingerprint };
