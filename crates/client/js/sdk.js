// The SDK's JavaScript shell. It performs; the engine (onejob-core compiled to
// wasm, `./onejob.js`) decides: keys, fingerprints, which intent a submission
// belongs to, whether and how long to wait after each try (full jitter,
// `Retry-After`, the retry budget), and where SSE events end. Here live only
// what a JavaScript host does best: fetch, timers, storage, promises, streams.
//
// Every entry (index.js, node.js, workerd.js, inline.js) loads the wasm its
// own way and calls `bind(wasm, ready, loadedNow)`.

const PREFIX = "onejob:v1:intent:";
/** The most records kept: past it the least recently updated are dropped. */
const MAX_INTENTS = 500;
const DROPPED_FOR_ROOM = "unresolved intent dropped: the store keeps at most 500 intents (MAX_INTENTS)";
/** What `Engine.next` returns besides a delay. */
const DELIVER = -1;
const FINISHED = ["completed", "dead", "interrupted", "cancelled"];

/** An `Error` whose `name` lets `catch` blocks and TypeScript tell onejob's failures apart. */
function named(name, message, ...cause) {
  const error = new Error(message);
  error.name = name;
  if (cause.length) error.cause = cause[0];
  return error;
}
const configError = (message) => named("OneJobConfigError", `onejob: ${message}`);

/**
 * The package's API over a wasm engine: `ready` settles when the engine can
 * be used (`loadedNow`: it already can). Until then `new OneJob()` works and
 * requests wait for it.
 */
