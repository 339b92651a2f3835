// Keyless mode (KEYLESS=coalesce|window): the official `openai` and
// `@anthropic-ai/sdk` packages at their defaults, given only `baseURL` and
// `apiKey` (no onejob SDK, no Idempotency-Key), against the worker under
// `wrangler dev` with fake providers over real HTTP that count calls. The
// gateway derives the key from (tenant, user, the request's fingerprint):
// identical requests in flight are one upstream call; with `window`,
// identical ones within KEYLESS_WINDOW_SECONDS replay its answer, and after
// it run a new job; with `coalesce`, nothing is replayed once the job has
// ended. `GET /v1/models` through both SDKs' `models.list()`.
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { after, before, describe, test } from "node:test";

import Anthropic from "@anthropic-ai/sdk";
import OpenAI from "openai";

import { DEV_KEY, TENANT_B_KEY, assertProblem, chat, newKey, sleep, startStack } from "../support/harness.mjs";
import { DEV_TOKEN_SECRET, mintToken } from "../support/keys.mjs";

const WINDOW_SECONDS = 3;
const ROUTES = {
  "gpt-test": { providers: [{ provider: "openai" }] },
  "claude-test": { providers: [{ provider: "claude" }] },
};
const PROVIDERS = [
  { name: "openai", kind: "openai" },
  { name: "claude", kind: "anthropic" },
];
const FAST = { BACKOFF_BASE_MS: "50", BACKOFF_CAP_MS: "200" };

/** The official OpenAI SDK at its defaults: only a base URL and a key. */
const openaiAs = (stack, apiKey = DEV_KEY) => new OpenAI({ baseURL: `${stack.url}/v1`, apiKey });
/** The official Anthropic SDK at its defaults: only a base URL and a key. */
const anthropicAs = (stack, apiKey = DEV_KEY) => new Anthropic({ baseURL: stack.url, apiKey });

const ask = (marker, extra = {}) => ({ model: "gpt-test", messages: [{ role: "user", content: `keyless ${marker}` }], ...extra });
const askClaude = (marker, extra = {}) => ({
  model: "claude-test",
  max_tokens: 64,
  messages: [{ role: "user", content: `keyless ${marker}` }],
  ...extra,
});

/** The calls a fake provider got for the request naming `marker`. */
const callsOf = (fake, marker) => fake.allCalls().filter((call) => call.body.includes(`keyless ${marker}`));

/** A chat completion through the SDK, with the gateway's headers. */
async function complete(client, body, options) {
  const { data, response } = await client.chat.completions.create(body, options).withResponse();
  return { data, headers: response.headers, status: response.status };
}

/** A Messages call through the SDK, with the gateway's headers. */
async function message(client, body, options) {
  const { data, response } = await client.messages.create(body, options).withResponse();
  return { data, headers: response.headers, status: response.status };
}

/** A streamed chat completion through the SDK: its text, chunks and headers. */
async function streamed(client, body, options) {
  const { data: stream, response } = await client.chat.completions.create({ ...body, stream: true }, options).withResponse();
  let text = "";
  let chunks = 0;
  for await (const chunk of stream) {
    chunks += 1;
    text += chunk.choices[0]?.delta?.content ?? "";
  }
  return { text, chunks, headers: response.headers };
}

/** The job under `key` (the tenant's, or one of its users'). */
async function jobOf(stack, key, token = DEV_KEY) {
  const { status, body } = await stack.getJob(key, token);
  assert.equal(status, 200, JSON.stringify(body));
  return body;
}

const derived = (headers) => {
  const key = headers.get("idempotency-key");
  assert.match(key ?? "", /^keyless-[0-9a-f]{64}$/, "the answer names the derived key");
  return key;
};

