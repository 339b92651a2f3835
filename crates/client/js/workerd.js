// Cloudflare Workers (workerd): wrangler bundles the wasm as a compiled module.
import wasm from "./onejob_bg.wasm";

import { initSync, OneJob, fingerprint } from "./onejob.js";

initSync({ module: wasm });

export { OneJob, fingerprint };
