// The one test harness: a worker under `wrangler dev` (workerd, real Durable
// Objects and KV) on free ports, a fake LLM over real HTTP, a temporary
// state directory, and helpers to talk to them. Every edge test, the package
// tests and the benchmark start their servers through it.
//
//   const stack = await startStack({ vars: { MAX_ATTEMPTS: "4" } });
//   const { res, text } = await stack.post(key, chat("hello"));
//   stack.llm.calls(key)          // upstream calls of this (dev-tenant) key
//   await stack.restart();         // same state, new runtime
//   await stack.stop();
//
// Several providers under one job (PROVIDERS and ROUTES vars): a fake LLM
// per provider, reached as `stack.fakes[name]`:
//
//   const stack = await startStack({
//     providers: [{ name: "primary", key: "sk-p" }, { name: "claude", kind: "anthropic" }],
//     routes: { "gpt-test": { providers: [{ provider: "primary", model: "p-model" }] } },
//   });
//   stack.fakes.primary.calls(key)
//   await stack.getProviders()     // GET /onejob/v1/providers
//
// Background jobs (Prefer: respond-async, run by the worker's queue
// consumer) and the admin routes:
//
//   await stack.post(key, chat("hi"), { headers: RESPOND_ASYNC })   // 202
//   await stack.waitForJob(key, (job) => job.state === "completed")
//   await stack.admin("/onejob/v1/admin/dead-letters")               // as dev-admin
//   await stack.admin("/onejob/v1/admin/dead-letters/replay", { body, key })
//
// OpenTelemetry: `otlp: true` (or `{ mode }`) starts a fake collector
// (fake-otlp.mjs) and points OTEL_EXPORTER_OTLP_ENDPOINT at it (unless
// `vars` sets it); `stack.otlp.spans()` is what it received. The worker's
// log lines (its stdout) are `stack.worker.output()` (start with
// `logLevel: "log"` to see console.log):
//
//   const stack = await startStack({ otlp: true, logLevel: "log" });
//   await stack.otlp.waitForSpans((spans) => spans.length >= 2)
//
// Job types with effects (POST /onejob/v1/run/{type}): `mail` starts a fake
// mail API (fake-mail.mjs) and points MAIL_URL, MAIL_RECEIPT_URL and
// MAIL_SECRET at it (unless `vars` sets them); the TICKETS rows are read
// through the demo read-out:
//
//   const stack = await startStack({ mail: true, vars: { JOB_TYPES: JSON.stringify({ triage_fast: triageType({ effects: { email: { attempts: 3 } } }) }) } });
//   const { status, body } = await stack.run("triage", key, triageInput("T-1"));
//   stack.mail.delivered(body.effects[1].delivery_id)   // accepted POSTs of that delivery
//   await stack.tickets()                                 // GET /demo/tickets → rows
//   await stack.approve(key)                              // POST /onejob/v1/jobs/{key}/approve
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";

import { FAKE_ANTHROPIC_USAGE, FAKE_USAGE, contentFault, delayedContent, startFakeLlm } from "./fake-llm.mjs";
import { FAKE_MAIL_SECRET, mailSignature, startFakeMail } from "./fake-mail.mjs";
import { startFakeOtlp } from "./fake-otlp.mjs";
import { upstreamKey } from "./keys.mjs";
import { DEV_ADMIN_KEY, DEV_KEY, TENANT_B_KEY, adminKeysVar, freePort, sha256, startWorker } from "./worker.mjs";

/** The fake upstream MCP server (fake-mcp.mjs), loaded when a test starts one: the MCP SDK takes about 0.2 s to load. */
const startFakeMcp = async (options) => (await import("./fake-mcp.mjs")).startFakeMcp(options);

export {
  DEV_ADMIN_KEY,
  DEV_KEY,
  FAKE_ANTHROPIC_USAGE,
  FAKE_MAIL_SECRET,
  FAKE_USAGE,
  TENANT_B_KEY,
  adminKeysVar,
  contentFault,
  delayedContent,
  freePort,
  mailSignature,
  sha256,
  startFakeLlm,
  startFakeMail,
  startFakeMcp,
  startFakeOtlp,
  startWorker,
  upstreamKey,
};