export function bind(wasm, ready, loadedNow = false) {
  let loaded = loadedNow;
  let loadError;
  ready.then(
    () => (loaded = true),
    (error) => (loadError = named("OneJobError", `onejob: the SDK's wasm could not be loaded: ${error}`, error)),
  );
  const needEngine = (what) => {
    if (loadError) throw loadError;
    if (!loaded) throw named("OneJobError", `onejob: ${what} needs the SDK's wasm, which is still loading; await \`ready\` first`);
  };
  /** Runs `go` once the engine is loaded; a caller's abort rejects at once. */
  const whenLoaded = (signal, go) => {
    if (loaded) return go();
    if (loadError) return Promise.reject(loadError);
    if (signal?.aborted) return Promise.reject(signal.reason);
    return new Promise((resolve, reject) => {
      const aborted = () => reject(signal.reason);
      signal?.addEventListener("abort", aborted, { once: true });
      ready.then(
        () => {
          signal?.removeEventListener("abort", aborted);
          if (!signal?.aborted) resolve(go());
        },
        () => reject(loadError),
      );
    });
  };

  function fingerprint(method, url, body) {
    needEngine("fingerprint()");
    return wasm.fingerprint(String(method).toUpperCase(), String(url), body ?? undefined);
  }

  class OneJob {
    #endpoint;
    #token;
    #store;
    #retry;
    #retentionMs;
    #events;
    /** The engine (retry policy and budget), made once the wasm is loaded. */
    #engine;
    /** Intents being sent right now, so a second submission joins the first. */
    #inflight = new Map();

    /** Throws `OneJobConfigError` on a malformed option. */
    constructor(options) {
      const o = readOptions(options);
      this.#endpoint = o.endpoint;
      this.#token = o.token;
      this.#store = o.store;
      this.#retry = o.retry;
      this.#retentionMs = o.retentionMs;
      this.#events = new Events(o.onEvent);
      // The policy's last checks are core's; expired records are pruned at
      // once, so apps that never call resume() do not keep them either.
      const prune = () => {
        this.#core();
        for (const record of this.#liveRecords()) record.free();
      };
      if (loaded) prune();
      else {
        ready.then(() => {
          try {
            prune();
          } catch {
            // A policy core refuses: reported by the first request.
          }
        }, () => {});
      }
    }

    /** Like `fetch(input, init)`, with one idempotency key per intent. */
    fetch(input, init, options) {
      const name = isObject(options) && typeof options.intent === "string" ? options.intent : undefined;
      const background = isObject(options) && options.background === true;
      // The background preference travels in the request itself, so a stored
      // intent resumed after a reload asks for the same.
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
        request = prepare(normalize(input, init, this.#endpoint));
      } catch (error) {
        return Promise.reject(error);
      }
      return whenLoaded(request.signal, () => this.#submit(request, name));
    }

    /** A plain `fetch`-compatible function bound to this client, for `new OpenAI({ fetch: oj.fetcher() })`. */
    fetcher() {
      return (input, init) => this.fetch(input, init);
    }

    /** Re-sends every unresolved intent with its original key and resolves to their responses. */
    resume() {
      return whenLoaded(undefined, () => {
        const results = [];
        for (const record of this.#liveRecords()) {
          const [intent, key, saved] = [record.id, record.key, record.request];
          const running = this.#inflight.get(intent);
          let response;
          if (running) {
            response = running.join(undefined);
            record.free();
          } else if (saved !== undefined) {
            response = this.#start(record, fromSaved(saved)).join(undefined);
          } else {
            record.free();
            continue;
          }
          results.push(response.then((response) => ({ intent, key, response })));
        }
        return Promise.all(results);
      });
    }

    /** Every remembered intent, as plain objects. */
    intents() {
      needEngine("intents()");
      return this.#records().map((record) => {
        const view = JSON.parse(record.json());
        record.free();
        return view;
      });
    }

    /** Forgets an intent (its next submission gets a new key); whether it was remembered. */
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

    #core() {
      needEngine("the client");
      const r = this.#retry;
      this.#engine ??= new wasm.Engine(
        r.baseMs, r.capMs, r.budget.capacity, r.budget.retryCost, r.budget.timeoutRetryCost,
        r.budget.successRefund, r.retryAfterCapMs, this.#retentionMs,
      );
      return this.#engine;
    }

    /**
     * Submits `request` as (part of) the intent `name`. Synchronous up to the
     * in-flight check, so rapid double clicks cannot both start a send.
     */
    #submit(request, name) {
      let core, fp, intent;
      try {
        core = this.#core();
        fp = wasm.fingerprint(request.method, request.url, request.body ?? undefined);
        intent = wasm.intentId(name, fp);
      } catch (error) {
        return Promise.reject(error);
      }
      const running = this.#inflight.get(intent);
      if (running) return running.join(request.signal);
      const record = core.submit(this.#load(intent), intent, fp, savedJson(request), Date.now());
      return this.#start(record, request).join(request.signal);
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

    #load(intent) {
      try {
        return this.#store.load(intent);
      } catch (dropped) {
        this.#events.warning(dropped.intent, dropped.reason);
        return undefined;
      }
    }

    /** Persists a record's JSON; a full store or quota becomes a warning. */
    #save(intent, text) {
      try {
        for (const d of this.#store.save(intent, text)) this.#events.warning(d.intent, d.reason);
      } catch (reason) {
        this.#events.warning(intent, `intent not persisted: ${reason}`);
      }
    }

    /** Starts sending and registers the send so later submissions join it. It has its own abort controller. */
    #start(record, request) {
      const intent = record.id;
      this.#save(intent, record.json());
      const controller = new AbortController();
      const running = new Running(controller);
      this.#inflight.set(intent, running);
      const settle = (result) => {
        // Unregistered and settled in one step: no submission can join a send
        // whose result was already handed out.
        this.#inflight.delete(intent);
        running.settle(result);
      };
      this.#send(record, { ...request, signal: controller.signal }).then(
        (response) => settle({ response }),
        (error) => settle({ error }),
      );
      return running;
    }

    /** The retry loop of one intent. */
    async #send(record, request) {
      const [intent, key, signal] = [record.id, record.key, request.signal];
      const core = this.#core();
      const attempts = core.attempts();
      let sent = 0;
      let lastNetworkError;
      // While the browser says it is offline, the send waits for `online`
      // instead of spending attempts; all such waits share one deadline.
      const offlineDeadline = Date.now() + this.#retry.offlineWaitMs;
      try {
        for (;;) {
          await this.#waitWhileOffline(intent, key, offlineDeadline, signal);
          this.#save(intent, record.attempt(Date.now()));
          sent += 1;
          this.#events.emit("attempt", intent, key, { attempt: record.attempts });
          let outcome;
          try {
            outcome = await tryOnce(request.url, this.#initFor(request, key), signal);
          } catch (aborted) {
            this.#save(intent, record.json());
            throw aborted;
          }
          const { response, failure } = outcome;
          if (response && isAcceptedJob(response)) {
            // A background job was accepted: follow it until it has finished,
            // then ask again with the same key, which replays its result.
            discardBody(response);
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
          const step = core.next(attempts, status, ...retryHeaders(response), Date.now(), sent < this.#retry.maxAttempts);
          const why = attempts.reason;
          if (step === DELIVER && response) {
            this.#events.emit("settled", intent, key, { status });
            if (!isEventStream(response)) {
              // Delivered: nothing left to remember, and the next identical
              // submission is a new intent with a new key.
              this.#store.remove(intent);
              return response;
            }
            // A stream is delivered once it has been read to its end: until
            // then a reload's resume() sends it again with the same key.
            const url = `${gateway(request.url, this.#endpoint)}/onejob/v1/jobs/${key}/stream?from=`;
            const init = this.#initFor({ ...request, method: "GET", body: null }, key);
            return resumable(response, {
              reopen: (from, error) => this.#reopenStream(intent, key, url + from, init, signal, error),
              read: () => this.#store.remove(intent),
              signal,
            });
          }
          if (step >= 0) {
            // The answer is not delivered: release its connection now.
            if (response) discardBody(response);
            await this.#backOff(intent, key, step, why, attempts.serverAsked, signal);
            continue;
          }
          // Out of attempts or budget (a final answer always has a response).
          this.#save(intent, record.giveUp(Date.now()));
          this.#events.emit("gave_up", intent, key, { reason: why, status });
          if (response) return response;
          throw named(
            "OneJobNetworkError",
            `onejob: gave up after ${sent} attempts: ${why}; resume() can ask again with the same key`,
            lastNetworkError,
          );
        }
      } finally {
        attempts.free();
        record.free();
      }
    }

    /**
     * Waits while the browser reports offline for its `online` event, until
     * `deadline` at most; the caller's signal ends the wait at once.
     */
    async #waitWhileOffline(intent, key, deadline, signal) {
      const started = Date.now();
      if (!offline() || started >= deadline) return;
      this.#events.emit("offline", intent, key, {});
      while (offline() && Date.now() < deadline) await online(deadline - Date.now(), signal);
      this.#events.emit("online", intent, key, { waitedMs: Date.now() - started });
    }

    /**
     * Polls a background job (`GET /onejob/v1/jobs/{key}`) until it has
     * finished: each wait is the job's `Retry-After`, or full-jitter backoff
     * when it gives none or cannot be reached. Polls are not attempts: the
     * job runs in the gateway's queue.
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
     */
    async #reopenStream(intent, key, url, init, signal, lastError) {
      const core = this.#core();
      const attempts = core.attempts();
      let response;
      // The read that failed counts as the first try.
      let sent = 1;
      try {
        for (;;) {
          const status = response?.status ?? 0;
          const step = core.next(attempts, status, ...retryHeaders(response), Date.now(), sent < this.#retry.maxAttempts);
          const why = `stream interrupted: ${attempts.reason}`;
          if (step < 0) {
            this.#events.emit("gave_up", intent, key, { reason: why, status });
            throw named("OneJobNetworkError", `onejob: ${why}; could not resume it after ${sent} tries`, lastError);
          }
          await this.#backOff(intent, key, step, why, attempts.serverAsked, signal);
          sent += 1;
          const outcome = await tryOnce(url, init, signal);
          response = outcome.response;
          if (response?.status === 200) return response;
          if (response) discardBody(response);
          lastError = outcome.failure;
        }
      } finally {
        attempts.free();
      }
    }

    /** Says why and how long it waits (a `backoff` event), then waits; the caller's signal ends the wait at once. */
    #backOff(intent, key, delayMs, reason, serverAsked, signal) {
      this.#events.emit("backoff", intent, key, { delayMs, reason, serverAsked });
      return sleep(delayMs, signal);
    }

    /** How long a response asks to wait (core reads the headers), or -1. */
    #serverDelay(response) {
      const [, retryAfterMs, retryAfter] = retryHeaders(response);
      return this.#core().serverDelay(retryAfterMs, retryAfter, Date.now());
    }

    /** The `init` of one send: the app's headers plus the key and the token. */
    #initFor(request, key) {
      const headers = new Headers();
      for (const [name, value] of request.headers) headers.append(name, value);
      headers.set("Idempotency-Key", key);
      if (this.#token !== undefined && !header(request.headers, "authorization")) {
        headers.set("Authorization", `Bearer ${this.#token}`);
      }
      const init = { method: request.method, headers };
      if (request.body != null) init.body = request.body;
      if (request.signal) init.signal = request.signal;
      return init;
    }
  }

  // ---- Streams -------------------------------------------------------------

  /**
   * `response` with a body that resumes itself: the caller gets whole SSE
   * events only, counted; when reading fails, the events after those are asked
   * for (`…/stream?from=N`) and the same body goes on. A clean end is the end:
   * the gateway itself ends an interrupted stream with an error event.
   */
  function resumable(response, { reopen, read, signal }) {
    let reader = response.body.getReader();
    let splitter = new wasm.EventSplitter();
    let delivered = 0;
    let cancelled = false;
    const body = new ReadableStream({
      async pull(controller) {
        for (;;) {
          let chunk;
          try {
            chunk = await reader.read();
          } catch (error) {
            if (signal?.aborted) throw signal.reason;
            if (cancelled) return;
            const next = await reopen(delivered, error);
            if (cancelled) return discardBody(next);
            reader = next.body.getReader();
            // The partial event is sent again, whole, by the new stream.
            splitter.free();
            splitter = new wasm.EventSplitter();
            continue;
          }
          if (chunk.done) {
            // Whatever follows the last blank line, as it came.
            const rest = splitter.rest();
            splitter.free();
            if (rest.length && !cancelled) controller.enqueue(rest);
            try {
              controller.close();
            } catch {
              // Already closed by a cancel.
            }
            read();
            return;
          }
          const events = splitter.push(chunk.value);
          if (splitter.events > 0) {
            delivered += splitter.events;
            // The whole answer is here (SDKs often cancel the body right after).
            if (splitter.ended) read();
            controller.enqueue(events);
            return;
          }
        }
      },
      cancel(reason) {
        cancelled = true;
        return reader.cancel(reason);
      },
    });
    return new Response(body, { status: response.status, statusText: response.statusText, headers: response.headers });
  }

  // ---- Storage ---------------------------------------------------------------

  /**
   * Where intents are remembered: `localStorage` (survives reloads) or memory.
   * Entries live under `onejob:v1:intent:<intent>` as the engine's JSON; one
   * that does not read back is removed and reported as a warning.
   */
  class IntentStore {
    constructor(storage) {
      this.storage = storage;
      this.kind = storage ? "local" : "memory";
      this.memory = new Map();
    }

    /** `localStorage`, if present and usable (it throws in some private modes). */
    static local() {
      try {
        const storage = globalThis.localStorage;
        if (!storage) return undefined;
        storage.setItem(`${PREFIX}__probe`, "1");
        storage.removeItem(`${PREFIX}__probe`);
        return new IntentStore(storage);
      } catch {
        return undefined;
      }
    }

    get(name) {
      return this.storage ? this.storage.getItem(name) ?? undefined : this.memory.get(name);
    }

    /** The storage names of every entry. */
    names() {
      if (!this.storage) return [...this.memory.keys()];
      const names = [];
      for (let i = 0; i < this.storage.length; i++) {
        const name = this.storage.key(i);
        if (name?.startsWith(PREFIX)) names.push(name);
      }
      return names;
    }

    /** The record of `intent`, or undefined; throws `{intent, reason}` (after removing it) when unreadable. */
    load(intent) {
      const text = this.get(PREFIX + intent);
      if (text === undefined) return undefined;
      try {
        return wasm.Intent.read(text, intent);
      } catch (error) {
        this.remove(intent);
        throw { intent, reason: error.message };
      }
    }

    /** Saves a record, first making room for a new one; returns the records dropped for room. */
    save(intent, text) {
      const name = PREFIX + intent;
      const dropped = this.get(name) === undefined ? this.#makeRoom() : [];
      if (!this.storage) {
        this.memory.set(name, text);
        return dropped;
      }
      try {
        this.storage.setItem(name, text);
      } catch {
        throw "localStorage refused the write (quota?)";
      }
      return dropped;
    }

    /** Drops the least recently updated records until one more fits. */
    #makeRoom() {
      if (this.names().length < MAX_INTENTS) return [];
      const [records, dropped] = this.all();
      records.sort((a, b) => a.updated - b.updated);
      for (const record of records.splice(0, records.length - MAX_INTENTS + 1)) {
        this.remove(record.id);
        dropped.push({ intent: record.id, reason: DROPPED_FOR_ROOM });
      }
      for (const record of records) record.free();
      return dropped;
    }

    remove(intent) {
      const name = PREFIX + intent;
      const existed = this.get(name) !== undefined;
      if (this.storage) this.storage.removeItem(name);
      else this.memory.delete(name);
      return existed;
    }

    /** Every readable record, and the unreadable ones it removed. */
    all() {
      const records = [];
      const dropped = [];
      for (const name of this.names()) {
        try {
          const record = this.load(name.slice(PREFIX.length));
          if (record) records.push(record);
        } catch (d) {
          dropped.push(d);
        }
      }
      return [records, dropped];
    }
  }

  /** `new OneJob(options)`: reads and checks the options; a wrong value is a `OneJobConfigError` naming the field. */
  function readOptions(options) {
    const get = (object, name) => (isObject(object) ? object[name] : undefined);
    const string = (object, name) => {
      const value = get(object, name);
      if (value == null) return undefined;
      if (typeof value !== "string") throw configError(`${name} must be a string`);
      return value;
    };
    const number = (object, name, fallback, min) => {
      const value = get(object, name);
      if (value === undefined) return fallback;
      if (typeof value !== "number" || !Number.isInteger(value) || value < min) {
        throw configError(`${name} must be a whole number ≥ ${min}`);
      }
      return value;
    };
    const tokens = (object, name, fallback, min) => Math.min(number(object, name, fallback, min), 0xffffffff);

    let store;
    const storage = string(options, "storage");
    if (storage === undefined || storage === "auto") store = IntentStore.local() ?? new IntentStore();
    else if (storage === "local") {
      store = IntentStore.local();
      if (!store) throw configError('storage "local": this runtime has no usable localStorage');
    } else if (storage === "memory") store = new IntentStore();
    else throw configError(`storage must be "auto", "local" or "memory", not "${storage}"`);
    const onEvent = get(options, "onEvent");
    if (onEvent != null && typeof onEvent !== "function") throw configError("onEvent must be a function");
    const retry = get(options, "retry");
    const budget = get(retry, "budget");
    return {
      endpoint: string(options, "endpoint")?.replace(/\/+$/, ""),
      token: string(options, "token"),
      store,
      onEvent: onEvent ?? undefined,
      retry: {
        maxAttempts: number(retry, "maxAttempts", 4, 1),
        baseMs: number(retry, "baseMs", 500, 1),
        capMs: number(retry, "capMs", 20_000, 1),
        retryAfterCapMs: number(retry, "retryAfterCapMs", 60_000, 0),
        offlineWaitMs: number(retry, "offlineWaitMs", 300_000, 0),
        budget: {
          capacity: tokens(budget, "capacity", 500, 1),
          retryCost: tokens(budget, "retryCost", 5, 1),
          timeoutRetryCost: tokens(budget, "timeoutRetryCost", 10, 1),
          successRefund: tokens(budget, "successRefund", 1, 0),
        },
      },
      // The gateway's default retention: a key is remembered as long as the gateway keeps its job.
      retentionMs: number(options, "retentionMs", 86_400_000, 1),
    };
  }

  return { OneJob, fingerprint };
}

