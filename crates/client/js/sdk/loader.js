// The wasm engine as one binding holds it (`bind` makes one per entry): its
// glue's exports, whether it has loaded, and how to wait for it. Until it has
// loaded, `new OneJob()` works and requests wait for it; a load that failed is
// tried again by the next request.
import { configError, named } from "./errors.js";

/**
 * The engine, as wasm-bindgen's glue exports it (the browser entry names
 * what it uses, so a bundler leaves the rest of the glue out).
 * @typedef {Pick<typeof import("../onejob.js"), "Engine" | "Intent" | "EventSplitter" | "bodyBuffer" | "fingerprintBody" | "intentId" | "lastError">} Wasm
 */
/** @typedef {{ memory: WebAssembly.Memory }} Instance the wasm instance's exports (its memory, for the body buffer) */
/** @typedef {import("../index.js").OneJobError} OneJobError */
/** @typedef {ReturnType<typeof loader>} Loader */

/**
 * `load()` loads the wasm and resolves to the instance's exports;
 * `instance`: it already is loaded, these are its exports.
 * @param {Wasm} wasm
 * @param {() => Instance | Promise<Instance>} load
 * @param {Instance} [instance]
 */
export function loader(wasm, load, instance) {
  let loaded = instance !== undefined;
  /** The engine's memory, once loaded (views of the body buffer are made on it). */
  let memory = instance?.memory;
  /**
   * The load under way, or the last one.
   * @type {Promise<void>}
   */
  let loading = Promise.resolve();
  /**
   * Why the last load failed (a `OneJobError`), while none has succeeded.
   * @type {OneJobError | undefined}
   */
  let failed;
  const start = () => {
    failed = undefined;
    loading = Promise.resolve()
      .then(load)
      .then(
        (exports) => {
          memory = exports.memory;
          loaded = true;
        },
        (error) => {
          failed = named("OneJobError", `onejob: the SDK's wasm could not be loaded (${error}); the next request tries again`, error);
          throw failed;
        },
      );
    loading.catch(() => {}); // Reported to whoever waits on it.
    return loading;
  };
  /**
   * The body is encoded as UTF-8 straight into the engine's memory
   * (`encodeInto`, native and one pass), not passed as a wasm-bindgen string
   * (a JavaScript loop over its ASCII prefix, then two reallocations): most
   * of a fingerprint's time on a large body.
   */
  const encoder = new TextEncoder();

  return {
    wasm,
    /** The first load. */
    ready: loaded ? Promise.resolve() : start(),

    /** Whether the engine has loaded. */
    loaded: () => loaded,

    /** The load under way, or the last one. */
    loading: () => loading,

    /**
     * What the engine returned, or the named error it refused with (the
     * engine returns `undefined` and says why in `lastError()`).
     * @template T
     * @param {T | undefined} value
     * @param {import("../index.js").OneJobErrorName} [name]
     * @returns {T}
     */
    checked(value, name = "OneJobError") {
      if (value === undefined) throw named(name, wasm.lastError());
      return value;
    },

    /**
     * Throws unless the engine has loaded: `what` needs it now.
     * @param {string} what
     */
    need(what) {
      if (loaded) return;
      throw failed ?? named("OneJobError", `onejob: ${what} needs the SDK's wasm, which is still loading; await \`ready\` first`);
    },

    /**
     * Runs `go` (which returns a promise) once the engine is loaded; a caller's
     * abort rejects at once, and whatever `go` throws rejects. Every send
     * (`fetch()` and `resume()`) starts here: a runtime without `fetch` fails
     * before anything is remembered.
     * @template T
     * @param {AbortSignal | undefined} signal
     * @param {() => Promise<T>} go
     * @returns {Promise<T>}
     */
    whenLoaded(signal, go) {
      const run = () => {
        try {
          if (typeof globalThis.fetch !== "function") throw configError("this runtime has no fetch()");
          return go();
        } catch (error) {
          return Promise.reject(error);
        }
      };
      if (loaded) return run();
      if (signal?.aborted) return Promise.reject(signal.reason);
      const attempt = failed ? start() : loading;
      return new Promise((resolve, reject) => {
        // Listened for only on a signal.
        const aborted = () => reject(/** @type {AbortSignal} */ (signal).reason);
        signal?.addEventListener("abort", aborted, { once: true });
        attempt.then(
          () => {
            signal?.removeEventListener("abort", aborted);
            if (!signal?.aborted) resolve(run());
          },
          (error) => {
            signal?.removeEventListener("abort", aborted);
            reject(error);
          },
        );
      });
    },

    /**
     * The engine's fingerprint of a request (loaded: every caller checks).
     * @param {string} method
     * @param {string} url
     * @param {unknown} body
     */
    fingerprint(method, url, body) {
      const text = body == null ? "" : String(body);
      // Three bytes per UTF-16 unit at most.
      const capacity = text.length * 3;
      const at = wasm.bodyBuffer(capacity);
      const { buffer } = /** @type {WebAssembly.Memory} */ (memory);
      const { written } = encoder.encodeInto(text, new Uint8Array(buffer, at, capacity));
      return wasm.fingerprintBody(method, url, written);
    },
  };
}