/** The tenant ids the test workers know (TENANTS is set by startWorker). */
export const TENANT_OF = { [DEV_KEY]: "dev", [TENANT_B_KEY]: "tenant-b" };

export const newKey = () => `test-${randomUUID()}`;
export const chat = (content, extra = {}) => ({ model: "gpt-test", messages: [{ role: "user", content }], ...extra });
/** An Anthropic Messages request (`POST /v1/messages`). */
export const message = (content, extra = {}) => ({ model: "claude-test", max_tokens: 64, messages: [{ role: "user", content }], ...extra });
export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
/** The header that asks for a background job (202 Accepted, run by the queue consumer). */
export const RESPOND_ASYNC = { Prefer: "respond-async" };

/** `fn` over `items`, at most `parallel` at a time (a user's connection
 * pool, not a thousand sockets at once); the results in order. */
export async function inPool(items, fn, parallel = 100) {
  const results = new Array(items.length);
  let next = 0;
  await Promise.all(
    Array.from({ length: Math.min(parallel, items.length) }, async () => {
      while (next < items.length) {
        const i = next++;
        results[i] = await fn(items[i], i);
      }
    }),
  );
  return results;
}

/**
 * Polls `fn` every `intervalMs` until it returns `{ ok: true, value }`;
 * returns that value, or fails with `what` and the last value after
 * `timeoutMs`.
 */
export async function waitFor(what, fn, timeoutMs = 10_000, intervalMs = 200) {
  const deadline = Date.now() + timeoutMs;
  let last;
  for (;;) {
    last = await fn();
    if (last?.ok) return last.value;
    if (Date.now() > deadline) assert.fail(`${what}: still not after ${timeoutMs} ms: ${JSON.stringify(last?.value ?? last)}`);
    await sleep(intervalMs);
  }
}

/**
 * Reads a response body to its end as it arrives: its text, when its first
 * bytes came and when it ended (ms after `since`).
 */
export async function readBody(res, since = performance.now()) {
  const reader = res.body.getReader();
  const decoder = new TextDecoder();
  let text = "";
  let firstByteMs;
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    firstByteMs ??= performance.now() - since;
    text += decoder.decode(value, { stream: true });
  }
  return { text, firstByteMs, totalMs: performance.now() - since };
}

/** Asserts an RFC 9457 problem of `slug` with `status`; returns its body. */
export function assertProblem({ res, text }, status, slug) {
  assert.equal(res.status, status, text);
  assert.equal(res.headers.get("content-type"), "application/problem+json");
  const problem = JSON.parse(text);
  assert.equal(problem.type, `/onejob/problems/${slug}`);
  assert.equal(problem.status, status);
  assert.ok(problem.title.length > 0 && problem.detail.length > 0);
  return problem;
}

/** The bundled triage job type's definition file. */
const TRIAGE_JSON = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../../jobs/triage.json");

/**
 * An input of the triage job type (jobs/triage.json) for `ticketId`, with
 * `overrides` on top (a property set to `undefined` is left out).
 */
export function triageInput(ticketId, overrides = {}) {
  const input = {
    ticket_id: ticketId,
    text: `Ticket ${ticketId}: I was charged twice for my subscription this month.`,
    customer_email: `customer+${ticketId.toLowerCase().replace(/[^a-z0-9-]/g, "")}@example.com`,
    ...overrides,
  };
  return Object.fromEntries(Object.entries(input).filter(([, v]) => v !== undefined));
}

/**
 * The triage job type's definition (jobs/triage.json, a deep copy) with
 * `changes` applied, for the JOB_TYPES var. `changes` is merged in deeply:
 * objects merge, anything else replaces, `null` deletes the property;
 * `effects` may be an object by effect name (`{ email: { approve: true } }`
 * changes that effect, `{ email: null }` drops it) or an array (replaces the
 * list). A function instead gets the copy to change (or to return a new one).
 *
 *   triageType({ once_per: null })                                   // no once_per
 *   triageType({ effects: { email: { approve: true, approval_ttl_ms: 4000 } } })
 *   triageType({ effects: { email: { receipt_url: null } } })        // no receipt URL
 */
