// Browsers and bundlers (Vite, webpack 5, Parcel): the wasm is fetched next
// to this file; bundlers see `new URL(…, import.meta.url)` and ship it.
import init, { OneJob, fingerprint } from "./onejob.js";

await init({ module_or_path: new URL("./onejob_bg.wasm", import.meta.url) });

export { OneJob, fingerprint };