// ---- Helpers without state ---------------------------------------------------

const isObject = (value) => value !== null && (typeof value === "object" || typeof value === "function");

/** A header's value from `[name, value]` pairs, by name in any case. */
const header = (pairs, name) => pairs.find(([n]) => n.toLowerCase() === name)?.[1];

/**
 * Events for UIs, delivered to `onEvent` as plain objects. A throwing handler
 * is the app's bug and must not break the request: its exception is swallowed.
 */
class Events {
  constructor(handler) {
    this.handler = handler;
  }

  emit(type, intent, key, fields) {
    if (!this.handler) return;
    try {
      this.handler({ type, intent, key, at: Date.now(), ...fields });
    } catch {
      // See the class comment.
    }
  }

  warning(intent, message) {
    this.emit("warning", intent, "", { message });
  }
}

/**
 * One send shared by every submission of an intent (double clicks join the
 * request already running). Each caller may abort its own wait at once; the
 * network request and any backoff stop only when every caller that could
 * abort has, so one impatient caller cannot cancel another's result.
 *
 * The result goes to the callers still waiting: every one but the last gets a
 * clone of the response, the last gets the response itself. So each body is
 * read or cancelled by its own caller alone. (Keeping the original unread and
 * handing out clones made `body.cancel()` wait forever: by the Streams rules a
 * cancelled clone waits for its unread sibling, and the `openai` package
 * cancels a body before each of its retries.)
 */