export function triageType(changes = {}) {
  const definition = JSON.parse(readFileSync(TRIAGE_JSON, "utf8"));
  if (typeof changes === "function") return changes(definition) ?? definition;
  const { effects, ...rest } = changes;
  mergeInto(definition, rest);
  if (Array.isArray(effects)) {
    definition.effects = structuredClone(effects);
  } else if (effects) {
    for (const [name, change] of Object.entries(effects)) {
      const index = definition.effects.findIndex((e) => e.name === name);
      if (change === null) {
        if (index >= 0) definition.effects.splice(index, 1);
      } else if (index >= 0) {
        mergeInto(definition.effects[index], change);
      } else {
        definition.effects.push(structuredClone({ name, ...change }));
      }
    }
  }
  return definition;
}

const isPlainObject = (v) => v !== null && typeof v === "object" && !Array.isArray(v);

function mergeInto(target, changes) {
  for (const [name, value] of Object.entries(changes)) {
    if (value === null || value === undefined) delete target[name];
    else if (isPlainObject(value) && isPlainObject(target[name])) mergeInto(target[name], value);
    else target[name] = structuredClone(value);
  }
  return target;
}

/** The var that holds provider `name`'s API key (PROVIDERS names it in `api_key`). */
export const providerKeyVar = (name) => `PROVIDER_KEY_${name.toUpperCase().replace(/[^A-Z0-9]/g, "_")}`;

/**
 * The PROVIDERS var for `providers` ({ name, kind = "openai", key?, baseUrl? }),
 * a fake LLM started for each openai or anthropic one without a `baseUrl`,
 * and the vars holding their keys.
 */
async function startProviders(providers) {
  const fakes = {};
  const vars = {};
  const list = [];
  for (const { name, kind = "openai", key, baseUrl } of providers) {
    const entry = { name, kind };
    if (kind !== "demo") {
      if (!baseUrl) fakes[name] = await startFakeLlm({ name });
      entry.base_url = baseUrl ?? fakes[name].baseUrl;
    }
    if (key !== undefined) {
      entry.api_key = providerKeyVar(name);
      vars[entry.api_key] = key;
    }
    list.push(entry);
  }
  return { fakes, vars: { ...vars, PROVIDERS: JSON.stringify(list) } };
}

/**
 * Starts a fake LLM (unless `upstream` is given, e.g. "demo", or a running
 * fake is passed as `llm`) and a worker that calls it, with `vars` on top of
 * wrangler.toml (or of `config`, a wrangler.toml in `cwd`). With `providers`
 * (see startProviders) and `routes` (the ROUTES var, as an object), the
 * worker gets PROVIDERS and ROUTES; `llm` is then still started and named in
 * UPSTREAM, which PROVIDERS overrides: it should never be called.
 * `faults: true` runs the worker built with fault injection (`make
 * build-edge-test`), for a test that sets QUEUE_SEND_FAULTS or
 * EFFECT_HANG_AFTER; every other stack runs the production build.
 */
