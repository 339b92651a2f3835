// The SDK's JavaScript shell. It performs; the engine (onejob-core compiled to
// wasm, `./onejob.js`) decides: keys, fingerprints, which intent a submission
// belongs to, whether and how long to wait after each try (full jitter,
// `Retry-After`, the retry budget), and where SSE events end. Here live only
// what a JavaScript host does best: fetch, timers, storage, promises, streams
// (one module each under ./sdk/).
//
// Every entry (index.js, node.js, workerd.js, inline.js) loads the wasm its
// own way and calls `bind(wasm, load, instance)`.
import { configError, named } from "./sdk/errors.js";
import { Events } from "./sdk/events.js";
import { FINISHED, discardBody, gateway, isAcceptedJob, isEventStream, retryHeaders, tryOnce } from "./sdk/http.js";
import { readOptions } from "./sdk/options.js";
import { fromSaved, header, isObject, normalize, savedJson, unpackRequest } from "./sdk/request.js";
import { Running } from "./sdk/running.js";
import { resumable } from "./sdk/stream.js";
import { anyOf, offline, online, sleep } from "./sdk/wait.js";

/**
 * The engine, as wasm-bindgen's glue exports it (the browser entry names
 * what it uses, so a bundler leaves the rest of the glue out).
 * @typedef {Pick<typeof import("./onejob.js"), "Engine" | "Intent" | "EventSplitter" | "bodyBuffer" | "fingerprintBody" | "intentId" | "lastError">} Wasm
 */
/** @typedef {{ memory: WebAssembly.Memory }} Instance the wasm instance's exports (its memory, for the body buffer) */
/** @typedef {import("./onejob.js").Engine} Engine */
/** @typedef {import("./onejob.js").Attempts} Attempts */
/** @typedef {import("./onejob.js").Intent} Intent */
/** @typedef {import("./index.js").OneJobError} OneJobError */
/** @typedef {import("./sdk/request.js").Outgoing} Outgoing */

/** What `Engine.next` returns besides a delay: hand the answer over. */
const DELIVER = -1;

/**
 * The package's API over a wasm engine: `load()` loads it and resolves to
 * the instance's exports (`instance`: it already is loaded, these are its
 * exports). Until it has loaded, `new OneJob()` works and requests wait for
 * it; a load that failed is tried again by the next request. Returns the API
 * and `ready`, the first load.
 * @param {Wasm} wasm
 * @param {() => Instance | Promise<Instance>} load
 * @param {Instance} [instance]
 */