describe("KEYLESS=window: identical requests within the window are one job", () => {
  let stack;
  let openaiFake;
  let claudeFake;

  before(async () => {
    stack = await startStack({
      providers: PROVIDERS,
      routes: ROUTES,
      vars: { ...FAST, KEYLESS: "window", KEYLESS_WINDOW_SECONDS: String(WINDOW_SECONDS) },
    });
    openaiFake = stack.fakes.openai;
    claudeFake = stack.fakes.claude;
  });
  after(async () => {
    await stack?.stop();
  });

  test("openai: concurrent identical calls → 1 upstream call, one key, identical answers; then replayed within the window; a new job after it", async () => {
    const marker = randomUUID();
    const client = openaiAs(stack);
    openaiFake.scriptAll(["delay:500"]);
    const answers = await Promise.all(Array.from({ length: 6 }, () => complete(client, ask(marker))));
    openaiFake.scriptAll([]);
    assert.equal(callsOf(openaiFake, marker).length, 1, "six identical concurrent calls, one upstream call");
    const key = derived(answers[0].headers);
    for (const answer of answers) {
      assert.equal(answer.status, 200);
      assert.equal(answer.headers.get("idempotency-key"), key);
      assert.deepEqual(answer.data, answers[0].data);
    }
    assert.match(answers[0].data.choices[0].message.content, /^echo of \d+ bytes$/);
    // The provider got a key derived from the job, never the gateway's own.
    assert.match(callsOf(openaiFake, marker)[0].headers["idempotency-key"], /^onejob-[0-9a-f]{64}$/);

    // Sequential, inside the window: replayed, no upstream call.
    const again = await complete(client, ask(marker));
    assert.equal(callsOf(openaiFake, marker).length, 1);
    assert.equal(again.headers.get("idempotent-replayed"), "true");
    assert.equal(again.headers.get("idempotency-key"), key);
    assert.deepEqual(again.data, answers[0].data);
    const first = await jobOf(stack, key);
    assert.equal(first.state, "completed");
    assert.equal(first.attempts.length, 1);
    assert.equal(first.generation ?? 0, 0);

    // After the window: a new job under the same key, a new upstream call.
    await sleep(WINDOW_SECONDS * 1000 - (Date.now() - first.created_ms) + 200);
    const later = await complete(client, ask(marker));
    assert.equal(later.status, 200);
    assert.equal(callsOf(openaiFake, marker).length, 2, "after the window the request is a new job");
    assert.equal(later.headers.get("idempotent-replayed"), null);
    assert.equal(later.headers.get("idempotency-key"), key);
    const second = await jobOf(stack, key);
    assert.equal(second.generation, 1);
    assert.equal(second.attempts.length, 1, "the new job's attempts start afresh");
    assert.equal(second.attempts[0].number, 1);
    assert.ok(second.version > first.version, "its version continues past the ended job's");
    assert.ok(second.created_ms > first.created_ms);
    // Its provider key is its own: a provider that honours keys never replays the old answer.
    const [call1, call2] = callsOf(openaiFake, marker);
    assert.notEqual(call1.headers["idempotency-key"], call2.headers["idempotency-key"]);
    // And the new job replays within its own window.
    const replay = await complete(client, ask(marker));
    assert.equal(replay.headers.get("idempotent-replayed"), "true");
    assert.equal(callsOf(openaiFake, marker).length, 2);
  });

  test("another user, another tenant, another body: each its own job and key", async () => {
    const marker = randomUUID();
    const now = Math.floor(Date.now() / 1000);
    const alice = mintToken({ tenant: "dev", sub: "alice", iat: now, exp: now + 600 }, DEV_TOKEN_SECRET);
    const bob = mintToken({ tenant: "dev", sub: "bob", iat: now, exp: now + 600 }, DEV_TOKEN_SECRET);
    const keys = new Set();
    for (const apiKey of [DEV_KEY, TENANT_B_KEY, alice, bob]) {
      const answer = await complete(openaiAs(stack, apiKey), ask(marker));
      assert.equal(answer.status, 200);
      assert.equal(answer.headers.get("idempotent-replayed"), null, "no caller is replayed another's answer");
      keys.add(derived(answer.headers));
    }
    assert.equal(keys.size, 4, "four callers, four derived keys");
    assert.equal(callsOf(openaiFake, marker).length, 4);
    // Each replays its own, inside the window.
    const again = await complete(openaiAs(stack, alice), ask(marker));
    assert.equal(again.headers.get("idempotent-replayed"), "true");
    assert.equal(callsOf(openaiFake, marker).length, 4);
    // A user sees its own job under its key; the tenant sees its own job under its own key.
    assert.equal((await stack.getJob(again.headers.get("idempotency-key"), alice)).status, 200);
    // Another body (another temperature) is another job.
    await complete(openaiAs(stack), ask(marker, { temperature: 0.5 }));
    assert.equal(callsOf(openaiFake, marker).length, 5);
  });

  test("openai stream: true: concurrent identical streams → 1 upstream call, every token once; a stream and an unstreamed request are two jobs", async () => {
    const marker = randomUUID();
    const client = openaiAs(stack);
    openaiFake.scriptAll(["sse:6:60"]);
    const streams = await Promise.all(Array.from({ length: 4 }, () => streamed(client, ask(marker))));
    openaiFake.scriptAll([]);
    assert.equal(callsOf(openaiFake, marker).length, 1);
    const key = derived(streams[0].headers);
    for (const s of streams) {
      assert.equal(s.text, "token0 token1 token2 token3 token4 token5 ");
      assert.equal(s.headers.get("idempotency-key"), key);
    }
    // Inside the window the whole stream is replayed.
    const replay = await streamed(client, ask(marker));
    assert.equal(replay.text, streams[0].text);
    assert.equal(replay.headers.get("idempotent-replayed"), "true");
    assert.equal(callsOf(openaiFake, marker).length, 1);
    // The same body unstreamed: another fingerprint, another key, another call.
    const plain = await complete(client, ask(marker));
    assert.notEqual(derived(plain.headers), key);
    assert.equal(callsOf(openaiFake, marker).length, 2);
  });

  test("the SDK's own retries land on the same job: 500, 500 (the gateway gives up after its one 500 retry) → the SDK retries → attempt 3 answers", async () => {
    const marker = randomUUID();
    openaiFake.scriptAll(["500", "500"]);
    const answer = await complete(openaiAs(stack), ask(marker));
    openaiFake.scriptAll([]);
    assert.equal(answer.status, 200);
    const key = derived(answer.headers);
    assert.equal(callsOf(openaiFake, marker).length, 3, "two failed calls and the one that answered");
    const job = await jobOf(stack, key);
    assert.equal(job.state, "completed");
    assert.equal(job.generation ?? 0, 0, "one job");
    assert.deepEqual(
      job.attempts.map((a) => a.upstream_status ?? a.status),
      [500, 500, 200],
    );
    assert.equal(job.completed_by, 3);
    // Every call of the job went out under the job's one provider key.
    assert.equal(new Set(callsOf(openaiFake, marker).map((c) => c.headers["idempotency-key"])).size, 1);
  });

  test("Cache-Control: no-cache forces a new job under the derived key (no replay), and only that request", async () => {
    const marker = randomUUID();
    const client = openaiAs(stack);
    const first = await complete(client, ask(marker));
    const key = derived(first.headers);
    const fresh = await complete(client, ask(marker), { headers: { "Cache-Control": "no-cache" } });
    assert.equal(fresh.headers.get("idempotent-replayed"), null);
    assert.equal(fresh.headers.get("idempotency-key"), key);
    assert.equal(callsOf(openaiFake, marker).length, 2);
    assert.equal((await jobOf(stack, key)).generation, 1);
    const stored = await complete(client, ask(marker), { headers: { "Cache-Control": "no-store, max-age=0" } });
    assert.equal(stored.headers.get("idempotent-replayed"), null);
    assert.equal(callsOf(openaiFake, marker).length, 3);
    // Without the header, the newest job is replayed inside its window.
    const replay = await complete(client, ask(marker));
    assert.equal(replay.headers.get("idempotent-replayed"), "true");
    assert.equal(callsOf(openaiFake, marker).length, 3);
  });

  test("an explicit Idempotency-Key always wins: its own job, replayed for good, no derived key", async () => {
    const marker = randomUUID();
    const client = openaiAs(stack);
    const [a, b] = [newKey(), newKey()];
    const one = await complete(client, ask(marker), { headers: { "Idempotency-Key": a } });
    const two = await complete(client, ask(marker), { headers: { "Idempotency-Key": b } });
    assert.equal(one.headers.get("idempotency-key"), a);
    assert.equal(two.headers.get("idempotency-key"), b);
    assert.equal(callsOf(openaiFake, marker).length, 2, "two keys, two jobs, although the bodies are one");
    // A keyed job is replayed after the keyless window too, even with no-cache.
    await sleep(WINDOW_SECONDS * 1000 + 200);
    const again = await complete(client, ask(marker), { headers: { "Idempotency-Key": a, "Cache-Control": "no-cache" } });
    assert.equal(again.headers.get("idempotent-replayed"), "true");
    assert.equal(callsOf(openaiFake, marker).length, 2);
    // A different body under a used key is still 422, and a malformed key still 400.
    const reused = await stack.post(a, ask(randomUUID()));
    assertProblem(reused, 422, "idempotency-key-reused");
    assertProblem(await stack.post("short", ask(marker)), 400, "invalid-idempotency-key");
  });

  test("@anthropic-ai/sdk: concurrent identical → 1 call; replayed in the window; streamed; its retries land on the same job", async () => {
    const marker = randomUUID();
    const client = anthropicAs(stack);
    claudeFake.scriptAll(["delay:400"]);
    const answers = await Promise.all(Array.from({ length: 5 }, () => message(client, askClaude(marker))));
    claudeFake.scriptAll([]);
    assert.equal(callsOf(claudeFake, marker).length, 1);
    const key = derived(answers[0].headers);
    for (const answer of answers) {
      assert.equal(answer.headers.get("idempotency-key"), key);
      assert.deepEqual(answer.data, answers[0].data);
    }
    assert.equal(answers[0].data.type, "message");
    const again = await message(client, askClaude(marker));
    assert.equal(again.headers.get("idempotent-replayed"), "true");
    assert.equal(callsOf(claudeFake, marker).length, 1);

    // Streamed: 3 concurrent streams, 1 call, the whole text each.
    const streamMarker = randomUUID();
    const texts = await Promise.all(
      Array.from({ length: 3 }, async () => {
        const stream = client.messages.stream(askClaude(streamMarker));
        return (await stream.finalMessage()).content[0].text;
      }),
    );
    assert.equal(callsOf(claudeFake, streamMarker).length, 1);
    assert.ok(texts.every((t) => t === texts[0] && t.startsWith("echo of")), JSON.stringify(texts));

    // Its own retries: a 500 twice (the gateway retries the first once), then the SDK's retry answers.
    const retryMarker = randomUUID();
    claudeFake.scriptAll(["500", "500"]);
    const retried = await message(client, askClaude(retryMarker));
    claudeFake.scriptAll([]);
    assert.equal(retried.status, 200);
    assert.equal(callsOf(claudeFake, retryMarker).length, 3);
    const job = await jobOf(stack, derived(retried.headers));
    assert.equal(job.attempts.length, 3);
    assert.equal(job.completed_by, 3);
  });

  test("GET /v1/models through both SDKs' models.list(); a user token sees only its models", async () => {
    const ids = [];
    for await (const model of openaiAs(stack).models.list()) ids.push(model.id);
    assert.deepEqual(ids.sort(), ["claude-test", "gpt-test"]);
    const page = await openaiAs(stack).models.list();
    assert.equal(page.object, "list");
    assert.equal(page.data.find((m) => m.id === "gpt-test").owned_by, "openai");
    assert.equal(page.data[0].object, "model");

    const claudeIds = [];
    for await (const model of anthropicAs(stack).models.list()) {
      assert.equal(model.type, "model");
      assert.equal(typeof model.display_name, "string");
      claudeIds.push(model.id);
    }
    assert.deepEqual(claudeIds.sort(), ["claude-test", "gpt-test"]);

    const now = Math.floor(Date.now() / 1000);
    const token = mintToken({ tenant: "dev", sub: "carol", iat: now, exp: now + 600, models: ["gpt-test"] }, DEV_TOKEN_SECRET);
    const own = [];
    for await (const model of openaiAs(stack, token).models.list()) own.push(model.id);
    assert.deepEqual(own, ["gpt-test"]);
    const pathless = mintToken({ tenant: "dev", sub: "dan", iat: now, exp: now + 600, paths: ["/v1/chat/*"] }, DEV_TOKEN_SECRET);
    await assert.rejects(openaiAs(stack, pathless).models.list(), (error) => error.status === 403);

    // Authenticated like every /v1 route; GET only.
    const anonymous = await fetch(`${stack.url}/v1/models`);
    assert.equal(anonymous.status, 401);
    const posted = await fetch(`${stack.url}/v1/models`, { method: "POST", headers: { Authorization: `Bearer ${DEV_KEY}` } });
    assert.equal(posted.status, 405);
    assert.equal(posted.headers.get("allow"), "GET, OPTIONS");
    await assert.rejects(openaiAs(stack, "not-a-tenant-key").models.list(), (error) => error.status === 401);
  });

  test("a keyless background job (Prefer: respond-async) is refused: its Location would name no key the caller chose", async () => {
    const problem = assertProblem(await stack.post(undefined, ask(randomUUID()), { headers: { Prefer: "respond-async" } }), 400, "missing-idempotency-key");
    assert.match(problem.detail, /respond-async/);
    // A job type's run stays keyed: its effects happen once per intent.
    assertProblem(await stack.run("triage", undefined, { ticket_id: "T-1", text: "x", customer_email: "a@example.com" }), 400, "missing-idempotency-key");
  });
});

