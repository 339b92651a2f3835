// The SDK's JavaScript shell. It performs; the engine (onejob-core compiled to
// wasm, `./onejob.js`) decides: keys, fingerprints, which intent a submission
// belongs to, whether and how long to wait after each try (full jitter,
// `Retry-After`, the retry budget), and where SSE events end. Here live only
// what a JavaScript host does best: fetch, timers, storage, promises, streams
// (one module each under ./sdk/).
//
// Every entry (index.js, node.js, workerd.js, inline.js) loads the wasm its
// own way and calls `bind(wasm, load, instance)`.
import { Client } from "./sdk/client.js";
import { loader as makeLoader } from "./sdk/loader.js";

/**
 * The package's API over a wasm engine: `load()` loads it and resolves to
 * the instance's exports (`instance`: it already is loaded, these are its
 * exports). Until it has loaded, `new OneJob()` works and requests wait for
 * it; a load that failed is tried again by the next request. Returns the API
 * and `ready`, the first load.
 * @param {import("./sdk/loader.js").Wasm} wasm
 * @param {() => import("./sdk/loader.js").Instance | Promise<import("./sdk/loader.js").Instance>} load
 * @param {import("./sdk/loader.js").Instance} [instance]
 */
export function bind(wasm, load, instance) {
  const loader = makeLoader(wasm, load, instance);

  class OneJob extends Client {
    /**
     * Throws `OneJobConfigError` on a malformed option.
     * @param {import("./index.js").OneJobOptions | null} [options]
     */
    constructor(options) {
      super(loader, options);
    }
  }

  /**
   * The engine's fingerprint of a request.
   * @param {string} method
   * @param {string} url
   * @param {string | null} [body]
   */
  function fingerprint(method, url, body) {
    loader.need("fingerprint()");
    return loader.fingerprint(String(method).toUpperCase(), String(url), body);
  }

  // The package is minified without esbuild's --keep-names (which wraps
  // every function and class of the bundle, glue included: 630 B gzip); the
  // two public names are kept here.
  Object.defineProperty(OneJob, "name", { value: "OneJob" });
  Object.defineProperty(fingerprint, "name", { value: "fingerprint" });
  return { OneJob, fingerprint, ready: loader.ready };
}
