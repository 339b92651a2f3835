// The harness of the SDK scenarios (scenarios.mjs), shared by Node
// (node.test.mjs) and Chromium (chrome.test.mjs): a scripted
// `globalThis.fetch` that records every call (these tests check the SDK's own
// logic; the end-to-end tests run it against the real gateway), a client
// whose events are collected, and a few assertions. No Node-only imports:
// the same file runs in a browser page.

/** The SDK module under test (`OneJob`, `fingerprint`, maybe `ready`), set by `useSdk`. */
let sdk = null;

/** Tells the harness which SDK module `client` builds its clients with. */
export function useSdk(module) {
  sdk = module;
}

/**
 * Installs a fresh stub on `globalThis.fetch` (the SDK looks `fetch` up when
 * it sends) with `steps`: an array of `{status, headers, body, delayMs,
 * abortable, networkError, openBody, drop}`, one per call; past the end,
 * 200. The stub ignores the request's signal unless `abortable` (during
 * `delayMs`).
 */
export function script(steps = []) {
  globalThis.__onejob = { script: structuredClone(steps), calls: [], cancelled: 0 };
  globalThis.fetch = async (url, init = {}) => {
    new Request(url, init); // throws TypeError exactly where fetch would (a GET with a body, say)
    const headers = new Headers(init.headers);
    globalThis.__onejob.calls.push({
      url: String(url),
      key: headers.get("Idempotency-Key"),
      authorization: headers.get("Authorization"),
      method: init.method ?? "GET",
      body: init.body ?? null,
      at: performance.now(),
    });
    const step = globalThis.__onejob.script.shift() ?? { status: 200 };
    if (step.delayMs) {
      await new Promise((resolve, reject) => {
        setTimeout(resolve, step.delayMs);
        // Like a real fetch: the caller's abort rejects the request at once.
        if (step.abortable) init.signal?.addEventListener("abort", () => reject(init.signal.reason), { once: true });
      });
    }
    if (step.networkError) throw new TypeError("fetch failed");
    let body = step.body ?? JSON.stringify({ ok: true, n: globalThis.__onejob.calls.length });
    if (step.openBody) { // a body that stays open until read or cancelled, counting cancels
      const bytes = new TextEncoder().encode(body);
      body = new ReadableStream({ start: (c) => c.enqueue(bytes), cancel: () => { globalThis.__onejob.cancelled += 1; } });
    }
    if (step.drop) { // the connection drops once the body's bytes are read
      const bytes = new TextEncoder().encode(body);
      body = new ReadableStream({ start: (c) => c.enqueue(bytes), pull: (c) => c.error(new TypeError("terminated")) });
    }
    return new Response(body, { status: step.status ?? 200, headers: step.headers ?? {} });
  };
}

/** The recorded calls: `{url, key, authorization, method, body, at}` (`key` "" when none was sent). */
export function calls() {
  return globalThis.__onejob.calls.map((c) => ({ ...c, key: c.key ?? "" }));
}

/** How many response bodies of the stub were cancelled (`openBody` steps). */
export function cancelled() {
  return globalThis.__onejob.cancelled;
}

/** `new OneJob(options)` with an `onEvent` that collects every event (see `events`). */
export function client(options) {
  globalThis.__onejob_events = [];
  return new sdk.OneJob({ ...options, onEvent: (e) => globalThis.__onejob_events.push(e) });
}

/** The types of the events seen so far. */
export function events() {
  return globalThis.__onejob_events.map((e) => e.type);
}

/** The intents of the `warning` events seen so far. */
export function warnings() {
  return globalThis.__onejob_events.filter((e) => e.type === "warning").map((e) => e.intent);
}

/**
 * `oj.fetch("/v1/chat/completions", {method: "POST", body, headers, signal}, {intent})`,
 * called at once (as a click would).
 */
