// Browsers and bundlers (Vite, webpack 5, Next.js, Parcel): the wasm is
// fetched next to this file (bundlers see `new URL(…, import.meta.url)` and
// ship it) and compiled while it downloads. Importing does not wait for it:
// `new OneJob()` works at once and requests wait for it (`ready`). The glue's
// exports are named, so a bundler leaves out what the shell does not use
// (the glue's own `init` among them: the wasm is instantiated here, with the
// glue's import object, then handed to it).
import { Engine, EventSplitter, Intent, bodyBuffer, finish, fingerprintBody, imports, intentId, lastError } from "./onejob.js";
import { bind } from "./sdk.js";

const url = new URL("./onejob_bg.wasm", import.meta.url);

export const { OneJob, fingerprint, ready } = bind(
  { Engine, EventSplitter, Intent, bodyBuffer, fingerprintBody, intentId, lastError },
  async () => {
    const response = await fetch(url);
    if (!response.ok) throw new Error(`${response.status} fetching ${url}`);
    let loaded;
    try {
      loaded = await WebAssembly.instantiateStreaming(response, imports());
    } catch (error) {
      // A server that sends the wasm as another type than application/wasm
      // (the body is left unread then): compiled once it has all come.
      if (response.bodyUsed) throw error;
      loaded = await WebAssembly.instantiate(await response.arrayBuffer(), imports());
    }
    return finish(loaded.instance, loaded.module);
  },
);
