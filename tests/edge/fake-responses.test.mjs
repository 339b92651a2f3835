// The fake LLM speaks OpenAI's Responses API well enough for the official
// `openai` SDK at its defaults (groundwork for issue 36): create, stream,
// background mode (refused by default, supported with `responsesBackground`),
// retrieval and resumption of a background stream after a sequence number,
// cancel, `previous_response_id`, the fault scripts and the call counts by
// Idempotency-Key. No worker: the SDK talks to the fake directly.
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { after, before, describe, test } from "node:test";

import OpenAI from "openai";

import { FAKE_RESPONSES_USAGE, startFakeLlm } from "../support/fake-llm.mjs";

const MODEL = "gpt-test";
/** Each test's limit: a stream that never ends fails fast instead of hanging the file. */
const LIMIT = { timeout: 5_000 };
/** Background timing: long enough to see each status, short enough for a fast file. */
const BACKGROUND = { queuedMs: 150, eventMs: 25 };
/** The events of a streamed answer of `deltas` deltas, in order (`queued` for a background one). */
const STREAM_TYPES = (deltas, { background = false } = {}) => [
  "response.created",
  ...(background ? ["response.queued"] : []),
  "response.in_progress",
  "response.output_item.added",
  "response.content_part.added",
  ...Array(deltas).fill("response.output_text.delta"),
  "response.output_text.done",
  "response.content_part.done",
  "response.output_item.done",
  "response.completed",
];

const newKey = () => `test-${randomUUID()}`;
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
/** Request options that send `key` as the Idempotency-Key (the SDK sends none of its own). */
const keyed = (key, extra = {}) => ({ headers: { "Idempotency-Key": key }, ...extra });
/** The SSE text split into its events: `{ raw, event, data }`. */
const sseEvents = (text) =>
  text
    .split(/(?<=\n\n)/)
    .filter((raw) => raw.trim())
    .map((raw) => {
      const event = /^event: (.*)$/m.exec(raw)?.[1];
      const data = JSON.parse(/^data: (.*)$/m.exec(raw)[1]);
      return { raw, event, data };
    });
/** The echo the fake answers for a request body of `bytes` bytes. */
const echoOf = (body) => `echo of ${Buffer.byteLength(body)} bytes`;

/** Everything a stream of the SDK yields, and what ended it. */
async function drain(stream) {
  const events = [];
  try {
    for await (const event of stream) events.push(event);
    return { events, error: undefined };
  } catch (error) {
    return { events, error };
  }
}

/** Polls the response until `done(status)`; the statuses seen, in order, without repeats. */
async function pollStatuses(client, id, done, timeoutMs = 5_000) {
  const seen = [];
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const { status } = await client.responses.retrieve(id);
    if (seen.at(-1) !== status) seen.push(status);
    if (done(status)) return seen;
    if (Date.now() > deadline) assert.fail(`${id}: still ${status} after ${timeoutMs} ms (${seen.join(" → ")})`);
    await sleep(15);
  }
}

