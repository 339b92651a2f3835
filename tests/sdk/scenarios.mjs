// The SDK's own logic, exercised through the package's public API exactly as
// a user does, against a scripted fetch (stub.mjs). Each scenario runs in
// Node (node.test.mjs) and in headless Chromium (chrome.test.mjs); the
// `browserOnly` ones need what only a browser has (`localStorage` across
// page loads, corrupted entries) and run in Chromium only.
//
// Ported one-to-one from the Rust wasm-bindgen tests crates/client/tests/sdk.rs
// and browser.rs (same scenarios, same assertions, same tolerances).
//
//   { name, browserOnly?, run: async ({ OneJob, fingerprint, ready, assert, equal,
//                                       notEqual, deepEqual, rejects, log }) => … }

import { calls, cancelled, client, coreFingerprint, events, post, script, settle, sleep, warnings, within } from "./stub.mjs";

const FAST = { endpoint: "https://gateway.test", token: "tenant-key", storage: "memory", retry: { baseMs: 1, capMs: 5 } };
const LOCAL = { endpoint: "https://gateway.test", storage: "local", retry: { maxAttempts: 1 } };
/** A background job accepted (`Prefer: respond-async`), to be polled at once. */
const ACCEPTED = { status: 202, headers: { "Preference-Applied": "respond-async", "Retry-After": "0" } };