describe("KEYLESS=coalesce: identical requests in flight join; nothing is replayed after the job ends", () => {
  let stack;
  let fake;

  before(async () => {
    stack = await startStack({ providers: PROVIDERS, routes: ROUTES, vars: { ...FAST, KEYLESS: "coalesce" } });
    fake = stack.fakes.openai;
  });
  after(async () => {
    await stack?.stop();
  });

  test("concurrent identical → 1 upstream call; sequential identical → a new job and call each time, under the one derived key", async () => {
    const marker = randomUUID();
    const client = openaiAs(stack);
    fake.scriptAll(["delay:500"]);
    const answers = await Promise.all(Array.from({ length: 5 }, () => complete(client, ask(marker))));
    fake.scriptAll([]);
    assert.equal(callsOf(fake, marker).length, 1, "joined while in flight");
    const key = derived(answers[0].headers);
    assert.ok(answers.every((a) => a.headers.get("idempotency-key") === key));

    const second = await complete(client, ask(marker));
    assert.equal(callsOf(fake, marker).length, 2, "the job had ended: a new one");
    assert.equal(second.headers.get("idempotent-replayed"), null);
    assert.equal(second.headers.get("idempotency-key"), key);
    assert.equal(second.headers.get("onejob-attempt"), "1");
    const third = await complete(client, ask(marker));
    assert.equal(third.headers.get("idempotent-replayed"), null);
    assert.equal(callsOf(fake, marker).length, 3);
    const job = await jobOf(stack, key);
    assert.equal(job.generation, 2);
    assert.equal(job.attempts.length, 1);
    assert.equal(new Set(callsOf(fake, marker).map((c) => c.headers["idempotency-key"])).size, 3, "each job its own provider key");
  });

  test("an ended job's answer never leaks into the next: a failed-for-good job, then a good one", async () => {
    const marker = randomUUID();
    const client = openaiAs(stack, DEV_KEY);
    fake.scriptAll(["400"]);
    await assert.rejects(complete(client, ask(marker)), (error) => error.status === 400);
    fake.scriptAll([]);
    const good = await complete(client, ask(marker));
    assert.equal(good.status, 200);
    assert.match(good.data.choices[0].message.content, /^echo of/);
    assert.equal(callsOf(fake, marker).length, 2);
  });

  test("streams coalesce too, and a stream that ended is not replayed", async () => {
    const marker = randomUUID();
    const client = openaiAs(stack);
    fake.scriptAll(["sse:5:80"]);
    const streams = await Promise.all(Array.from({ length: 3 }, () => streamed(client, ask(marker))));
    assert.equal(callsOf(fake, marker).length, 1);
    assert.ok(streams.every((s) => s.text === "token0 token1 token2 token3 token4 "));
    fake.scriptAll(["sse:2:10"]);
    const next = await streamed(client, ask(marker));
    fake.scriptAll([]);
    assert.equal(next.text, "token0 token1 ");
    assert.equal(next.headers.get("idempotent-replayed"), null);
    assert.equal(callsOf(fake, marker).length, 2);
  });
});