describe("the fake LLM's Responses API, through the official openai SDK", () => {
  let llm; // background mode refused, as most providers do
  let bg; // background mode supported
  let client;
  let bgClient;
  before(async () => {
    [llm, bg] = await Promise.all([startFakeLlm(), startFakeLlm({ name: "bg", responsesBackground: BACKGROUND })]);
    client = new OpenAI({ baseURL: llm.baseUrl, apiKey: "sk-dummy" });
    bgClient = new OpenAI({ baseURL: bg.baseUrl, apiKey: "sk-dummy" });
  });
  after(async () => {
    await llm?.close();
    await bg?.close();
  });

  test("create (not streamed): a completed response object whose output_text the SDK derives", LIMIT, async () => {
    const key = newKey();
    const body = { model: MODEL, input: "hello", instructions: "be brief" };
    const response = await client.responses.create(body, keyed(key));
    assert.match(response.id, /^resp_/);
    assert.equal(response.object, "response");
    assert.equal(response.status, "completed");
    assert.equal(response.model, MODEL);
    assert.equal(response.instructions, "be brief");
    assert.equal(response.background, false);
    assert.equal(typeof response.created_at, "number");
    assert.equal(response.error, null);
    assert.equal(response.output.length, 1);
    const [message] = response.output;
    assert.equal(message.type, "message");
    assert.equal(message.role, "assistant");
    assert.equal(message.status, "completed");
    assert.match(message.id, /^msg_/);
    assert.deepEqual(message.content, [{ type: "output_text", text: echoOf(JSON.stringify(body)), annotations: [], logprobs: [] }]);
    assert.equal(response.output_text, echoOf(JSON.stringify(body)), "the SDK's output_text: the texts of the output");
    assert.deepEqual(response.usage, FAKE_RESPONSES_USAGE);
    assert.equal(response.usage.total_tokens, response.usage.input_tokens + response.usage.output_tokens);

    // On the wire there is no output_text: the SDK adds it.
    const [call] = llm.calls(key);
    assert.equal(call.path, "/v1/responses");
    assert.equal(JSON.parse(call.body).stream, undefined, "the SDK sends no stream: false of its own");
    const wire = await (await fetch(`${llm.baseUrl}/responses/${response.id}`)).json();
    assert.equal("output_text" in wire, false);
    // Stored: a GET reads the same response.
    const { output_text: _derived, ...rest } = await client.responses.retrieve(response.id);
    assert.deepEqual(rest, wire);
    assert.deepEqual({ ...wire, output_text: response.output_text }, response);
  });

  test("client.responses.stream: the Responses SSE, deltas and the final response", LIMIT, async () => {
    const key = newKey();
    const body = { model: MODEL, input: "stream me" };
    const stream = client.responses.stream(body, keyed(key));
    const events = [];
    const deltas = [];
    stream.on("event", (event) => events.push(event));
    stream.on("response.output_text.delta", (event) => deltas.push(event.delta));
    const final = await stream.finalResponse();

    const text = echoOf(JSON.stringify({ ...body, stream: true }));
    assert.equal(final.status, "completed");
    assert.equal(final.output_text, text);
    assert.equal(deltas.join(""), text);
    assert.ok(deltas.length >= 3, `several deltas: ${JSON.stringify(deltas)}`);
    assert.deepEqual(
      events.map((e) => e.type),
      STREAM_TYPES(deltas.length),
    );
    assert.deepEqual(
      events.map((e) => e.sequence_number),
      events.map((_, i) => i),
      "sequence numbers from 0, one by one",
    );
    assert.equal(events[0].response.status, "in_progress");
    assert.equal(events.at(-1).response.id, final.id);
    assert.deepEqual(final.usage, { ...FAKE_RESPONSES_USAGE, output_tokens: deltas.length, total_tokens: FAKE_RESPONSES_USAGE.input_tokens + deltas.length });
    assert.equal(JSON.parse(llm.calls(key)[0].body).stream, true, "the helper asks for stream: true");

    // Each SSE event's name is its data's type; the stored response is the final one.
    const raw = sseEvents(llm.responseEvents(final.id).join(""));
    assert.deepEqual(
      raw.map((e) => e.event),
      raw.map((e) => e.data.type),
    );
    assert.deepEqual(llm.responses(final.id), raw.at(-1).data.response);
    assert.equal(raw.at(-1).data.response.output[0].content[0].text, final.output_text);
  });

  test("background: true is refused by default (400), and not retried", LIMIT, async () => {
    const key = newKey();
    await assert.rejects(client.responses.create({ model: MODEL, input: "later", background: true }, keyed(key)), (error) => {
      assert.ok(error instanceof OpenAI.BadRequestError, error.constructor.name);
      assert.equal(error.status, 400);
      assert.equal(error.type, "invalid_request_error");
      assert.equal(error.param, "background");
      assert.equal(error.code, "unsupported_parameter");
      return true;
    });
    assert.equal(llm.calls(key).length, 1);
  });

  test("background supported: queued → in_progress → completed; a stream resumed after a sequence number is the rest, byte for byte", LIMIT, async () => {
    const key = newKey();
    const created = await bgClient.responses.create({ model: MODEL, input: "later", background: true }, keyed(key));
    assert.equal(created.status, "queued");
    assert.equal(created.background, true);
    assert.deepEqual(created.output, []);
    assert.equal(created.output_text, "");
    const statuses = await pollStatuses(bgClient, created.id, (status) => status === "completed");
    assert.deepEqual(statuses, ["queued", "in_progress", "completed"]);
    const done = await bgClient.responses.retrieve(created.id);
    assert.equal(done.output_text, echoOf(JSON.stringify({ model: MODEL, input: "later", background: true })));
    assert.equal(typeof done.completed_at, "number");

    // The whole stream again, then the rest after sequence number 4.
    const full = await (await fetch(`${bg.baseUrl}/responses/${created.id}?stream=true`)).text();
    const all = sseEvents(full);
    assert.deepEqual(
      all.map((e) => e.data.type),
      STREAM_TYPES(all.filter((e) => e.data.type === "response.output_text.delta").length, { background: true }),
    );
    assert.equal(all[0].data.response.status, "queued");
    const resumedRaw = await (await fetch(`${bg.baseUrl}/responses/${created.id}?stream=true&starting_after=4`)).text();
    assert.equal(resumedRaw, all.slice(5).map((e) => e.raw).join(""), "byte-identical remaining events");

    // The SDK's retrieve asks for it the same way and gets the same events.
    const resumed = await drain(await bgClient.responses.retrieve(created.id, { stream: true, starting_after: 4 }));
    assert.equal(resumed.error, undefined);
    assert.deepEqual(
      resumed.events,
      all.slice(5).map((e) => e.data),
    );
    assert.equal(bg.calls(created.id).at(-1).path, `/v1/responses/${created.id}?stream=true&starting_after=4`, "starting_after goes in the query string");
    assert.equal(resumed.events.at(-1).response.status, "completed");
  });

  test("background + stream cut after 3 events: the response goes on, and a resume from the last sequence number seen gets the rest live", LIMIT, async () => {
    const key = newKey();
    bg.script(key, ["responses-drop:3"]);
    const stream = await bgClient.responses.create({ model: MODEL, input: "cut me", background: true, stream: true }, keyed(key, { maxRetries: 0 }));
    const first = await drain(stream);
    assert.ok(first.error, "the stream errors");
    assert.deepEqual(
      first.events.map((e) => e.type),
      ["response.created", "response.queued", "response.in_progress"],
    );
    const id = first.events[0].response.id;
    const last = first.events.at(-1).sequence_number;
    assert.notEqual((await bgClient.responses.retrieve(id)).status, "completed", "resumed while the response is still running");

    const rest = await drain(await bgClient.responses.retrieve(id, { stream: true, starting_after: last }));
    assert.equal(rest.error, undefined);
    const events = [...first.events, ...rest.events];
    assert.deepEqual(
      events.map((e) => e.sequence_number),
      events.map((_, i) => i),
      "no event lost or repeated",
    );
    assert.equal(events.at(-1).type, "response.completed");
    assert.deepEqual(
      events,
      sseEvents(bg.responseEvents(id).join("")).map((e) => e.data),
    );
    assert.equal(bg.calls(key).length, 1, "one create");
  });

  test("background cancel: cancelled, its streams end, and a second cancel answers the same", LIMIT, async () => {
    const created = await bgClient.responses.create({ model: MODEL, input: "never mind", background: true });
    const following = drain(await bgClient.responses.retrieve(created.id, { stream: true }));
    const cancelled = await bgClient.responses.cancel(created.id);
    assert.equal(cancelled.status, "cancelled");
    const { events, error } = await following;
    assert.equal(error, undefined, "the stream ends cleanly");
    assert.notEqual(events.at(-1)?.type, "response.completed");
    await sleep(BACKGROUND.queuedMs + 4 * BACKGROUND.eventMs);
    assert.equal((await bgClient.responses.retrieve(created.id)).status, "cancelled", "no more progress");
    assert.deepEqual(await bgClient.responses.cancel(created.id), cancelled);
    // A response that is not a background one cannot be cancelled.
    const plain = await bgClient.responses.create({ model: MODEL, input: "now" });
    await assert.rejects(bgClient.responses.cancel(plain.id), (e) => e.status === 400);
  });

  test("previous_response_id: a stored response chains; an unknown one, or one made with store: false, is a 400", LIMIT, async () => {
    const first = await client.responses.create({ model: MODEL, input: "one" });
    const second = await client.responses.create({ model: MODEL, input: "two", previous_response_id: first.id });
    assert.equal(second.previous_response_id, first.id);

    const key = newKey();
    await assert.rejects(client.responses.create({ model: MODEL, input: "x", previous_response_id: "resp_nope" }, keyed(key)), (error) => {
      assert.ok(error instanceof OpenAI.BadRequestError, error.constructor.name);
      assert.equal(error.code, "previous_response_not_found");
      assert.equal(error.param, "previous_response_id");
      assert.match(error.message, /resp_nope/);
      return true;
    });
    assert.equal(llm.calls(key).length, 1, "a 400 is not retried");

    const unstored = await client.responses.create({ model: MODEL, input: "forget me", store: false });
    assert.equal(unstored.status, "completed");
    await assert.rejects(client.responses.retrieve(unstored.id), (e) => e instanceof OpenAI.NotFoundError);
    await assert.rejects(client.responses.create({ model: MODEL, input: "x", previous_response_id: unstored.id }), (e) => e.code === "previous_response_not_found");
  });

  test("responses-drop:N: the SDK's stream errors after N events", LIMIT, async () => {
    const key = newKey();
    llm.script(key, ["responses-drop:5"]);
    const stream = client.responses.stream({ model: MODEL, input: "cut" }, keyed(key, { maxRetries: 0 }));
    const events = [];
    stream.on("event", (event) => events.push(event));
    // Cut after the 200 began: not an APIConnectionError (that is a cut before the headers) but fetch's "terminated".
    await assert.rejects(stream.finalResponse(), (error) => error.message === "terminated" && error.cause instanceof TypeError);
    assert.deepEqual(
      events.map((e) => e.sequence_number),
      [0, 1, 2, 3, 4],
    );
    assert.equal(events.at(-1).type, "response.output_text.delta");
    assert.equal(llm.calls(key).length, 1);
  });

  test("faults on POST /v1/responses: 500, 429 with Retry-After, hang, reset, delay, sse-error, sse", LIMIT, async () => {
    const noRetry = (key, extra = {}) => keyed(key, { maxRetries: 0, ...extra });
    const body = { model: MODEL, input: "faulty" };
    const key = newKey();
    llm.script(key, ["500", "429:7", "hang", "reset", "delay:300", "sse-error:2:0", "sse:3:0"]);
    await assert.rejects(client.responses.create(body, noRetry(key)), (e) => e instanceof OpenAI.InternalServerError && e.status === 500);
    await assert.rejects(client.responses.create(body, noRetry(key)), (e) => e instanceof OpenAI.RateLimitError && e.headers.get("retry-after") === "7");
    await assert.rejects(client.responses.create(body, noRetry(key, { timeout: 300 })), (e) => e instanceof OpenAI.APIConnectionTimeoutError);
    await assert.rejects(client.responses.create(body, noRetry(key)), (e) => e instanceof OpenAI.APIConnectionError);
    const started = Date.now();
    const delayed = await client.responses.create(body, noRetry(key));
    assert.ok(Date.now() - started >= 290, `answered after the delay (${Date.now() - started} ms)`);
    assert.equal(delayed.output_text, echoOf(JSON.stringify(body)));
    await assert.rejects(client.responses.stream(body, noRetry(key)).finalResponse(), (e) => e instanceof OpenAI.APIError && e.code === "server_error");
    const tokens = await client.responses.stream(body, noRetry(key)).finalResponse();
    assert.equal(tokens.output_text, "token0 token1 token2 ");
    assert.equal(llm.calls(key).length, 7);
  });

  test("calls are counted per Idempotency-Key with their path; the SDK's retries keep the key; the SDK sends none of its own", LIMIT, async () => {
    const key = newKey();
    llm.script(key, ["429:0", "503", "ok", "ok"]);
    const response = await client.responses.create({ model: MODEL, input: "count me" }, keyed(key));
    assert.equal(response.status, "completed");
    await client.chat.completions.create({ model: MODEL, messages: [{ role: "user", content: "and me" }] }, keyed(key));
    const calls = llm.calls(key);
    assert.deepEqual(
      calls.map((c) => c.path),
      ["/v1/responses", "/v1/responses", "/v1/responses", "/v1/chat/completions"],
      "two retries (429, 503), then the answer, then a chat call",
    );
    for (const call of calls) assert.equal(call.headers["idempotency-key"], key);
    assert.deepEqual(
      calls.map((c) => c.headers["x-stainless-retry-count"]),
      ["0", "1", "2", "0"],
    );

    // Without the header, the SDK sends no key at all (even with its idempotencyKey option).
    const other = newKey();
    const before = llm.calls("(none)").length;
    await client.responses.create({ model: MODEL, input: "no key" }, { idempotencyKey: other });
    assert.equal(llm.calls(other).length, 0);
    assert.equal(llm.calls("(none)").length, before + 1);
    assert.equal(JSON.parse(llm.calls("(none)").at(-1).body).input, "no key", "it arrived without a key");

    // Calls by id have no key; they are found by the response's id.
    await client.responses.retrieve(response.id);
    assert.deepEqual(
      llm.calls(response.id).map((c) => c.path),
      [`/v1/responses/${response.id}`],
    );
  });
});