class Running {
  constructor(controller) {
    this.controller = controller;
    /** Callers waiting, in the order they joined: `{ resolve, reject }`. */
    this.waiting = [];
    /** Callers with a signal that has not aborted. */
    this.abortable = 0;
    /** A caller without a signal joined: the send can no longer be aborted. */
    this.pinned = false;
  }

  /** A caller's view of the send: its response, or the caller's own abort reason as soon as its `signal` aborts. */
  join(signal) {
    if (!signal) {
      this.pinned = true;
      return this.#wait();
    }
    this.abortable += 1;
    if (signal.aborted) {
      this.#release(signal.reason);
      return Promise.reject(signal.reason);
    }
    let entry;
    const promise = this.#wait((e) => (entry = e));
    signal.addEventListener(
      "abort",
      () => {
        const at = this.waiting.indexOf(entry);
        if (at >= 0) {
          this.waiting.splice(at, 1);
          entry.reject(signal.reason);
        }
        this.#release(signal.reason);
      },
      { once: true },
    );
    return promise;
  }

  /**
   * Hands the send's result to every caller still waiting; with nobody left,
   * the body is cancelled so the connection is freed. Called once, by the
   * send itself, in the same step that unregisters it.
   */
  settle({ response, error }) {
    const waiting = this.waiting;
    this.waiting = [];
    if (!response) {
      for (const { reject } of waiting) reject(error);
      return;
    }
    const last = waiting.pop();
    if (!last) {
      // Everyone aborted, which usually errors the body already.
      discardBody(response);
      return;
    }
    // Clone before the original changes hands: a read body cannot be cloned.
    for (const { resolve, reject } of waiting) {
      try {
        resolve(response.clone());
      } catch (error) {
        reject(error);
      }
    }
    last.resolve(response);
  }

