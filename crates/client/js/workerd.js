// Cloudflare Workers (workerd): wrangler bundles the wasm as a compiled module.
import module from "./onejob_bg.wasm";

import * as wasm from "./onejob.js";
import { bind } from "./sdk.js";

const instance = wasm.initSync({ module });

export const { OneJob, fingerprint, ready } = bind(wasm, () => instance, instance);