export const scenarios = [
  {
    name: "retries with the same key and reports events in order",
    async run({ equal, deepEqual }) {
      script([{ status: 503 }, { status: 200 }]);
      const oj = client(FAST);
      const response = await post(oj, '{"q":1}');
      equal(response.status, 200);
      const sent = calls();
      equal(sent.length, 2);
      equal(sent[0].key, sent[1].key);
      equal(sent[0].key.length, 36, "a UUIDv4");
      equal(sent[0].authorization, "Bearer tenant-key");
      deepEqual(events(), ["attempt", "backoff", "attempt", "settled"]);
    },
  },
  {
    name: "twenty rapid submissions make one request and twenty results",
    async run({ assert, equal }) {
      script([{ status: 200, delayMs: 50 }]);
      const oj = client(FAST);
      const pending = Array.from({ length: 20 }, () => post(oj, '{"ticket":"8812"}', "triage:8812"));
      const responses = await Promise.all(pending);
      equal(calls().length, 1);
      const bodies = [];
      for (const response of responses) bodies.push(await response.text());
      assert(bodies.every((b) => b === bodies[0]), JSON.stringify(bodies));
      equal(bodies.length, 20);
    },
  },
  {
    name: "a delivered intent is repeated with a new key",
    async run({ equal, notEqual }) {
      script([{ status: 200 }, { status: 200 }]);
      const oj = client(FAST);
      await post(oj, '{"q":"same"}');
      await post(oj, '{ "q" : "same" }');
      const sent = calls();
      equal(sent.length, 2);
      notEqual(sent[0].key, sent[1].key);
    },
  },
  {
    name: "an intent given up on keeps its key",
    async run({ equal, deepEqual }) {
      script([{ status: 503 }, { status: 200 }]);
      const oj = client({ storage: "memory", endpoint: "https://gateway.test", retry: { maxAttempts: 1 } });
      const first = await post(oj, "{}", "keep");
      equal(first.status, 503);
      deepEqual(events(), ["attempt", "gave_up"]);
      const second = await post(oj, "{}", "keep");
      equal(second.status, 200);
      const sent = calls();
      equal(sent[0].key, sent[1].key);
    },
  },
  {
    name: "final errors are not retried and should retry false wins",
    async run({ equal }) {
      script([{ status: 422 }, { status: 503, headers: { "x-should-retry": "false" } }]);
      const oj = client(FAST);
      equal((await post(oj, '{"a":1}')).status, 422);
      equal((await post(oj, '{"a":2}')).status, 503);
      equal(calls().length, 2);
    },
  },
  {
    name: "network errors retry with the same key then fail with a named error",
    async run({ equal, rejects }) {
      script([{ networkError: true }, { networkError: true }]);
      const oj = client({ storage: "memory", endpoint: "https://gateway.test", retry: { maxAttempts: 2, baseMs: 1, capMs: 2 } });
      const error = await rejects(() => post(oj, "{}"));
      equal(error?.name, "OneJobNetworkError");
      equal(error.cause?.name, "TypeError", "the fetch error is the cause");
      const sent = calls();
      equal(sent.length, 2);
      equal(sent[0].key, sent[1].key);
    },
  },
  {
    name: "retry after is honoured",
    async run({ assert }) {
      script([{ status: 429, headers: { "Retry-After": "1" } }, { status: 200 }]);
      const oj = client(FAST);
      await post(oj, "{}");
      const sent = calls();
      const waited = sent[1].at - sent[0].at;
      assert(waited >= 990, `waited ${waited} ms`);
    },
  },
  {
    // The engine hands an HTTP-date to the JavaScript engine's Date.parse
    // (crates/client/src/js.rs, JsDates): its glue import works in the entry.
    name: "a retry after given as an HTTP-date is honoured",
    async run({ assert }) {
      // Second resolution: the date is 1 to 2 s away.
      const date = new Date(Date.now() + 2_000).toUTCString();
      script([{ status: 503, headers: { "Retry-After": date } }, { status: 200 }]);
      const oj = client(FAST);
      await post(oj, "{}");
      const sent = calls();
      const waited = sent[1].at - sent[0].at;
      assert(waited >= 900, `waited ${waited} ms for ${date}`);
    },
  },
  {
    name: "abort during a 3 s backoff settles at once",
    async run({ assert, equal, log }) {
      script([{ status: 503, headers: { "Retry-After": "3" } }]);
      const oj = client(FAST);
      const controller = new AbortController();
      const pending = settle(post(oj, "{}", undefined, controller.signal));
      await sleep(100);
      const started = performance.now();
      controller.abort();
      const { error } = await pending;
      const latency = performance.now() - started;
      equal(error?.name, "AbortError");
      log(`abort during a 3 s backoff settled in ${latency.toFixed(2)} ms`);
      assert(latency < 100, `abort took ${latency} ms`);
      equal(calls().length, 1);
    },
  },
  {
    name: "one joined caller aborting does not cancel the others",
    async run({ equal }) {
      script([{ status: 503, headers: { "Retry-After": "1" } }, { status: 200 }]);
      const oj = client(FAST);
      const impatient = new AbortController();
      const first = settle(post(oj, '{"joined":1}', undefined, impatient.signal));
      const patient = new AbortController();
      const second = settle(post(oj, '{"joined":1}', undefined, patient.signal));
      await sleep(100);
      impatient.abort();
      const { error } = await first;
      equal(error?.name, "AbortError");
      const { value: response, error: failure } = await second;
      equal(failure, undefined, "the other caller is not rejected");
      equal(response.status, 200, "the other caller still gets the result");
      const sent = calls();
      equal(sent.length, 2);
      equal(sent[0].key, sent[1].key);
    },
  },
  {
    name: "when every joined caller aborts the send stops",
    async run({ assert, equal }) {
      script([{ status: 503, headers: { "Retry-After": "1" } }, { status: 200 }]);
      const oj = client(FAST);
      const [a, b] = [new AbortController(), new AbortController()];
      const first = settle(post(oj, '{"joined":2}', undefined, a.signal));
      const second = settle(post(oj, '{"joined":2}', undefined, b.signal));
      await sleep(100);
      a.abort();
      b.abort();
      assert((await first).error !== undefined && (await second).error !== undefined, "both callers are rejected");
      await sleep(1_300);
      equal(calls().length, 1, "no retry after everyone gave up waiting");
      equal(events().at(-1), "backoff");
    },
  },
  {
    name: "a response body can be cancelled",
    // Bug 12: the SDK kept the original response unread and handed out a
    // clone, whose cancel() then waits for the original forever (Streams tee).
    async run() {
      script([{ status: 200 }]);
      const oj = client(FAST);
      const response = await post(oj, '{"cancel":1}');
      await within(2_000, response.body.cancel()); // body.cancel() settles
    },
  },
  {
    name: "joined callers each cancel or read their own body",
    async run({ equal }) {
      script([{ status: 200, delayMs: 50 }, { status: 200, delayMs: 50 }]);
      const oj = client(FAST);
      let responses = await Promise.all(Array.from({ length: 3 }, () => post(oj, '{"joined":3}', "three")));
      equal(calls().length, 1);
      // One caller cancels, one reads its whole body, one cancels after that.
      const firstCancel = settle(responses[0].body.cancel()).then(({ error }) => { if (error) throw error; });
      equal(await responses[1].text(), '{"ok":true,"n":1}');
      await within(2_000, firstCancel); // the first caller's cancel settles
      await within(2_000, responses[2].body.cancel()); // the last caller's cancel settles

      // Two joined callers that both cancel.
      responses = await Promise.all(Array.from({ length: 2 }, () => post(oj, '{"joined":2}', "two")));
      equal(calls().length, 2);
      const cancels = responses.map((r) => settle(r.body.cancel()).then(({ error }) => { if (error) throw error; }));
      for (const cancel of cancels) await within(2_000, cancel); // each joined caller's cancel settles
    },
  },
  {
    name: "an answer nobody waits for any more has its body cancelled",
    // The caller aborts while the (signal-blind) fetch is still under way;
    // the answer that arrives anyway must not sit unread on the connection.
    async run({ assert, equal }) {
      script([{ status: 200, delayMs: 100, openBody: true }]);
      const oj = client(FAST);
      const controller = new AbortController();
      const pending = settle(post(oj, '{"late":1}', undefined, controller.signal));
      await sleep(20);
      controller.abort();
      assert((await pending).error !== undefined, "the caller is rejected");
      await sleep(200);
      equal(calls().length, 1);
      equal(cancelled(), 1, "the unread answer's body was cancelled");
    },
  },
  {
    name: "a final replay with should retry false is delivered not resent",
    // Bug 1 (SDK side): a dead job replays its last error with
    // `x-should-retry: false`; the SDK must deliver it, not keep retrying.
    async run({ equal, deepEqual }) {
      script([
        { status: 503 },
        { status: 503 },
        { status: 503, headers: { "x-should-retry": "false", "OneJob-Job-State": "dead" } },
      ]);
      const oj = client(FAST);
      const response = await post(oj, '{"dead":1}', "dead-job");
      equal(response.status, 503);
      deepEqual(events(), ["attempt", "backoff", "attempt", "backoff", "attempt", "settled"]);
      equal(oj.intents().length, 0, "delivered: no record left");
      const resumed = await oj.resume();
      equal(resumed.length, 0);
      equal(calls().length, 3, "resume() re-sends nothing");
    },
  },
  {
    name: "a delivered intent leaves no record",
    // Bug 8: delivered records stayed for 24 h; apps that never call
    // resume() grew localStorage without bound.
    async run({ equal }) {
      script([{ status: 200 }, { status: 503 }]);
      const oj = client({ endpoint: "https://gateway.test", storage: "memory", retry: { maxAttempts: 1 } });
      await post(oj, '{"n":1}', "done");
      equal(oj.intents().length, 0);
      await post(oj, '{"n":2}', "pending");
      const kept = oj.intents();
      equal(kept.length, 1, "an unresolved intent is kept");
      equal(kept[0].intent, "pending");
    },
  },
  {
    name: "a get request object is sent in one call",
    // Bug 9: a GET `Request` got an empty body attached, fetch threw, and
    // the TypeError was retried as a network error.
    async run({ equal, deepEqual, rejects }) {
      script([{ status: 200 }]);
      const oj = client(FAST);
      const request = new Request("https://gateway.test/v1/models");
      const response = await oj.fetch(request);
      equal(response.status, 200);
      const sent = calls();
      equal(sent.length, 1);
      deepEqual([sent[0].method, sent[0].body], ["GET", null]);

      // A GET with a body is the app's mistake: a named error, nothing sent.
      const error = await rejects(() => oj.fetch("/v1/models", { method: "GET", body: "{}" }));
      equal(error?.name, "OneJobConfigError");
      equal(calls().length, 1);
    },
  },
  {
    name: "a post request object is sent once and is the same intent as its url and init",
    // unpackRequest reads the Request's body (from a clone) before it is
    // fingerprinted: the same fingerprint, so the same intent and key.
    async run({ fingerprint, equal, deepEqual }) {
      script([{ status: 503 }, { status: 200 }]);
      const oj = client({ ...FAST, retry: { maxAttempts: 1 } });
      const url = "https://gateway.test/v1/chat/completions";
      const body = '{"q":"request object"}';
      const headers = { "Content-Type": "application/json" };
      const first = await oj.fetch(new Request(url, { method: "POST", body, headers }));
      equal(first.status, 503);
      const kept = oj.intents();
      equal(kept.length, 1);
      equal(kept[0].fingerprint, fingerprint("POST", url, body));
      equal(kept[0].request.body, body);
      const second = await oj.fetch(url, { method: "POST", body, headers });
      equal(second.status, 200);
      const sent = calls();
      equal(sent.length, 2, "one call each");
      deepEqual(sent.map((c) => [c.method, c.body]), [["POST", body], ["POST", body]], "the body sent once, whole");
      equal(sent[0].key, sent[1].key, "the same intent: the same key");
      equal(oj.intents().length, 0, "delivered");
    },
  },
  {
    name: "resume during a send of the same intent joins it",
    async run({ equal, deepEqual }) {
      script([{ status: 200, delayMs: 100 }, { status: 200 }]);
      const oj = client(FAST);
      const posted = post(oj, '{"q":"joined by resume"}', "joined");
      const resumed = oj.resume();
      const [response, results] = await Promise.all([posted, resumed]);
      equal(calls().length, 1, "one upstream call");
      equal(results.length, 1);
      deepEqual([results[0].intent, results[0].key], ["joined", calls()[0].key]);
      equal(response.status, 200);
      equal(results[0].response.status, 200);
      equal(await response.text(), '{"ok":true,"n":1}');
      equal(await results[0].response.text(), '{"ok":true,"n":1}');
    },
  },
  {
    name: "the fingerprint is cores request identity",
    // Bug 10: the SDK had its own copy of "which part of the URL counts";
    // the edge and the SDK now share core's `Fingerprint::of_url`. The
    // expected value is core's, computed here independently (coreFingerprint)
    // and checked against the package's `fingerprint` export too.
    async run({ fingerprint, equal }) {
      script([{ status: 503 }]);
      const oj = client({ endpoint: "https://gateway.test", storage: "memory", retry: { maxAttempts: 1 } });
      const url = "https://gateway.test/v1/chat/completions?api-version=2024-10-21#ignored";
      const body = '{"b":2,"a":1}';
      await oj.fetch(url, { method: "POST", body });
      const expected = await coreFingerprint("POST", "/v1/chat/completions?api-version=2024-10-21", "json", '{"a":1,"b":2}');
      equal(fingerprint("POST", "/v1/chat/completions?api-version=2024-10-21", '{"a":1,"b":2}'), expected, "the export");
      const record = oj.intents()[0];
      equal(record.fingerprint, expected);
    },
  },
  {
    // The body goes into the engine's memory through TextEncoder.encodeInto
    // (not wasm-bindgen's string passing): every kind of text, large and
    // small in turn (the engine's buffer is reused), a lone surrogate (as
    // U+FFFD, as encodeInto writes it) and no body. The canonical form is
    // JavaScript's own (JSON.stringify writes RFC 8785's string escapes;
    // these bodies have no numbers beyond integers and one key order).
    name: "fingerprints of multilingual, escape-heavy bodies match an independent computation",
    async run({ OneJob, fingerprint, equal }) {
      equal(OneJob.name, "OneJob", "the class keeps its name in the minified bundle");
      equal(fingerprint.name, "fingerprint");
      const text = 'Voilà façade naïve Größe ✓ € → 日本語 Привет مرحبا 🙂 “smart” "quoted" C:\\Users\\zoë a\\b line\nbreak tab\there \u0001\u001f\u007f /slash/';
      const bodies = [
        { messages: [{ content: text, role: "user" }], model: "m" },
        { a: "x" },
        { content: text.repeat(400), "é": [text, 1], "\n\"": null },
        {},
      ];
      const canonical = (v) =>
        v === null || typeof v !== "object"
          ? JSON.stringify(v)
          : Array.isArray(v)
            ? `[${v.map(canonical).join(",")}]`
            : `{${Object.keys(v).sort().map((k) => `${JSON.stringify(k)}:${canonical(v[k])}`).join(",")}}`;
      // A raw lone surrogate (JSON.stringify would escape it, and the core
      // refuses an escaped one): sent as U+FFFD, which is what is fingerprinted.
      const texts = [...bodies.map((v) => JSON.stringify(v)), '{"z":"\ud83d","y":"tail \udc00"}'];
      for (const body of texts) {
        const expected = await coreFingerprint("POST", "/v1/chat/completions", "json", canonical(JSON.parse(body.toWellFormed())));
        equal(fingerprint("post", "https://gateway.test/v1/chat/completions", body), expected, body.slice(0, 40));
      }
      // An escaped lone surrogate is not I-JSON: the body is its bytes.
      const escaped = '{"z":"\\ud83d"}';
      equal(fingerprint("POST", "/v1/x", escaped), await coreFingerprint("POST", "/v1/x", "bytes", escaped));
      // Not JSON: its bytes; no body: the empty one.
      equal(fingerprint("POST", "/v1/x", "naïve ✓ {"), await coreFingerprint("POST", "/v1/x", "bytes", "naïve ✓ {"));
      equal(fingerprint("GET", "/v1/x"), await coreFingerprint("GET", "/v1/x", "bytes", ""));
    },
  },
  {
    name: "malformed options throw named errors",
    async run({ OneJob, equal, rejects }) {
      const malformed = [
        ['{ storage: "disk" }', { storage: "disk" }],
        ["{ retry: { baseMs: -1 } }", { retry: { baseMs: -1 } }],
        ["{ onEvent: 3 }", { onEvent: 3 }],
      ];
      for (const [text, options] of malformed) {
        const error = await rejects(() => new OneJob(options), `${text} is refused`);
        equal(error?.name, "OneJobConfigError", text);
      }
    },
  },
  {
    name: "fingerprint ignores the host and the order of a JSON body's members",
    // Added with the port (not in the Rust suite).
    async run({ fingerprint, equal, assert }) {
      const a = fingerprint("POST", "https://x.test/v1/chat/completions", '{"b":1,"a":2}');
      const b = fingerprint("POST", "https://other.test/v1/chat/completions", '{"a":2,"b":1}');
      equal(a, b);
      assert(/^[0-9a-f]{64}$/.test(a), `64 hex digits: ${a}`);
    },
  },
  {
    name: "a stream cut mid event continues after the events delivered",
    // A streamed answer whose connection drops mid-event: the caller gets the
    // whole events, then the rest from `…/stream?from=<whole events>`, as one body.
    async run({ equal, deepEqual }) {
      script([
        { headers: { "Content-Type": "text/event-stream" }, body: "data: a\n\ndata: b\n\ndata: c", drop: true },
        { headers: { "Content-Type": "text/event-stream" }, body: "data: c\n\ndata: [DONE]\n\n" },
      ]);
      const oj = client(FAST);
      const response = await post(oj, '{"stream":true}');
      equal(await response.text(), "data: a\n\ndata: b\n\ndata: c\n\ndata: [DONE]\n\n");
      const sent = calls();
      equal(sent.length, 2);
      deepEqual([sent[1].method, sent[1].authorization], ["GET", "Bearer tenant-key"]);
      equal(sent[1].url, `https://gateway.test/onejob/v1/jobs/${sent[0].key}/stream?from=2`);
      deepEqual(events(), ["attempt", "settled", "backoff"]);
    },
  },
  {
    name: "a stream that ends cleanly is not resumed",
    // A stream that ends cleanly is the whole answer, even without a terminal
    // event (the gateway appends its own error event to an interrupted one).
    async run({ equal }) {
      script([{ headers: { "Content-Type": "text/event-stream" }, body: "data: a\n\ndata: b\n\ndata: partial" }]);
      const oj = client(FAST);
      const response = await post(oj, '{"stream":true}');
      equal(await response.text(), "data: a\n\ndata: b\n\ndata: partial");
      equal(calls().length, 1);
    },
  },

  {
    name: "an already aborted request is neither sent nor remembered",
    async run({ equal, deepEqual }) {
      const oj = client(FAST);
      const controller = new AbortController();
      controller.abort();
      const outcome = await settle(post(oj, '{"q":"never"}', "cancelled", controller.signal));
      equal(outcome.error?.name, "AbortError");
      equal(calls().length, 0);
      deepEqual(oj.intents(), []);
      deepEqual(await oj.resume(), [], "nothing for resume() to send");
      deepEqual(events(), []);
    },
  },
  {
    name: "without fetch a request fails by name and leaves nothing to resume",
    async run({ equal, deepEqual }) {
      const oj = client(FAST);
      const realFetch = globalThis.fetch;
      globalThis.fetch = undefined;
      let outcome;
      try {
        outcome = await settle(post(oj, "{}", "no-fetch"));
      } finally {
        globalThis.fetch = realFetch;
      }
      equal(outcome.error?.name, "OneJobConfigError");
      deepEqual(oj.intents(), []);
    },
  },
  {
    name: "a background job whose end cannot be read is given up after maxAttempts",
    // 202 → its view is refused → ask again → 202 …: bounded by maxAttempts.
    async run({ equal, assert }) {
      const accepted = { status: 202, headers: { "Preference-Applied": "respond-async", "Retry-After": "0" } };
      script([accepted, { status: 404 }, accepted, { status: 404 }, accepted, { status: 404 }, accepted]);
      const oj = client({ ...FAST, retry: { ...FAST.retry, maxAttempts: 2 } });
      const outcome = await settle(oj.fetch("/v1/chat/completions", { method: "POST", body: "{}" }, { background: true }));
      equal(outcome.error?.name, "OneJobNetworkError");
      assert(/background job was accepted/.test(outcome.error.message), outcome.error.message);
      const sent = calls().map((c) => c.method);
      equal(sent.join(" "), "POST GET POST GET POST", "two jobs followed, the third refused");
      equal(events().at(-1), "gave_up");
    },
  },
  {
    name: "a background job's poll answered 503 is polled again then its result asked for",
    async run({ equal, deepEqual }) {
      script([
        ACCEPTED,
        { status: 503, headers: { "Retry-After": "0" } },
        { body: '{"state":"completed"}' },
        { body: '{"answer":42}', headers: { "Idempotent-Replayed": "true" } },
      ]);
      const oj = client(FAST);
      const response = await oj.fetch("/v1/chat/completions", { method: "POST", body: "{}" }, { background: true });
      equal(response.status, 200);
      equal(await response.text(), '{"answer":42}');
      const sent = calls();
      deepEqual(sent.map((c) => c.method), ["POST", "GET", "GET", "POST"], "two polls");
      equal(sent[1].url, `https://gateway.test/onejob/v1/jobs/${sent[0].key}`);
      equal(sent[2].url, sent[1].url);
      equal(new Set(sent.map((c) => c.key)).size, 1, "one key throughout");
      deepEqual(events(), ["attempt", "backoff", "backoff", "attempt", "replayed", "settled"]);
      equal(oj.intents().length, 0, "delivered");
    },
  },
  {
    name: "a background job's poll whose connection fails is polled again",
    async run({ equal, deepEqual }) {
      script([
        ACCEPTED,
        { networkError: true },
        { body: '{"state":"completed"}' },
        { body: '{"answer":7}', headers: { "Idempotent-Replayed": "true" } },
      ]);
      const oj = client(FAST);
      const response = await oj.fetch("/v1/chat/completions", { method: "POST", body: "{}" }, { background: true });
      equal(await response.text(), '{"answer":7}');
      deepEqual(calls().map((c) => c.method), ["POST", "GET", "GET", "POST"], "two polls");
      const backoffs = globalThis.__onejob_events.filter((e) => e.type === "backoff");
      deepEqual(backoffs.map((e) => e.serverAsked), [true, false], "the poll after the failure waits by jitter");
      deepEqual(events(), ["attempt", "backoff", "backoff", "attempt", "replayed", "settled"]);
    },
  },
  {
    name: "a background job waiting for an operator stops the polls",
    // UNKNOWN_POLICY=block: nothing will run the job again; asking again
    // gives the gateway's final answer (409 outcome-blocked).
    async run({ equal, deepEqual }) {
      script([
        ACCEPTED,
        { body: '{"state":"unknown","waiting_for_operator":true}', headers: { "Retry-After": "0" } },
        { status: 409, headers: { "x-should-retry": "false" }, body: '{"type":"outcome-blocked"}' },
        { body: "never asked for" },
      ]);
      const oj = client(FAST);
      const response = await oj.fetch("/v1/chat/completions", { method: "POST", body: "{}" }, { background: true });
      equal(response.status, 409);
      deepEqual(calls().map((c) => c.method), ["POST", "GET", "POST"], "one poll");
      deepEqual(events(), ["attempt", "backoff", "attempt", "settled"]);
    },
  },
  {
    name: "polls and stream resumes stay under the endpoint however it is spelled",
    async run({ equal }) {
      script([
        { headers: { "Content-Type": "text/event-stream" }, body: "data: a\n\ndata: b", drop: true },
        { headers: { "Content-Type": "text/event-stream" }, body: "data: b\n\ndata: [DONE]\n\n" },
      ]);
      const oj = client({ ...FAST, endpoint: "https://GATEWAY.test:443/api/" });
      equal(oj.endpoint, "https://gateway.test/api");
      const response = await oj.fetch("v1/chat/completions?next=https://elsewhere.test/x", { method: "POST", body: "{}" });
      equal(await response.text(), "data: a\n\ndata: b\n\ndata: [DONE]\n\n");
      const sent = calls();
      equal(sent[0].url, "https://gateway.test/api/v1/chat/completions?next=https://elsewhere.test/x");
      equal(sent[1].url, `https://gateway.test/api/onejob/v1/jobs/${sent[0].key}/stream?from=1`);
    },
  },
  {
    name: "an endpoint that is not an absolute URL is a config error",
    async run({ OneJob, equal }) {
      let name;
      try {
        new OneJob({ endpoint: "gateway.test/api" });
      } catch (error) {
        name = error.name;
      }
      equal(name, "OneJobConfigError");
    },
  },
  {
    name: "cancelling a stream while it reconnects stops the reconnection",
    async run({ equal, assert, deepEqual }) {
      script([
        { headers: { "Content-Type": "text/event-stream" }, body: "data: a\n\n", drop: true },
        { status: 503, delayMs: 150 },
        { status: 503 },
        { status: 503 },
      ]);
      const oj = client(FAST);
      const response = await post(oj, '{"stream":true}');
      const reader = response.body.getReader();
      equal(new TextDecoder().decode((await reader.read()).value), "data: a\n\n");
      const next = settle(reader.read()); // the connection drops: the SDK reconnects
      await sleep(60);
      const cancelled = await settle(reader.cancel("user left"));
      assert(!cancelled.error, `cancel rejected: ${cancelled.error}`);
      await next;
      await sleep(300);
      equal(calls().length, 2, "the request, and the reconnection that was under way");
      deepEqual(events().filter((e) => e === "gave_up"), [], "no gave_up after a cancel");
    },
  },
  {
    name: "a stream whose resumes keep failing is given up after maxAttempts",
    // The read that failed counts as the first try: with maxAttempts 2 one
    // resume is asked for, it answers 503, and the body errors by name.
    async run({ equal, deepEqual }) {
      script([
        { headers: { "Content-Type": "text/event-stream" }, body: "data: a\n\ndata: b", drop: true },
        { status: 503 },
        { status: 503 },
      ]);
      const oj = client({ ...FAST, retry: { ...FAST.retry, maxAttempts: 2 } });
      const response = await post(oj, '{"stream":true}');
      // Read by a reader: Chromium's text() rejects with its own TypeError
      // whatever the stream's error was.
      const reader = response.body.getReader();
      equal(new TextDecoder().decode((await reader.read()).value), "data: a\n\n");
      const outcome = await within(2_000, settle(reader.read()));
      equal(outcome.error?.name, "OneJobNetworkError");
      const sent = calls();
      deepEqual(sent.map((c) => c.method), ["POST", "GET"], "one resume, then no more");
      equal(sent[1].url, `https://gateway.test/onejob/v1/jobs/${sent[0].key}/stream?from=1`);
      deepEqual(events(), ["attempt", "settled", "backoff", "gave_up"]);
      const gaveUp = globalThis.__onejob_events.at(-1);
      equal(gaveUp.status, 503);
      equal(oj.intents().length, 1, "not read to its end: resume() can ask again");
    },
  },
  {
    name: "a caller's signal keeps no listener of a request that failed",
    async run({ equal }) {
      script(Array.from({ length: 5 }, () => ({ networkError: true })));
      const oj = client({ ...FAST, retry: { maxAttempts: 1 } });
      const controller = new AbortController();
      const signal = controller.signal;
      let listening = 0;
      const add = signal.addEventListener.bind(signal);
      const remove = signal.removeEventListener.bind(signal);
      signal.addEventListener = (type, listener, options) => {
        if (type === "abort") listening += 1;
        add(type, listener, options);
      };
      signal.removeEventListener = (type, listener, options) => {
        if (type === "abort") listening -= 1;
        remove(type, listener, options);
      };
      for (let i = 0; i < 5; i++) {
        const outcome = await settle(post(oj, `{"n":${i}}`, undefined, signal));
        equal(outcome.error?.name, "OneJobNetworkError");
      }
      equal(listening, 0);
    },
  },
  {
    name: "a wait longer than timers allow is cut to the longest they keep",
    // setTimeout fires at once past 2^31 - 1 ms: a server asking for longer
    // must not turn into an immediate retry.
    async run({ equal }) {
      script([{ status: 503, headers: { "retry-after-ms": "3000000000" } }, { status: 200 }]);
      const oj = client({ ...FAST, retry: { ...FAST.retry, retryAfterCapMs: 2 ** 40, offlineWaitMs: 2 ** 40 } });
      const controller = new AbortController();
      const outcome = settle(post(oj, "{}", undefined, controller.signal));
      await sleep(100);
      equal(calls().length, 1, "still waiting");
      equal(globalThis.__onejob_events.find((e) => e.type === "backoff")?.delayMs, 2147483647);
      controller.abort();
      equal((await outcome).error?.name, "AbortError");
    },
  },
  {
    name: "a body with a lone surrogate is stored as sent and keeps its key",
    // JSON.stringify writes a lone surrogate as `\ud800`, which core's strict
    // reader refuses: the record was dropped with a warning and the next
    // submission went out with a new key. fetch sends it as U+FFFD.
    async run({ equal, deepEqual }) {
      script([{ status: 503 }, { status: 200 }]);
      const oj = client({ ...FAST, retry: { ...FAST.retry, maxAttempts: 1 } });
      const body = '{"t":"a\ud800b"}';
      equal((await post(oj, body, "lone")).status, 503);
      deepEqual(events(), ["attempt", "gave_up"]);
      const kept = oj.intents();
      deepEqual(kept.map((i) => i.intent), ["lone"], "the record reads back");
      equal(kept[0].request.body, '{"t":"a\ufffdb"}', "the body fetch sends");
      equal((await post(oj, body, "lone")).status, 200);
      deepEqual(events().filter((e) => e === "warning"), [], "no unreadable entry");
      const sent = calls();
      equal(sent.length, 2);
      equal(sent[0].key, sent[1].key, "the same Idempotency-Key");
    },
  },
  {
    name: "forgetting an intent during its fetch then aborting leaves no record",
    // The abort used to save the record again, undoing the forget.
    async run({ equal, deepEqual }) {
      script([{ status: 200, delayMs: 300, abortable: true }]);
      const oj = client(FAST);
      const controller = new AbortController();
      const pending = settle(post(oj, '{"f":1}', "forgotten", controller.signal));
      await sleep(50);
      equal(calls().length, 1, "the fetch is under way");
      equal(oj.forget("forgotten"), true);
      controller.abort();
      equal((await pending).error?.name, "AbortError");
      await sleep(50);
      deepEqual(oj.intents(), []);
    },
  },
  {
    name: "a signal aborted by an event handler before the caller joins rejects at once",
    // The `offline` event runs the app's onEvent before the submission joins
    // its send: a caller whose signal aborted there is rejected, nothing sent.
    async run({ OneJob, equal }) {
      const controller = new AbortController();
      const oj = new OneJob({ ...FAST, retry: { offlineWaitMs: 5_000 }, onEvent: (e) => e.type === "offline" && controller.abort() });
      const restore = goOffline();
      let outcome;
      try {
        outcome = await within(2_000, settle(post(oj, "{}", "aborted-early", controller.signal)));
      } finally {
        restore();
      }
      equal(outcome.error?.name, "AbortError");
      await sleep(20);
      equal(calls().length, 0);
    },
  },

  // What only a browser has (browser.rs): `localStorage` persistence across
  // page loads and resilience to corrupted entries.
  {
    name: "an unresolved intent keeps its key across a reload",
    browserOnly: true,
    async run({ equal }) {
      localStorage.clear();
      script([{ status: 503 }, { status: 200 }]);
      let beforeReload = client(LOCAL);
      equal(beforeReload.storage, "local");
      equal((await post(beforeReload, '{"t":1}', "triage:1")).status, 503);
      beforeReload.free?.(); // the page is gone (Rust: drop)
      beforeReload = null;

      // A new client reads the same localStorage, as the reloaded page would.
      const afterReload = client(LOCAL);
      equal(afterReload.intents().length, 1);
      const resumed = await afterReload.resume();
      equal(resumed.length, 1);
      const sent = calls();
      equal(sent.length, 2);
      equal(sent[0].key, sent[1].key, "resume() re-sends with the original key");
      equal(afterReload.intents().length, 0, "delivered: nothing left to remember");
    },
  },
  {
    name: "a delivered post reads and writes localStorage once each",
    browserOnly: true,
    async run({ equal, deepEqual, log }) {
      localStorage.clear();
      script([{ status: 200 }]);
      const oj = client(LOCAL);
      const counts = countStorage();
      let response;
      try {
        response = await post(oj, '{"counted":1}', "counted");
      } finally {
        counts.restore();
      }
      equal(response.status, 200);
      log(`getItem ${counts.getItem}, setItem ${counts.setItem}, removeItem ${counts.removeItem}`);
      deepEqual([counts.getItem, counts.setItem, counts.removeItem], [1, 1, 1]);
      equal(localStorage.getItem("onejob:v1:intent:counted"), null, "delivered: nothing stored");
    },
  },
  {
    name: "a reload during the first fetch or an offline wait finds the intent",
    browserOnly: true,
    async run({ equal }) {
      localStorage.clear();
      script([{ status: 200, delayMs: 100 }]);
      const sending = client(LOCAL);
      const pending = post(sending, '{"during":"fetch"}', "during-fetch");
      await sleep(20);
      equal(calls().length, 1, "the fetch is under way");
      equal(client(LOCAL).intents().length, 1, "a reloaded page finds it");
      equal((await pending).status, 200);

      localStorage.clear();
      script([{ status: 200 }]);
      const restore = goOffline();
      let waiting;
      try {
        const offlineClient = client({ ...LOCAL, retry: { maxAttempts: 1, offlineWaitMs: 200 } });
        waiting = post(offlineClient, '{"during":"offline"}', "during-offline");
        await sleep(20);
        equal(calls().length, 0, "waiting to be online");
        equal(client(LOCAL).intents().length, 1, "a reloaded page finds it");
      } finally {
        restore();
      }
      equal((await waiting).status, 200);
    },
  },
  {
    name: "corrupted and foreign entries are dropped with a warning",
    browserOnly: true,
    async run({ equal, deepEqual }) {
      localStorage.clear();
      localStorage.setItem("onejob:v1:intent:garbage", "{not json");
      localStorage.setItem("onejob:v1:intent:foreign", '{"intent":"someone-else"}');
      localStorage.setItem("unrelated", "kept");
      const oj = client(LOCAL);
      equal(oj.intents().length, 0);
      deepEqual(events(), ["warning", "warning"]);
      equal(localStorage.getItem("onejob:v1:intent:garbage"), null);
      equal(localStorage.getItem("unrelated"), "kept");
      // And requests still work.
      script([{ status: 200 }]);
      equal((await post(oj, "{}")).status, 200);
    },
  },
  {
    name: "forget drops the key",
    browserOnly: true,
    async run({ equal, notEqual }) {
      localStorage.clear();
      script([{ status: 503 }, { status: 200 }]);
      const oj = client(LOCAL);
      await post(oj, "{}", "x");
      equal(oj.forget("x"), true);
      await post(oj, "{}", "x");
      const sent = calls();
      notEqual(sent[0].key, sent[1].key);
    },
  },
  {
    name: "a new client prunes expired records",
    browserOnly: true,
    // Bug 8: expired records were pruned only inside resume().
    async run({ assert, equal }) {
      localStorage.clear();
      const now = Date.now();
      localStorage.setItem("onejob:v1:intent:old", await planted("old", now - 2_000, now - 1_000));
      localStorage.setItem("onejob:v1:intent:live", await planted("live", now, now + 60_000));
      client(LOCAL);
      equal(localStorage.getItem("onejob:v1:intent:old"), null, "expired: pruned");
      assert(localStorage.getItem("onejob:v1:intent:live") !== null, "live: kept");
    },
  },
  {
    name: "the store keeps at most 500 intents and warns for each dropped",
    browserOnly: true,
    // Bug 8: the store had no cap. The oldest unresolved records make room.
    async run({ assert, equal, deepEqual }) {
      localStorage.clear();
      const now = Date.now();
      for (let i = 0; i < 500; i++) {
        const intent = `planted:${i}`;
        localStorage.setItem(`onejob:v1:intent:${intent}`, await planted(intent, now - 10_000 + i, now + 60_000));
      }
      script([{ status: 503 }]);
      const oj = client(LOCAL);
      await post(oj, "{}", "one-more");
      equal(storedIntents(), 500);
      equal(localStorage.getItem("onejob:v1:intent:planted:0"), null, "the oldest is dropped");
      assert(localStorage.getItem("onejob:v1:intent:planted:1") !== null, "planted:1 is kept");
      assert(localStorage.getItem("onejob:v1:intent:one-more") !== null, "the new intent is stored");
      deepEqual(warnings(), ["planted:0"]);
      localStorage.clear();
    },
  },
];