export function bind(wasm, load, instance) {
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
  const startLoading = () => {
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
  const ready = loaded ? Promise.resolve() : startLoading();
  /**
   * What the engine returned, or the named error it refused with (the
   * engine returns `undefined` and says why in `lastError()`).
   * @template T
   * @param {T | undefined} value
   * @param {import("./index.js").OneJobErrorName} [name]
   * @returns {T}
   */
  const refused = (value, name = "OneJobError") => {
    if (value === undefined) throw named(name, wasm.lastError());
    return value;
  };
  /** @param {string} what */
  const needEngine = (what) => {
    if (loaded) return;
    throw failed ?? named("OneJobError", `onejob: ${what} needs the SDK's wasm, which is still loading; await \`ready\` first`);
  };
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
  const whenLoaded = (signal, go) => {
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
    const attempt = failed ? startLoading() : loading;
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
  };

  /**
   * The engine's fingerprint of a request. The body is encoded as UTF-8
   * straight into the engine's memory (`encodeInto`, native and one pass),
   * not passed as a wasm-bindgen string (a JavaScript loop over its ASCII
   * prefix, then two reallocations): most of the call on a large body.
   */
  const encoder = new TextEncoder();
  /**
   * @param {string} method
   * @param {string} url
   * @param {unknown} body
   */
  const fingerprintOf = (method, url, body) => {
    const text = body == null ? "" : String(body);
    // Three bytes per UTF-16 unit at most.
    const capacity = text.length * 3;
    const at = wasm.bodyBuffer(capacity);
    // Loaded (every caller checks), so the memory is known.
    const { buffer } = /** @type {WebAssembly.Memory} */ (memory);
    const { written } = encoder.encodeInto(text, new Uint8Array(buffer, at, capacity));
    return wasm.fingerprintBody(method, url, written);
  };

  /**
   * @param {string} method
   * @param {string} url
   * @param {string | null} [body]
   */
  function fingerprint(method, url, body) {
    needEngine("fingerprint()");
    return fingerprintOf(String(method).toUpperCase(), String(url), body);
  }

  class OneJob {
    #endpoint;
    #token;
    #store;
    #retry;
    #retentionMs;
    #events;
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
     * @param {import("./index.js").OneJobOptions | null} [options]
     */
    constructor(options) {
      const o = readOptions(options, (text, intent) => refused(wasm.Intent.read(text, intent)));
      this.#endpoint = o.endpoint;
      this.#token = o.token;
      this.#store = o.store;
      this.#retry = o.retry;
      this.#retentionMs = o.retentionMs;
      this.#events = new Events(o.onEvent);
      // The policy's last checks are core's (see #core).
      if (loaded) this.#core();
      else {
        loading.then(() => {
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
     * @param {import("./index.js").FetchInput} input
     * @param {RequestInit | null} [init]
     * @param {import("./index.js").FetchOptions | null} [options]
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
          return whenLoaded(request.signal, () => this.#submit(request, name));
        });
      }
      let request;
      try {
        // Not a Request (one was read above).
        request = prepare(normalize(/** @type {string | URL} */ (input), init, this.#endpoint));
      } catch (error) {
        return Promise.reject(error);
      }
      return whenLoaded(request.signal, () => this.#submit(request, name));
    }

    /** A plain `fetch`-compatible function bound to this client, for `new OpenAI({ fetch: oj.fetcher() })`. */
    fetcher() {
      return (/** @type {import("./index.js").FetchInput} */ input, /** @type {RequestInit | undefined} */ init) => this.fetch(input, init);
    }

    /**
     * Re-sends every unresolved intent with its original key and resolves to their responses.
     * @returns {Promise<import("./index.js").ResumedIntent[]>}
     */
    resume() {
      return whenLoaded(undefined, () => {
        this.#core();
        /** @type {Promise<import("./index.js").ResumedIntent>[]} */
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
     * @returns {import("./index.js").IntentRecord[]}
     */
    intents() {
      needEngine("intents()");
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
      this.#engine = refused(
        wasm.Engine.new(
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
      const fp = fingerprintOf(request.method, request.url, request.body);
      const intent = refused(wasm.intentId(name, fp));
      const running = this.#inflight.get(intent);
      if (running) return running.join(request.signal);
      const loaded = this.#load(intent);
      const record = refused(core.submit(loaded, intent, fp, savedJson(request), Date.now()));
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
        this.#events.warning(intent, /** @type {import("./sdk/store.js").Dropped} */ (dropped).reason);
        return undefined;
      }
    }

    /**
     * Persists a record's JSON; a full store or quota becomes a warning.
     * `isNew`: whether the store lacks it (then room is made), when known.
     * @param {string} intent
     * @param {string} text
     * @param {boolean} [isNew]
     */
    #save(intent, text, isNew) {
      try {
        for (const d of this.#store.save(intent, text, isNew)) this.#events.warning(d.intent, d.reason);
      } catch (reason) {
        this.#events.warning(intent, `intent not persisted: ${reason}`);
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
      this.#send(record, { ...request, signal: controller.signal }, stored).then(
        (response) => settle({ response }),
        (error) => settle({ error }),
      );
      return running;
    }

    /**
     * The retry loop of one intent.
     * @param {Intent} record
     * @param {Outgoing} request
     * @param {boolean} stored
     * @returns {Promise<Response>}
     */
    async #send(record, request, stored) {
      const [intent, key, signal] = [record.id, record.key, request.signal];
      let attempts;
      let sent = 0;
      /** Background jobs accepted (202) so far: each is followed to its end, then asked for again. */
      let accepted = 0;
      let lastNetworkError;
      // While the browser says it is offline, the send waits for `online`
      // instead of spending attempts; all such waits share one deadline.
      const offlineDeadline = Date.now() + this.#retry.offlineWaitMs;
      // The first save makes room for a record the store lacks; later ones
      // overwrite it.
      /** @param {string} text */
      const save = (text) => {
        this.#save(intent, text, !stored);
        stored = true;
      };
      /**
       * @param {string} why
       * @param {number} status
       * @param {unknown} [cause]
       */
      const giveUp = (why, status, cause) => {
        save(record.giveUp(Date.now()));
        this.#events.emit("gave_up", intent, key, { reason: why, status });
        return named(
          "OneJobNetworkError",
          `onejob: gave up after ${sent} attempts: ${why}; resume() can ask again with the same key`,
          cause,
        );
      };
      try {
        const core = this.#core();
        attempts = core.attempts();
        for (;;) {
          // Online (the usual case), nothing is awaited before the fetch.
          if (offline()) await this.#waitWhileOffline(intent, key, offlineDeadline, signal, () => save(record.json()));
          save(record.attempt(Date.now()));
          sent += 1;
          this.#events.emit("attempt", intent, key, { attempt: record.attempts });
          // An abort during the fetch leaves the record as saved just above
          // (or forgotten meanwhile): the request may have reached the gateway.
          const { response, failure } = await tryOnce(request.url, this.#initFor(request, key), signal);
          if (response && isAcceptedJob(response)) {
            // A background job was accepted: follow it until it has finished,
            // then ask again with the same key, which replays its result.
            discardBody(response);
            // (A job whose end cannot be read, its view refused say, would
            // otherwise be accepted and followed forever.)
            accepted += 1;
            if (accepted > this.#retry.maxAttempts) throw giveUp("a background job was accepted, but its end could not be read", 202);
            await this.#followJob(request, intent, key, this.#serverDelay(response));
            continue;
          }
          if (response && response.headers.get("Idempotent-Replayed") === "true") {
            this.#events.emit("replayed", intent, key, { status: response.status });
          }
          if (!response) {
            // The network went away under the request: the attempt is not
            // counted, the same key goes again once back online.
            if (offline() && Date.now() < offlineDeadline) {
              sent -= 1;
              continue;
            }
            // Lost before or after reaching the gateway: with the same key a
            // resend is safe either way.
            lastNetworkError = failure;
          }
          const status = response?.status ?? 0;
          const [step, why] = await this.#step(core, attempts, response, sent, { intent, key, signal });
          if (step === DELIVER && response) {
            this.#events.emit("settled", intent, key, { status });
            if (!isEventStream(response)) {
              // Delivered: nothing left to remember, and the next identical
              // submission is a new intent with a new key.
              this.#store.discard(intent);
              return response;
            }
            // A stream is delivered once it has been read to its end: until
            // then a reload's resume() sends it again with the same key.
            const url = `${gateway(request.url, this.#endpoint)}/onejob/v1/jobs/${key}/stream?from=`;
            const init = this.#initFor({ ...request, method: "GET", body: null }, key);
            return resumable(wasm.EventSplitter, response, {
              reopen: (from, error, stop) => {
                const either = anyOf(signal, stop);
                return this.#reopenStream(intent, key, url + from, { ...init, signal: either }, either, error);
              },
              read: () => this.#store.discard(intent),
              signal,
            });
          }
          if (step >= 0) continue;
          // Out of attempts or budget (a final answer always has a response).
          const gaveUp = giveUp(why, status, lastNetworkError);
          if (response) return response;
          throw gaveUp;
        }
      } finally {
        attempts?.free();
        record.free();
      }
    }

    /**
     * Waits while the browser reports offline for its `online` event, until
     * `deadline` at most; the caller's signal ends the wait at once. Calls
     * `save` before it waits: a reload meanwhile finds the intent.
     * @param {string} intent
     * @param {string} key
     * @param {number} deadline
     * @param {AbortSignal | undefined} signal
     * @param {() => void} save
     */
    async #waitWhileOffline(intent, key, deadline, signal, save) {
      const started = Date.now();
      if (!offline() || started >= deadline) return;
      save();
      this.#events.emit("offline", intent, key, {});
      while (offline() && Date.now() < deadline) await online(deadline - Date.now(), signal);
      this.#events.emit("online", intent, key, { waitedMs: Date.now() - started });
    }

    /**
     * Polls a background job (`GET /onejob/v1/jobs/{key}`) until it has
     * finished: each wait is the job's `Retry-After`, or full-jitter backoff
     * when it gives none or cannot be reached. Polls are not attempts: the
     * job runs in the gateway's queue.
     * @param {Outgoing} request
     * @param {string} intent
     * @param {string} key
     * @param {number} accepted the 202's own wait (`Retry-After`), or -1
     */
    async #followJob(request, intent, key, accepted) {
      const why = "background job queued or running";
      const signal = request.signal;
      const url = `${gateway(request.url, this.#endpoint)}/onejob/v1/jobs/${key}`;
      const init = this.#initFor({ ...request, method: "GET", body: null }, key);
      let asked = accepted;
      for (let polls = 1; ; polls++) {
        const delay = asked >= 0 ? asked : this.#core().jitter(polls);
        await this.#backOff(intent, key, delay, why, asked >= 0, signal);
        const { response } = await tryOnce(url, init, signal);
        if (!response) {
          asked = -1;
        } else if (response.ok) {
          asked = this.#serverDelay(response);
          const view = await response.json();
          // Finished, or waiting for an operator (nothing will run it
          // again): asking again gives its answer.
          if (FINISHED.includes(view?.state) || view?.waiting_for_operator === true) return;
        } else if (response.status >= 400 && response.status < 500) {
          // Gone (past retention) or refused: asking again decides.
          discardBody(response);
          return;
        } else {
          asked = this.#serverDelay(response);
          discardBody(response);
        }
      }
    }

    /**
     * After a streamed answer's body failed: asks for the events after those
     * delivered (`url`) with the usual backoff and attempt limits, until the
     * gateway answers `200` (or the rules say stop).
     * @param {string} intent
     * @param {string} key
     * @param {string} url
     * @param {RequestInit} init
     * @param {AbortSignal} signal
     * @param {unknown} lastError
     * @returns {Promise<Response>}
     */
    async #reopenStream(intent, key, url, init, signal, lastError) {
      const core = this.#core();
      const attempts = core.attempts();
      /** @type {Response | undefined} */
      let response;
      // The read that failed counts as the first try.
      let sent = 1;
      try {
        for (;;) {
          const [step, why] = await this.#step(core, attempts, response, sent, { intent, key, signal, about: "stream interrupted: " });
          if (step < 0) {
            if (response) discardBody(response);
            this.#events.emit("gave_up", intent, key, { reason: why, status: response?.status ?? 0 });
            throw named("OneJobNetworkError", `onejob: ${why}; could not resume it after ${sent} tries`, lastError);
          }
          sent += 1;
          const outcome = await tryOnce(url, init, signal);
          response = outcome.response;
          if (response?.status === 200) return response;
          lastError = outcome.failure;
        }
      } finally {
        attempts.free();
      }
    }

    /**
     * One turn of a retry loop (`#send`'s and `#reopenStream`'s): core
     * decides from the last try's answer (`response`; none when it failed on
     * the way) and the `sent` tries so far. Resolves to `[step, why]`: step
     * is DELIVER, another negative (stop: out of attempts or budget, or a
     * final answer), or a delay already waited out, the answer's body
     * released first (its connection freed) and a `backoff` event emitted.
     * `why` is core's reason, after `about`.
     * @param {Engine} core
     * @param {Attempts} attempts
     * @param {Response | undefined} response
     * @param {number} sent
     * @param {{ intent: string, key: string, signal: AbortSignal | undefined, about?: string }} about
     * @returns {Promise<[number, string]>}
     */
    async #step(core, attempts, response, sent, { intent, key, signal, about = "" }) {
      const status = response?.status ?? 0;
      const step = core.next(attempts, status, retryHeaders(response), Date.now(), sent < this.#retry.maxAttempts);
      const why = about + attempts.reason;
      if (step >= 0) {
        if (response) discardBody(response);
        await this.#backOff(intent, key, step, why, attempts.serverAsked, signal);
      }
      return [step, why];
    }

    /**
     * Says why and how long it waits (a `backoff` event), then waits; the caller's signal ends the wait at once.
     * @param {string} intent
     * @param {string} key
     * @param {number} delayMs
     * @param {string} reason
     * @param {boolean} serverAsked
     * @param {AbortSignal | undefined} signal
     */
    #backOff(intent, key, delayMs, reason, serverAsked, signal) {
      this.#events.emit("backoff", intent, key, { delayMs, reason, serverAsked });
      return sleep(delayMs, signal);
    }

    /**
     * How long a response asks to wait (core reads the headers), or -1.
     * @param {Response} response
     */
    #serverDelay(response) {
      return this.#core().serverDelay(retryHeaders(response), Date.now());
    }

    /**
     * The `init` of one send: the app's headers plus the key and the token.
     * @param {Outgoing} request
     * @param {string} key
     */
    #initFor(request, key) {
      const headers = new Headers();
      for (const [name, value] of request.headers) headers.append(name, value);
      headers.set("Idempotency-Key", key);
      if (this.#token !== undefined && !header(request.headers, "authorization")) {
        headers.set("Authorization", `Bearer ${this.#token}`);
      }
      /** @type {RequestInit} */
      const init = { method: request.method, headers };
      if (request.body != null) init.body = request.body;
      if (request.signal) init.signal = request.signal;
      return init;
    }
  }

  // The package is minified without esbuild's --keep-names (which wraps
  // every function and class of the bundle, glue included: 630 B gzip); the
  // two public names are kept here.
  Object.defineProperty(OneJob, "name", { value: "OneJob" });
  Object.defineProperty(fingerprint, "name", { value: "fingerprint" });
  return { OneJob, fingerprint, ready };
}