describe("KEYLESS=refuse (the default) and a bad KEYLESS", () => {
  test("no key is 400 missing-idempotency-key, through the official SDK too; GET /v1/models still lists", async () => {
    const stack = await startStack({ providers: PROVIDERS, routes: ROUTES });
    try {
      const marker = randomUUID();
      await assert.rejects(complete(openaiAs(stack), ask(marker)), (error) => {
        assert.equal(error.status, 400);
        assert.match(JSON.stringify(error.error ?? error), /Idempotency-Key/);
        return true;
      });
      assert.equal(callsOf(stack.fakes.openai, marker).length, 0);
      assertProblem(await stack.post(undefined, chat("x")), 400, "missing-idempotency-key");
      const page = await openaiAs(stack).models.list();
      assert.deepEqual(page.data.map((m) => m.id).sort(), ["claude-test", "gpt-test"]);
    } finally {
      await stack.stop();
    }
  });

  test("KEYLESS or KEYLESS_WINDOW_SECONDS malformed: 500 gateway-misconfigured, the variable named in the log only", async () => {
    for (const vars of [{ KEYLESS: "always-sk-secret" }, { KEYLESS: "window", KEYLESS_WINDOW_SECONDS: "0" }]) {
      const stack = await startStack({ vars, logLevel: "log" });
      try {
        const answer = await stack.post(undefined, chat("x"));
        const problem = assertProblem(answer, 500, "gateway-misconfigured");
        assert.doesNotMatch(answer.text, /KEYLESS|sk-secret/);
        assert.ok(problem.detail.length > 0);
        await sleep(300);
        const name = vars.KEYLESS_WINDOW_SECONDS ? "KEYLESS_WINDOW_SECONDS" : "KEYLESS";
        assert.match(stack.worker.output(), new RegExp(`gateway misconfigured: ${name} must be`));
        assert.doesNotMatch(stack.worker.output(), /always-sk-secret/);
      } finally {
        await stack.stop();
      }
    }
  });
});