export function post(oj, body, intent, signal) {
  const init = { method: "POST", body, headers: { "Content-Type": "application/json" } };
  if (signal) init.signal = signal;
  return oj.fetch("/v1/chat/completions", init, intent === undefined ? {} : { intent });
}

/** Awaits `promise`, but rejects with "timed out" after `ms`: a hang must fail the test, not stall the suite. */
export function within(ms, promise) {
  let timer;
  const timeout = new Promise((_, reject) => { timer = setTimeout(() => reject(new Error(`timed out after ${ms} ms`)), ms); });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

/** `promise`'s outcome, `{ value }` or `{ error }`, with a handler attached at once (no unhandled rejection). */
export function settle(promise) {
  return Promise.resolve(promise).then((value) => ({ value }), (error) => ({ error }));
}

export const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * The identity of a request as the gateway's core computes it
 * (`Fingerprint::of_request` / `of_bytes`), written out independently of the
 * SDK: SHA-256 over the framed parts `onejob/fingerprint/v1`, the method
 * (upper case), the path and query, "json" or "bytes", and the canonical body
 * (given here already canonical), each preceded by its length as a big-endian u64.
 */
export async function coreFingerprint(method, path, kind, body) {
  const parts = ["onejob/fingerprint/v1", method.toUpperCase(), path, kind, body].map((p) => new TextEncoder().encode(p));
  const framed = new Uint8Array(parts.reduce((n, p) => n + 8 + p.length, 0));
  let at = 0;
  for (const part of parts) {
    new DataView(framed.buffer).setBigUint64(at, BigInt(part.length));
    framed.set(part, at + 8);
    at += 8 + part.length;
  }
  const digest = new Uint8Array(await crypto.subtle.digest("SHA-256", framed));
  return Array.from(digest, (b) => b.toString(16).padStart(2, "0")).join("");
}

// Assertions, the same in Node and in a browser page.

const show = (value) => {
  if (typeof value === "string") return JSON.stringify(value);
  try { return JSON.stringify(value) ?? String(value); } catch { return String(value); }
};

export class AssertionError extends Error {
  name = "AssertionError";
}

/** Fails with `message` unless `condition`. */
export function assert(condition, message = "assertion failed") {
  if (!condition) throw new AssertionError(message);
}

/** `actual === expected` (Object.is). */
export function equal(actual, expected, message) {
  if (!Object.is(actual, expected)) {
    throw new AssertionError(`${message ? `${message}: ` : ""}expected ${show(expected)}, got ${show(actual)}`);
  }
}

export function notEqual(actual, unexpected, message) {
  if (Object.is(actual, unexpected)) {
    throw new AssertionError(`${message ? `${message}: ` : ""}expected anything but ${show(unexpected)}`);
  }
}

/** Same JSON text (arrays and plain objects of primitives). */
export function deepEqual(actual, expected, message) {
  if (show(actual) !== show(expected)) {
    throw new AssertionError(`${message ? `${message}: ` : ""}expected ${show(expected)}, got ${show(actual)}`);
  }
}

/** What `run` (a function, sync or async) threw or rejected with; fails if it did neither. */
export async function rejects(run, message = "expected an error") {
  try {
    await run();
  } catch (error) {
    return error;
  }
  throw new AssertionError(message);
}

/**
 * Runs one scenario of scenarios.mjs against the SDK module set by `useSdk`
 * (after its `ready` promise, when it exports one); resolves to the lines
 * the scenario logged.
 */
export async function runScenario(scenario) {
  await (sdk.ready ?? Promise.resolve());
  script([]);
  globalThis.__onejob_events = [];
  const logs = [];
  await scenario.run({
    OneJob: sdk.OneJob,
    fingerprint: sdk.fingerprint,
    ready: sdk.ready ?? Promise.resolve(),
    assert,
    equal,
    notEqual,
    deepEqual,
    rejects,
    log: (line) => logs.push(line),
  });
  return logs;
}