  #wait(register) {
    return new Promise((resolve, reject) => {
      const entry = { resolve, reject };
      this.waiting.push(entry);
      register?.(entry);
    });
  }

  /** One caller stopped waiting; abort the send when nobody who could is left. */
  #release(reason) {
    this.abortable = Math.max(0, this.abortable - 1);
    if (this.abortable === 0 && !this.pinned) this.controller.abort(reason);
  }
}

/** Turns `fetch(input, init)` arguments into one request onejob can fingerprint, persist and re-send. */
function normalize(input, init, endpoint) {
  const get = (name) => (isObject(init) ? init[name] : undefined);
  // A string, or a `URL` (whose toString() is its href).
  const url = resolve(typeof input === "string" ? input : String(input), endpoint);
  const method = typeof get("method") === "string" ? get("method").toUpperCase() : "GET";
  const headers = [...new Headers(get("headers") ?? undefined)];
  let body = get("body");
  if (body == null) body = null;
  else if (typeof body !== "string") throw configError("fetch body must be a string (onejob fingerprints and persists it)");
  // fetch would throw a TypeError, which must not look like a network error.
  if (body !== null && isBodiless(method)) throw configError("a GET or HEAD request cannot have a body");
  const signal = typeof AbortSignal === "function" && get("signal") instanceof AbortSignal ? get("signal") : undefined;
  return { url, method, headers, body, signal };
}

