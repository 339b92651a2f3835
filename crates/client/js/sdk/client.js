// The body of the `OneJob` class: its options, the intents it remembers, and
// submissions joining the send already running for their intent. One send's
// retry loop is ./send.js.
import { Events } from "./events.js";
import { readOptions } from "./options.js";
import { fromSaved, header, isObject, normalize, savedJson, unpackRequest } from "./request.js";
import { Running } from "./running.js";
import { send } from "./send.js";

/** @typedef {import("../onejob.js").Engine} Engine */
/** @typedef {import("../onejob.js").Intent} Intent */
/** @typedef {import("./loader.js").Loader} Loader */
/** @typedef {import("./request.js").Outgoing} Outgoing */
/** @typedef {import("./send.js").Sending} Sending */

/**
 * The public `OneJob`'s body: `bind()` makes `OneJob` a subclass that
 * passes its binding's loader, so `new OneJob(options)` takes the options only.
 */
export class Client {
  #loader;
  #endpoint;
  #store;
  #retry;
  #retentionMs;
  #events;
  /** What every send of this client shares. @type {Sending} */
  #sending;
  /**
   * The engine (retry policy and budget), made once the wasm is loaded.
   * @type {Engine | undefined}
   */
  #engine;
  /**
   * Intents being sent right now, so a second submission joins the first.
   * @type {Map<string, Running>}
   */
  #inflight = new Map();

  /**
   * Throws `OneJobConfigError` on a malformed option.
   * @param {Loader} loader
   * @param {import("../index.js").OneJobOptions | null} [options]
   */
  constructor(loader, options) {
    this.#loader = loader;
    const o = readOptions(options, (text, intent) => loader.checked(loader.wasm.Intent.read(text, intent)));
    this.#endpoint = o.endpoint;
    this.#store = o.store;
    this.#retry = o.retry;
    this.#retentionMs = o.retentionMs;
    this.#events = new Events(o.onEvent);
    this.#sending = { ...o, core: () => this.#core(), events: this.#events, EventSplitter: loader.wasm.EventSplitter };
    // The policy's last checks are core's (see #core).
    if (loader.loaded()) this.#core();
    else {
      loader.loading().then(() => {
        try {
          this.#core();
        } catch {
          // A policy core refuses: reported by every request.
        }
      }, () => {});
    }
  }

  /**
   * Like `fetch(input, init)`, with one idempotency key per intent.
   * @param {import("../index.js").FetchInput} input
   * @param {RequestInit | null} [init]
   * @param {import("../index.js").FetchOptions | null} [options]
   * @returns {Promise<Response>}
   */
  fetch(input, init, options) {
    const name = isObject(options) && typeof options.intent === "string" ? options.intent : undefined;
    const background = isObject(options) && options.background === true;
    // The background preference travels in the request itself, so a stored
    // intent resumed after a reload asks for the same.
    /** @param {Outgoing} request */
    const prepare = (request) => {
      if (background && !header(request.headers, "prefer")) request.headers.push(["Prefer", "respond-async"]);
      return request;
    };
    if (typeof Request === "function" && input instanceof Request) {
      // A Request's body must be read before it can be fingerprinted.
      return unpackRequest(input, init).then(([url, merged]) => {
        const request = prepare(normalize(url, merged, this.#endpoint));
        return this.#loader.whenLoaded(request.signal, () => this.#submit(request, name));
      });
    }
    let request;
    try {
      // Not a Request (one was read above).
      request = prepare(normalize(/** @type {string | URL} */ (input), init, this.#endpoint));
    } catch (error) {
      return Promise.reject(error);
    }
    return this.#loader.whenLoaded(request.signal, () => this.#submit(request, name));
  }

  /** A plain `fetch`-compatible function bound to this client, for `new OpenAI({ fetch: oj.fetcher() })`. */
  fetcher() {
    return (/** @type {import("../index.js").FetchInput} */ input, /** @type {RequestInit | undefined} */ init) => this.fetch(input, init);
  }

  /**
   * Re-sends every unresolved intent with its original key and resolves to their responses.
   * @returns {Promise<import("../index.js").ResumedIntent[]>}
   */
  resume() {
    return this.#loader.whenLoaded(undefined, () => {
      this.#core();
      /** @type {Promise<import("../index.js").ResumedIntent>[]} */
      const results = [];
      for (const record of this.#liveRecords()) {
        const [intent, key, saved] = [record.id, record.key, record.request];
        const running = this.#inflight.get(intent);
        let response;
        if (running) {
          response = running.join(undefined);
          record.free();
        } else if (saved !== undefined) {
          response = this.#start(record, fromSaved(saved), true).join(undefined);
        } else {
          record.free();
          continue;
        }
        results.push(response.then((response) => ({ intent, key, response })));
      }
      return Promise.all(results);
    });
  }

  /**
   * Every remembered intent, as plain objects.
   * @returns {import("../index.js").IntentRecord[]}
   */
  intents() {
    this.#loader.need("intents()");
    return this.#records().map((record) => {
      const view = JSON.parse(record.json());
      record.free();
      return view;
    });
  }