/**
 * A stored record of `intent`, as the SDK writes it (core's
 * `IntentRecord::to_json`: these members in this order), pending after one
 * attempt, with no saved request.
 */
async function planted(intent, updatedMs, expiresMs) {
  return JSON.stringify({
    intent,
    key: `planted-key-0000-${intent}`,
    fingerprint: await coreFingerprint("POST", "/v1/chat/completions", "bytes", intent),
    state: "pending",
    attempts: 1,
    created_ms: updatedMs,
    updated_ms: updatedMs,
    expires_ms: expiresMs,
    request: null,
  });
}

/** Counts `localStorage` calls from now until `restore()`. */
function countStorage() {
  const counts = { getItem: 0, setItem: 0, removeItem: 0 };
  const originals = {};
  for (const name of Object.keys(counts)) {
    originals[name] = Storage.prototype[name];
    Storage.prototype[name] = function (...args) {
      counts[name] += 1;
      return originals[name].apply(this, args);
    };
  }
  counts.restore = () => Object.assign(Storage.prototype, originals);
  return counts;
}

/** How many `localStorage` entries are intent records. */
function storedIntents() {
  let count = 0;
  for (let i = 0; i < localStorage.length; i++) {
    if (localStorage.key(i)?.startsWith("onejob:v1:intent:")) count += 1;
  }
  return count;
}

/** Makes the host report offline (`navigator.onLine` false); returns what undoes it. */
function goOffline() {
  const navigator = globalThis.navigator;
  if (!navigator) {
    globalThis.navigator = { onLine: false };
    return () => delete globalThis.navigator;
  }
  Object.defineProperty(navigator, "onLine", { value: false, configurable: true });
  return () => delete navigator.onLine;
}