const isBodiless = (method) => method === "GET" || method === "HEAD";

/** An absolute URL: relative inputs go under `endpoint` (its path kept), else resolve against the page. */
function resolve(raw, endpoint) {
  try {
    if (raw.includes("://")) return new URL(raw).href;
    if (endpoint !== undefined) return new URL(raw.startsWith("/") ? endpoint + raw : `${endpoint}/${raw}`).href;
    return new URL(raw, globalThis.location?.href).href;
  } catch {
    throw configError(`not a URL: ${raw}`);
  }
}

/** Reads a `Request` input into plain `[url, init]` form. */
async function unpackRequest(input, init) {
  const merged = {};
  for (const name of ["method", "headers", "signal"]) {
    const fromInit = isObject(init) ? init[name] : undefined;
    merged[name] = fromInit === undefined ? input[name] : fromInit;
  }
  let body = isObject(init) ? init.body : undefined;
  // A GET or HEAD `Request` has no body; reading one gives "", which fetch refuses.
  if (body === undefined && !isBodiless(String(merged.method).toUpperCase())) body = await input.clone().text();
  merged.body = body;
  return [input.url, merged];
}

/** What `resume()` needs after a reload, as the engine stores it; the credential is not stored. */
function savedJson({ url, method, headers, body }) {
  const kept = headers.filter(([name]) => !["authorization", "idempotency-key"].includes(name.toLowerCase()));
  return JSON.stringify({ url, method, headers: kept, body });
}