  /**
   * Forgets an intent (its next submission gets a new key); whether it was remembered.
   * @param {string} intent
   */
  forget(intent) {
    return this.#store.remove(String(intent));
  }

  /** Where intents persist: "local" or "memory". */
  get storage() {
    return this.#store.kind;
  }

  /** The endpoint relative inputs resolve against, if one was given. */
  get endpoint() {
    return this.#endpoint;
  }

  /**
   * The engine, made on first use: throws `OneJobConfigError` on a policy
   * core refuses. Expired records are pruned then, so apps that never call
   * resume() do not keep them either. Called only once the wasm has loaded
   * (the constructor checks; everything else runs under `whenLoaded`).
   */
  #core() {
    if (this.#engine) return this.#engine;
    const r = this.#retry;
    this.#engine = this.#loader.checked(
      this.#loader.wasm.Engine.new(
        r.baseMs, r.capMs, r.budget.capacity, r.budget.retryCost, r.budget.timeoutRetryCost,
        r.budget.successRefund, r.retryAfterCapMs, this.#retentionMs,
      ),
      "OneJobConfigError",
    );
    for (const record of this.#liveRecords()) record.free();
    return this.#engine;
  }

  /**
   * Submits `request` as (part of) the intent `name`. Synchronous up to the
   * in-flight check, so rapid double clicks cannot both start a send.
   * @param {Outgoing} request
   * @param {string | undefined} name
   * @returns {Promise<Response>}
   */
  #submit(request, name) {
    // Nothing is remembered or sent for a request that cannot go out.
    if (request.signal?.aborted) return Promise.reject(request.signal.reason);
    const core = this.#core();
    const loader = this.#loader;
    const fp = loader.fingerprint(request.method, request.url, request.body);
    const intent = loader.checked(loader.wasm.intentId(name, fp));
    const running = this.#inflight.get(intent);
    if (running) return running.join(request.signal);
    const loaded = this.#load(intent);
    const record = loader.checked(core.submit(loaded, intent, fp, savedJson(request), Date.now()));
    return this.#start(record, request, loaded !== undefined).join(request.signal);
  }

  /** Every readable stored record; unreadable ones are dropped with a warning. */
  #records() {
    const [records, dropped] = this.#store.all();
    for (const d of dropped) this.#events.warning(d.intent, d.reason);
    return records;
  }

  /** The unresolved, unexpired records; the others are removed. */
  #liveRecords() {
    const now = Date.now();
    return this.#records().filter((record) => {
      if (record.live(now)) return true;
      this.#store.remove(record.id);
      record.free();
      return false;
    });
  }

  /** @param {string} intent */
  #load(intent) {
    try {
      return this.#store.load(intent);
    } catch (dropped) {
      // What the store's load() throws for an unreadable record (of this intent).
      this.#events.warning(intent, /** @type {import("./store.js").Dropped} */ (dropped).reason);
      return undefined;
    }
  }

  /**
   * Starts sending and registers the send so later submissions join it. It
   * has its own abort controller. `stored`: whether the store already holds
   * the record (the send saves it before it fetches or waits, synchronously
   * when online).
   * @param {Intent} record
   * @param {Outgoing} request
   * @param {boolean} stored
   */
  #start(record, request, stored) {
    const intent = record.id;
    const controller = new AbortController();
    const running = new Running(controller);
    this.#inflight.set(intent, running);
    /** @param {Parameters<Running["settle"]>[0]} result */
    const settle = (result) => {
      // Unregistered and settled in one step: no submission can join a send
      // whose result was already handed out.
      this.#inflight.delete(intent);
      running.settle(result);
    };
    send(this.#sending, record, { ...request, signal: controller.signal }, stored).then(
      (response) => settle({ response }),
      (error) => settle({ error }),
    );
    return running;
  }
}