export async function startStack({ vars = {}, upstream, llm: sharedLlm, providers, routes, config, cwd, logLevel, mail: mailOption, faults, otlp: otlpOption } = {}) {
  const llm = upstream ? null : (sharedLlm ?? (await startFakeLlm()));
  const { fakes, vars: providerVars } = providers ? await startProviders(providers) : { fakes: {}, vars: {} };
  if (routes) providerVars.ROUTES = JSON.stringify(routes);
  // `mail: true | { secret, dedup }`: a fake mail API for webhook effects
  // (the MAIL_* vars point at it; `vars` may still override each of them).
  const mail = mailOption ? await startFakeMail(mailOption === true ? {} : mailOption) : null;
  if (mail) {
    providerVars.MAIL_URL = `${mail.url}/send`;
    providerVars.MAIL_RECEIPT_URL = `${mail.url}/receipts`;
    providerVars.MAIL_SECRET = mail.secret;
  }
  const otlp = otlpOption ? await startFakeOtlp(otlpOption === true ? {} : otlpOption) : null;
  if (otlp) providerVars.OTEL_EXPORTER_OTLP_ENDPOINT = otlp.endpoint;
  const persistTo = mkdtempSync(path.join(tmpdir(), "onejob-test-"));
  // ONEJOB_TEST_VARS (JSON) sets variables under every stack of a run, e.g.
  // '{"RESULT_CACHE":"off"}' to run any suite on the slow path.
  const runVars = JSON.parse(process.env.ONEJOB_TEST_VARS ?? "{}");
  const allVars = { UPSTREAM: upstream ?? llm.baseUrl, ...providerVars, ...runVars, ...vars };
  let worker;
  try {
    worker = await startWorker({ vars: allVars, persistTo, config, cwd, logLevel, faults });
  } catch (error) {
    // Nothing is left running when the worker does not come up.
    if (!sharedLlm) await llm?.close();
    for (const fake of Object.values(fakes)) await fake.close();
    await mail?.close();
    await otlp?.close();
    rmSync(persistTo, { recursive: true, force: true });
    throw error;
  }
  const stack = {
    llm,
    /** The fake LLM of each provider, by name. */
    fakes,
    /** The fake mail API (`startStack({ mail: true })`), else null. */
    mail,
    /** The fake OTLP collector (`startStack({ otlp: true })`), else null. */
    otlp,
    persistTo,
    vars: allVars,
    get url() {
      return worker.url;
    },
    get worker() {
      return worker;
    },
    /** POSTs `body` (or `raw`) to `/v1/chat/completions` (or `path`) with `key`. */
    async post(key, body, { token = DEV_KEY, headers = {}, raw, path: route = "/v1/chat/completions" } = {}) {
      const h = { "Content-Type": "application/json", ...headers };
      if (token) h.Authorization = `Bearer ${token}`;
      if (key !== undefined) h["Idempotency-Key"] = key;
      const res = await fetch(`${worker.url}${route}`, { method: "POST", headers: h, body: raw ?? JSON.stringify(body) });
      return { res, text: await res.text() };
    },
    /** `GET /onejob/v1/jobs/{key}` as the tenant of `token` (one of its users' with `user`). */
    async getJob(key, token = DEV_KEY, { user } = {}) {
      const query = user ? `?user=${encodeURIComponent(user)}` : "";
      const res = await fetch(`${worker.url}/onejob/v1/jobs/${encodeURIComponent(key)}${query}`, {
        headers: { Authorization: `Bearer ${token}` },
      });
      return { status: res.status, headers: res.headers, body: await res.json() };
    },
    /**
     * Polls `GET /onejob/v1/jobs/{key}` until `until(job)` holds; returns
     * that view (fails after `timeoutMs` with the last one).
     */
    async waitForJob(key, until, { timeoutMs = 30_000, token = DEV_KEY, what = `job ${key}` } = {}) {
      return waitFor(
        what,
        async () => {
          const { status, body } = await stack.getJob(key, token);
          return { ok: status === 200 && until(body), value: body };
        },
        timeoutMs,
        250,
      );
    },
    /** Waits for `key`'s entry in `GET /onejob/v1/admin/dead-letters` (as the dev admin); returns it. */
    async waitForDeadLetter(key, { timeoutMs = 30_000 } = {}) {
      return waitFor(
        `the dead letter of ${key}`,
        async () => {
          const list = await stack.admin("/onejob/v1/admin/dead-letters");
          assert.equal(list.status, 200, list.text);
          const found = list.body.entries.find((e) => e.key === key);
          return { ok: Boolean(found), value: found };
        },
        timeoutMs,
        500,
      );
    },
    /**
     * An admin request (`GET`, or `POST` when `body` is given) as `token`
     * (the dev admin unless told), with `key` as its Idempotency-Key:
     * `{ res, status, text, body }` (`body` parsed when it is JSON).
     */
    async admin(route, { method, body, key, token = DEV_ADMIN_KEY, headers = {} } = {}) {
      const h = { ...headers };
      if (token) h.Authorization = `Bearer ${token}`;
      if (key !== undefined) h["Idempotency-Key"] = key;
      const typed = Object.keys(h).some((name) => name.toLowerCase() === "content-type");
      if (body !== undefined && !typed) h["Content-Type"] = "application/json";
      const res = await fetch(`${worker.url}${route}`, {
        method: method ?? (body === undefined ? "GET" : "POST"),
        headers: h,
        body: body === undefined ? undefined : JSON.stringify(body),
      });
      const text = await res.text();
      let parsed;
      try {
        parsed = JSON.parse(text);
      } catch {}
      return { res, status: res.status, text, body: parsed };
    },
    /**
     * `POST /onejob/v1/run/{type}` with `input` as its body and `key` as its
     * Idempotency-Key (none if undefined), as `token`: `{ res, status, text,
     * body }` (`body` parsed when it is JSON). `raw` sends that text instead.
     */
    async run(type, key, input, { token = DEV_KEY, headers = {}, raw } = {}) {
      const h = { "Content-Type": "application/json", ...headers };
      if (token) h.Authorization = `Bearer ${token}`;
      if (key !== undefined) h["Idempotency-Key"] = key;
      const res = await fetch(`${worker.url}/onejob/v1/run/${encodeURIComponent(type)}`, {
        method: "POST",
        headers: h,
        body: raw ?? JSON.stringify(input),
      });
      const text = await res.text();
      return { res, status: res.status, text, body: parseJson(text) };
    },
    /** `POST /onejob/v1/jobs/{key}/approve` as `token` (body `{}`): `{ res, status, text, body }`. */
    async approve(key, { token = DEV_KEY, body = {}, headers = {} } = {}) {
      const h = { "Content-Type": "application/json", ...headers };
      if (token) h.Authorization = `Bearer ${token}`;
      const res = await fetch(`${worker.url}/onejob/v1/jobs/${encodeURIComponent(key)}/approve`, {
        method: "POST",
        headers: h,
        body: JSON.stringify(body),
      });
      const text = await res.text();
      return { res, status: res.status, text, body: parseJson(text) };
    },
    /**
     * The rows of the TICKETS D1 table (`GET /demo/tickets`, on with
     * DEMO_TOKEN_ISSUER=on), those of ticket `ticketId` only if given.
     */
    async tickets(ticketId) {
      const res = await fetch(`${worker.url}/demo/tickets`);
      const text = await res.text();
      assert.equal(res.status, 200, `GET /demo/tickets: ${text}`);
      const { rows } = JSON.parse(text);
      assert.ok(Array.isArray(rows), `GET /demo/tickets has no rows: ${text}`);
      return ticketId === undefined ? rows : rows.filter((row) => row.ticket_id === ticketId);
    },
    /** `GET /onejob/v1/providers` as the tenant of `token`. */
    async getProviders(token = DEV_KEY) {
      const res = await fetch(`${worker.url}/onejob/v1/providers`, { headers: { Authorization: `Bearer ${token}` } });
      const text = await res.text();
      let body;
      try {
        body = JSON.parse(text);
      } catch {}
      return { res, status: res.status, text, body };
    },
    /** kill -9 of the runtime mid-whatever, then a new one on the same state. */
    async crashAndRestart() {
      await worker.kill();
      worker = await startWorker({ vars: allVars, persistTo, config, cwd, logLevel, faults });
    },
    /** Stops the runtime and starts a new one on the same state. */
    async restart() {
      await worker.stop();
      worker = await startWorker({ vars: allVars, persistTo, config, cwd, logLevel, faults });
    },
    async stop() {
      await worker?.stop();
      if (!sharedLlm) await llm?.close();
      for (const fake of Object.values(fakes)) await fake.close();
      await mail?.close();
      await otlp?.close();
      rmSync(persistTo, { recursive: true, force: true });
    },
  };
  return stack;
}

function parseJson(text) {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}