function fromSaved(text) {
  const { url, method, headers, body } = JSON.parse(text);
  return { url, method, headers, body, signal: undefined };
}

/** The headers core reads to decide a retry: `x-should-retry`, `retry-after-ms`, `Retry-After`. */
function retryHeaders(response) {
  const get = (name) => response?.headers.get(name) ?? undefined;
  return [get("x-should-retry"), get("retry-after-ms"), get("retry-after")];
}

/** Where the gateway of `url` answers: the endpoint when `url` is under it, else `url`'s origin. */
function gateway(url, endpoint) {
  if (endpoint !== undefined && url.startsWith(`${endpoint}/`)) return endpoint;
  return new URL(url).origin;
}

/** A `202` for a background job (`Prefer: respond-async`). */
const isAcceptedJob = (response) =>
  response.status === 202 && (response.headers.get("Preference-Applied") ?? "").includes("respond-async");

/** Whether `response` is a streamed answer worth resuming. */
const isEventStream = (response) =>
  response.status === 200 && response.body !== null && (response.headers.get("content-type") ?? "").startsWith("text/event-stream");

/**
 * One fetch: `{ response }`, or `{ failure }` for a request that failed on
 * the way; rejects with the caller's abort reason when it aborted.
 */
async function tryOnce(url, init, signal) {
  if (typeof globalThis.fetch !== "function") throw configError("this runtime has no fetch()");
  try {
    return { response: await globalThis.fetch(url, init) };
  } catch (failure) {
    if (signal?.aborted) throw signal.reason;
    return { failure };
  }
}

/**
 * Cancels a response's body nobody will read, so its connection is freed. A
 * failed cancel is of no interest, but must not go unhandled (Node ends the
 * process on an unhandled rejection).
 */
function discardBody(response) {
  response.body?.cancel().catch(() => {});
}

/** Sleeps `ms`, or rejects with the signal's reason as soon as it aborts. */
function sleep(ms, signal) {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const timer = setTimeout(resolve, ms);
    signal?.addEventListener(
      "abort",
      () => {
        clearTimeout(timer);
        reject(signal.reason);
      },
      { once: true },
    );
  });
}

/** Whether the host says it is offline (`navigator.onLine === false`); hosts without the flag never are. */
const offline = () => globalThis.navigator?.onLine === false;

/**
 * Resolves at the host's next `online` event or after `ms`, whichever is
 * first; rejects with the signal's reason as soon as it aborts.
 */
function online(ms, signal) {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    globalThis.addEventListener?.("online", resolve, { once: true });
    setTimeout(resolve, ms);
    signal?.addEventListener("abort", () => reject(signal.reason), { once: true });
  });
}
