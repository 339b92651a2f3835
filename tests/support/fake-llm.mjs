// A fake LLM server that speaks real HTTP (OpenAI's chat completions and
// Anthropic's Messages API), counts calls per Idempotency-Key, and injects
// scripted faults. The worker under test calls it over the network exactly
// as it would call a real provider. Start as many as a test needs (several
// providers): each has its own scripts and counts.
//
// The gateway never forwards the client's key: it sends one derived from
// (tenant, key). `script` and `calls` take the client's key and the tenant
// (default "dev") and look up the derived one (see keys.mjs). A call that
// arrives with no Idempotency-Key at all is matched by the client's key
// appearing in its body (tests put the key into the prompt for that).
//
//   const llm = await startFakeLlm({ name: "backup" });  // name: in answer ids
//   llm.script("key-…", ["503", "ok"]);   // per key, consumed call by call
//   llm.calls("key-…")                     // → [{ at, body, model, headers, path }, …]
//
// Faults: "ok", "delay:MS", "429:SECONDS", "500", "503", "400",
// "content_filter", "big:BYTES" (a completion of that size), "hang" (never
// answers), "reset" (reads the request, then destroys the socket). A fault
// ending in "*" repeats forever; `llm.scriptAll([...])` applies to every key
// without a script of its own.
// Also: any other status "NNN" (401, 403, 404, 422, 502, 504, 529, …): an
// error of that status in the API's format; "content:TEXT" (200 whose
// assistant content is TEXT, URI-encoded: see `contentFault`) and
// "delay:MS:TEXT" (the same after MS ms; `delayedContent`), for output
// contracts and races.
//
// Streams (real SSE, chat completion chunks): "sse:N:MS" (N content events
// MS apart, a usage chunk, then `data: [DONE]`), "sse-drop:N:MS" (N events,
// then the socket is destroyed), "sse-error:N:MS" (N events, then an error
// event), "sse-nodone:N:MS" (N events, then a clean end with no [DONE]),
// "sse-big:N:BYTES" (N events of BYTES each, then [DONE]). Any of them with
// a fourth part, "sse:N:MS:WAIT", first keeps silent for WAIT ms (no
// headers). `llm.streams` counts streams whose client went away before the
// end.
//
// Anthropic: `POST …/messages` is answered in the Messages format: a message
// `{id, type: "message", role, model, content: [{type: "text", text}],
// stop_reason: "end_turn", usage: {input_tokens: 11, output_tokens: 7}}`;
// errors as `{type: "error", error: {type, message}}` (529
// overloaded_error, 400/422 invalid_request_error, 429 rate_limit_error, …);
// "content_filter" is a refusal (stop_reason "refusal", no content). The
// same faults apply; "ok", "delay" and "content" answer a `stream: true`
// request with the Messages SSE (event: message_start … message_stop), the
// "sse*" faults stream "token0 token1 …" in it ("sse-error" ends with
// `event: error`, "sse-nodone" without message_stop).
//
// OpenAI's Responses API (`…/responses`, as the `openai` SDK's
// `client.responses.create`/`stream`/`retrieve`/`cancel` call it):
// `POST …/responses` answers a response object `{id: "resp_…", object:
// "response", status: "completed", output: [{type: "message", id: "msg_…",
// role: "assistant", status: "completed", content: [{type: "output_text",
// text, annotations: [], logprobs: []}]}], usage: FAKE_RESPONSES_USAGE, …}`
// (no `output_text` on the wire: the SDK derives it); `stream: true` answers
// the Responses SSE (`event: response.created` … `response.completed`, each
// `data:` with `type` and a `sequence_number` from 0), one
// `response.output_text.delta` per word. Responses are stored (unless
// `store: false`): `GET …/responses/{id}` reads one (404 if unknown),
// `DELETE` deletes it, and a `previous_response_id` that names none is a 400
// `previous_response_not_found`. `background: true` is refused (400
// `unsupported_parameter`, as providers without background mode answer)
// unless the fake starts with `responsesBackground: true` (or `{ queuedMs,
// eventMs }`, defaults 100 and 20): then it answers `status: "queued"` at
// once and runs the response on timers (queued → in_progress → completed,
// whoever listens); `GET …/responses/{id}?stream=true&starting_after=N`
// replays its events after sequence number N byte for byte, then follows it
// live to the end; `POST …/responses/{id}/cancel` cancels it (its streams
// end). Stream retrieval of a response that is not a background one is a 400.
// The same faults apply to `POST …/responses` ("content_filter" is a
// response `incomplete` for `content_filter`); the "sse*" faults stream
// "token0 token1 …" as Responses events ("sse-drop" destroys the socket
// after the deltas, "sse-error" ends with `event: error`, "sse-nodone"
// without `response.completed`); "responses-drop:N" (or
// "responses-drop:N:MS", MS between deltas) sends the first N events of the
// whole stream, then (50 ms later, so the client has read them) destroys the
// socket; a background response goes on.
// Calls by id (GET, cancel, DELETE) carry no Idempotency-Key: they are
// counted under "(none)" (`calls(responseId)` finds them by their path) and
// take faults only from a script named by the response id
// (`llm.script(id, ["responses-drop:3"])`, "hang", "reset", "503", …), never
// from `scriptAll`. `llm.responses(id)` is the stored response (or
// undefined); `llm.responseEvents(id)` the SSE text of each event so far.
import http from "node:http";

import { keepIdleConnections } from "./keep-alive.mjs";
import { upstreamKey } from "./keys.mjs";

/** Usage every non-streamed answer reports (OpenAI names, Anthropic names). */
export const FAKE_USAGE = { prompt_tokens: 10, completion_tokens: 5, total_tokens: 15 };
export const FAKE_ANTHROPIC_USAGE = { input_tokens: 11, output_tokens: 7 };
/** The usage of every non-streamed Responses answer (a stream reports one output token per delta). */
export const FAKE_RESPONSES_USAGE = { input_tokens: 10, input_tokens_details: { cached_tokens: 0 }, output_tokens: 5, output_tokens_details: { reasoning_tokens: 0 }, total_tokens: 15 };

/** `content` (a string, or a value sent as JSON) as a fault: a 200 with that assistant content. */
export const contentFault = (content) => `content:${encodeContent(content)}`;
/** The same, answered after `ms`. */
export const delayedContent = (ms, content) => `delay:${ms}:${encodeContent(content)}`;
// `*` is escaped too: a trailing one would mean "repeat".
const encodeContent = (content) =>
  encodeURIComponent(typeof content === "string" ? content : JSON.stringify(content)).replaceAll("*", "%2A");

export async function startFakeLlm({ name, nodeKeepAlive = false, responsesBackground = false } = {}) {
  const scripts = new Map();
  let defaultScript = [];
  const calls = new Map();
  const hanging = new Set();

  const server = http.createServer(async (req, res) => {
    const chunks = [];
    for await (const chunk of req) chunks.push(chunk);
    const body = Buffer.concat(chunks).toString("utf8");
    const request = { ...parse(body), [BYTES]: body.length };
    const key = req.headers["idempotency-key"] ?? "(none)";
    if (!calls.has(key)) calls.set(key, []);
    calls.get(key).push({ at: Date.now(), body, model: request.model, headers: req.headers, path: req.url });

    const pathname = new URL(req.url, "http://fake").pathname;
    const responsesPath = RESPONSES_PATH.exec(pathname);
    if (responsesPath?.[1] !== undefined) return responses.byId(req, res, decodeURIComponent(responsesPath[1]), responsesPath[2] !== undefined);
    const api = pathname.endsWith("/messages") ? anthropic : responsesPath ? responses : openai;
    const fault = nextFault(key, body);
    const [kind, arg, arg2, arg3] = fault.split(":");
    if (kind === "responses-drop" && api === responses) {
      return responses.answer(req, res, request, undefined, { dropAfter: Number(arg), pause: Number(arg2 ?? 0) });
    }
    if (kind.startsWith("sse")) {
      if (arg3) await new Promise((r) => setTimeout(r, Number(arg3)));
      return stream(req, res, api, kind, Number(arg), Number(arg2 ?? 0), request);
    }
    switch (kind) {
      case "hang":
        hanging.add(res);
        return; // never answer
      case "reset":
        req.socket.destroy();
        return;
      case "delay":
        await new Promise((r) => setTimeout(r, Number(arg)));
        return api.answer(req, res, request, arg2 === undefined ? undefined : decodeURIComponent(arg2));
      case "content":
        return api.answer(req, res, request, decodeURIComponent(arg ?? ""));
      case "429":
        return send(res, 429, api.error(429, "slow down"), { "Retry-After": arg ?? "1" });
      case "500":
        return send(res, 500, api.error(500, "internal error"));
      case "503":
        return send(res, 503, api.error(503, "try again later"));
      case "400":
        return send(res, 400, api.error(400, "bad request"));
      case "content_filter":
        return send(res, 200, api.filtered(request));
      case "big":
        return send(res, 200, api.message(request, "x".repeat(Number(arg))));
      default:
        if (/^\d{3}$/.test(kind)) return send(res, Number(kind), api.error(Number(kind), `fake status ${kind}`));
        return api.answer(req, res, request);
    }
  });

  const streams = { clientGone: 0 };

  /** OpenAI's chat completions. */
  const openai = {
    answer(req, res, request, content) {
      return send(res, 200, openai.message(request, content));
    },
    error(status, message) {
      const type = { 400: "invalid_request_error", 429: "rate_limited", 500: "server_error", 503: "overloaded" }[status] ?? OPENAI_ERROR_TYPES[status] ?? `http_${status}`;
      return error(type, message);
    },
    message(request, content) {
      const reply = completion(request, "stop");
      if (content !== undefined) reply.choices[0].message.content = content;
      return reply;
    },
    filtered: (request) => completion(request, "content_filter"),
  };

  /** Anthropic's Messages API. */
  const anthropic = {
    answer(req, res, request, content) {
      const text = content ?? echo(request);
      if (request.stream !== true) return send(res, 200, anthropic.message(request, text));
      return streamAnthropic(req, res, request, text.match(/\S+\s*/g) ?? [text], 0, "end");
    },
    error(status, message) {
      return { type: "error", error: { type: ANTHROPIC_ERROR_TYPES[status] ?? (status >= 500 ? "api_error" : "invalid_request_error"), message } };
    },
    message(request, text) {
      return {
        id: `msg_${name ?? "fake"}`,
        type: "message",
        role: "assistant",
        model: request.model ?? "fake",
        content: [{ type: "text", text }],
        stop_reason: "end_turn",
        stop_sequence: null,
        usage: { ...FAKE_ANTHROPIC_USAGE },
      };
    },
    filtered: (request) => ({ ...anthropic.message(request, ""), content: [], stop_reason: "refusal" }),
  };

  /** OpenAI's Responses API. Every response this fake made (but those with `store: false`), by id. */
  const stored = new Map();
  let responseCount = 0;
  const background = responsesBackground && { queuedMs: 100, eventMs: 20, ...(typeof responsesBackground === "object" ? responsesBackground : {}) };

  const responses = {
    /** `dropAfter`: stream (whatever `stream` says) and destroy the socket after that many events. */
    answer(req, res, request, content, { dropAfter, pause = 0 } = {}) {
      const refused = responses.refuse(request);
      if (refused) return send(res, 400, refused);
      const text = content ?? echo(request);
      const streamed = request.stream === true || dropAfter !== undefined;
      if (request.background === true) return responses.background(req, res, request, text, streamed, dropAfter);
      if (streamed) return responses.stream(req, res, request, responses.texts(text), { pause, dropAfter });
      return send(res, 200, responses.message(request, text));
    },
    error: (status, message) => openai.error(status, message),
    /** A completed response whose text is `text` (stored). */
    message(request, text) {
      const record = responses.record(request, false);
      record.response = { ...record.response, status: "completed", completed_at: now(), output: [outputMessage(record.messageId, [outputText(text)], "completed")], usage: { ...FAKE_RESPONSES_USAGE } };
      return structuredClone(record.response);
    },
    /** A response the content filter stopped: `incomplete`, no output (stored). */
    filtered(request) {
      const record = responses.record(request, false);
      record.response = { ...record.response, status: "incomplete", incomplete_details: { reason: "content_filter" }, usage: responsesUsage(0) };
      return structuredClone(record.response);
    },
    /** Why a create is refused (an OpenAI error body), if it is. */
    refuse(request) {
      if (request.background === true && !background) {
        return invalidRequest("Background mode is not supported by this provider.", "background", "unsupported_parameter");
      }
      if (request.background === true && request.store === false) return invalidRequest("Background mode requires store=true.", "store", "invalid_value");
      const previous = request.previous_response_id;
      if (previous != null && !stored.has(previous)) {
        return invalidRequest(`Previous response with id '${previous}' not found.`, "previous_response_id", "previous_response_not_found");
      }
      return undefined;
    },
    /** A new response (queued if `isBackground`, in progress otherwise), stored unless `store: false`. */
    record(request, isBackground) {
      const n = String(++responseCount).padStart(6, "0");
      const id = `resp_${name ?? "fake"}_${n}`;
      const response = {
        id,
        object: "response",
        created_at: now(),
        status: isBackground ? "queued" : "in_progress",
        background: isBackground,
        completed_at: null,
        error: null,
        incomplete_details: null,
        instructions: request.instructions ?? null,
        max_output_tokens: request.max_output_tokens ?? null,
        metadata: request.metadata ?? {},
        model: request.model ?? "fake",
        output: [],
        parallel_tool_calls: request.parallel_tool_calls ?? true,
        previous_response_id: request.previous_response_id ?? null,
        reasoning: { effort: null, summary: null },
        store: request.store !== false,
        temperature: request.temperature ?? 1,
        text: { format: { type: "text" }, verbosity: "medium" },
        tool_choice: request.tool_choice ?? "auto",
        tools: request.tools ?? [],
        top_p: request.top_p ?? 1,
        truncation: request.truncation ?? "disabled",
        usage: null,
        user: request.user ?? null,
        access_programs: null,
      };
      const record = { id, messageId: `msg_${name ?? "fake"}_${n}`, background: isBackground, response, events: [], listeners: new Set(), done: false, aborted: false, timer: undefined };
      if (request.store !== false) stored.set(id, record);
      return record;
    },
    /** `text` as deltas: one per word. */
    texts: (text) => text.match(/\S+\s*/g) ?? [text],
    /** The events of `record`'s response (no sequence numbers yet): `texts` as deltas, then `end` ("end", "drop", "error", "nodone"). */
    events(record, texts, end) {
      const base = structuredClone(record.response);
      const inProgress = { ...base, status: "in_progress" };
      const at = { item_id: record.messageId, output_index: 0, content_index: 0 };
      const text = texts.join("");
      const list = [{ type: "response.created", response: base }];
      if (record.background) list.push({ type: "response.queued", response: base });
      list.push({ type: "response.in_progress", response: inProgress });
      list.push({ type: "response.output_item.added", output_index: 0, item: outputMessage(record.messageId, [], "in_progress") });
      list.push({ type: "response.content_part.added", ...at, part: outputText("") });
      for (const delta of texts) list.push({ type: "response.output_text.delta", ...at, delta, logprobs: [] });
      if (end === "error") list.push({ type: "error", code: "server_error", message: "the model failed mid-answer", param: null });
      if (end !== "end") return list;
      const item = outputMessage(record.messageId, [outputText(text)], "completed");
      list.push({ type: "response.output_text.done", ...at, text, logprobs: [] });
      list.push({ type: "response.content_part.done", ...at, part: outputText(text) });
      list.push({ type: "response.output_item.done", output_index: 0, item });
      list.push({ type: "response.completed", response: { ...inProgress, status: "completed", output: [item], usage: responsesUsage(texts.length) } });
      return list;
    },
    /** Records `event` as the next one of `record` (its SSE text is kept as sent) and wakes its streams. */
    emit(record, { type, ...fields }) {
      if (type === "response.completed") fields.response.completed_at = now();
      const data = { type, sequence_number: record.events.length, ...fields };
      record.events.push(`event: ${type}\ndata: ${JSON.stringify(data)}\n\n`);
      if (LIFECYCLE.has(type)) record.response = structuredClone(fields.response);
      else if (type === "response.output_item.done") record.response.output[fields.output_index] = structuredClone(fields.item);
      for (const listener of [...record.listeners]) listener();
    },
    /** No more events for `record`: its streams end. */
    end(record) {
      record.done = true;
      for (const listener of [...record.listeners]) listener();
    },
    /** A streamed response (not a background one): its events `pause` ms apart from the first delta, as its client reads them. */
    stream(req, res, request, texts, { pause = 0, end = "end", dropAfter = Infinity }) {
      const record = responses.record(request, false);
      const events = responses.events(record, texts, end);
      responses.pipe(req, res, record, -1, end === "drop" ? Math.min(dropAfter, events.length) : dropAfter);
      return (async () => {
        for (const [i, event] of events.entries()) {
          if (record.aborted) return; // the client went away: so does the answer
          if (pause && i > 0 && events[i - 1].type === "response.output_text.delta") await new Promise((r) => setTimeout(r, pause));
          if (record.aborted) return;
          responses.emit(record, event);
        }
        responses.end(record);
      })();
    },
    /** A background response: queued now, then its events `eventMs` apart, whoever listens. */
    background(req, res, request, text, streamed, dropAfter = Infinity) {
      const record = responses.record(request, true);
      const events = responses.events(record, responses.texts(text), "end");
      responses.emit(record, events[0]);
      responses.emit(record, events[1]);
      let next = 2;
      const step = () => {
        if (record.done) return; // cancelled
        responses.emit(record, events[next++]);
        if (next < events.length) record.timer = setTimeout(step, background.eventMs);
        else responses.end(record);
      };
      record.timer = setTimeout(step, background.queuedMs);
      if (streamed) return responses.pipe(req, res, record, -1, dropAfter);
      return send(res, 200, structuredClone(record.response));
    },
    /** Streams `record`'s events after sequence number `after`, then follows it to its end; destroys the socket after `dropAfter` events. */
    pipe(req, res, record, after, dropAfter) {
      res.writeHead(200, { "Content-Type": "text/event-stream", "Cache-Control": "no-cache" });
      let next = after + 1;
      let written = 0;
      const pump = () => {
        while (next < record.events.length && written < dropAfter) {
          res.write(record.events[next++]);
          written++;
        }
        if (written >= dropAfter) {
          // A moment later, so the client has read them: a fetch() body that
          // errors drops what it had received but not yet read.
          record.listeners.delete(pump);
          setTimeout(() => req.socket.destroy(), DROP_SETTLE_MS);
        } else if (record.done) {
          record.listeners.delete(pump);
          res.end();
        }
      };
      res.on("close", () => {
        record.listeners.delete(pump);
        if (!res.writableEnded) {
          streams.clientGone++;
          if (!record.background) record.aborted = true;
        }
      });
      record.listeners.add(pump);
      pump();
    },
    /** `GET …/responses/{id}` (`?stream=true&starting_after=N`), `DELETE …/responses/{id}`, `POST …/responses/{id}/cancel`. */
    async byId(req, res, id, cancel) {
      const url = new URL(req.url, "http://fake");
      const script = scripts.get(id);
      const fault = !script?.length ? "ok" : script[0].endsWith("*") ? script[0].slice(0, -1) : script.shift();
      const [kind, arg] = fault.split(":");
      switch (kind) {
        case "hang":
          hanging.add(res);
          return;
        case "reset":
          req.socket.destroy();
          return;
        case "delay":
          await new Promise((r) => setTimeout(r, Number(arg)));
          break;
        case "429":
          return send(res, 429, openai.error(429, "slow down"), { "Retry-After": arg ?? "1" });
        default:
          if (/^\d{3}$/.test(kind)) return send(res, Number(kind), openai.error(Number(kind), `fake status ${kind}`));
      }
      const record = stored.get(id);
      if (!record) return send(res, 404, invalidRequest(`Response with id '${id}' not found.`, null, null));
      if (cancel || req.method === "POST") {
        if (!cancel) return send(res, 405, invalidRequest(`${req.method} is not allowed here.`, null, null));
        if (!record.background) return send(res, 400, invalidRequest("Only responses created with background=true can be cancelled.", null, null));
        if (!record.done) {
          clearTimeout(record.timer);
          record.response = { ...record.response, status: "cancelled" };
          responses.end(record);
        }
        return send(res, 200, structuredClone(record.response));
      }
      if (req.method === "DELETE") {
        stored.delete(id);
        clearTimeout(record.timer); // a background one stops, and its streams end
        if (!record.done) responses.end(record);
        return send(res, 200, { id, object: "response.deleted", deleted: true });
      }
      if (req.method !== "GET") return send(res, 405, invalidRequest(`${req.method} is not allowed here.`, null, null));
      if (url.searchParams.get("stream") !== "true") return send(res, 200, structuredClone(record.response));
      if (!record.background) return send(res, 400, invalidRequest("Only background responses can be streamed again.", "stream", null));
      const after = url.searchParams.get("starting_after");
      if (after !== null && !/^-?\d+$/.test(after)) return send(res, 400, invalidRequest("starting_after must be an integer.", "starting_after", "invalid_value"));
      return responses.pipe(req, res, record, after === null ? -1 : Number(after), kind === "responses-drop" ? Number(arg) : Infinity);
    },
  };

  /** The Messages SSE: `texts` as text deltas `pause` ms apart, then `end` ("end", "drop", "error", "nodone"). */
  async function streamAnthropic(req, res, request, texts, pause, end) {
    res.writeHead(200, { "Content-Type": "text/event-stream", "Cache-Control": "no-cache" });
    let gone = false;
    res.on("close", () => {
      if (!res.writableEnded) {
        gone = true;
        streams.clientGone++;
      }
    });
    const event = (type, data) => res.write(`event: ${type}\ndata: ${JSON.stringify({ type, ...data })}\n\n`);
    const message = { ...anthropic.message(request, ""), content: [], stop_reason: null, usage: { input_tokens: FAKE_ANTHROPIC_USAGE.input_tokens, output_tokens: 1 } };
    event("message_start", { message });
    event("content_block_start", { index: 0, content_block: { type: "text", text: "" } });
    event("ping", {});
    for (let i = 0; i < texts.length && !gone; i++) {
      event("content_block_delta", { index: 0, delta: { type: "text_delta", text: texts[i] } });
      if (pause) await new Promise((r) => setTimeout(r, pause));
    }
    if (gone) return;
    switch (end) {
      case "drop":
        return req.socket.destroy();
      case "error":
        event("error", { error: { type: "overloaded_error", message: "Overloaded" } });
        return res.end();
      case "nodone":
        return res.end();
      default:
        event("content_block_stop", { index: 0 });
        event("message_delta", { delta: { stop_reason: "end_turn", stop_sequence: null }, usage: { output_tokens: texts.length } });
        event("message_stop", {});
        return res.end();
    }
  }

  async function stream(req, res, api, kind, count, pauseOrSize, request) {
    const big = kind === "sse-big";
    if (api === responses) {
      const texts = Array.from({ length: count }, (_, i) => (big ? "x".repeat(pauseOrSize) : `token${i} `));
      const end = { "sse-drop": "drop", "sse-error": "error", "sse-nodone": "nodone" }[kind] ?? "end";
      return responses.stream(req, res, request, texts, { pause: big ? 0 : pauseOrSize, end });
    }
    if (api === anthropic) {
      const texts = Array.from({ length: count }, (_, i) => (big ? "x".repeat(pauseOrSize) : `token${i} `));
      const end = { "sse-drop": "drop", "sse-error": "error", "sse-nodone": "nodone" }[kind] ?? "end";
      return streamAnthropic(req, res, request, texts, big ? 0 : pauseOrSize, end);
    }
    res.writeHead(200, { "Content-Type": "text/event-stream", "Cache-Control": "no-cache" });
    let gone = false;
    res.on("close", () => {
      if (!res.writableEnded) {
        gone = true;
        streams.clientGone++;
      }
    });
    for (let i = 0; i < count && !gone; i++) {
      const content = big ? "x".repeat(pauseOrSize) : `token${i} `;
      res.write(`data: ${JSON.stringify(chunk(request, { content }, null))}\n\n`);
      if (!big && pauseOrSize) await new Promise((r) => setTimeout(r, pauseOrSize));
    }
    if (gone) return;
    switch (kind) {
      case "sse-drop":
        return req.socket.destroy();
      case "sse-error":
        res.write(`data: ${JSON.stringify(error("server_error", "the model failed mid-answer"))}\n\n`);
        return res.end();
      case "sse-nodone":
        return res.end();
      default:
        res.write(`data: ${JSON.stringify(chunk(request, {}, "stop"))}\n\n`);
        res.write(`data: ${JSON.stringify({ ...chunk(request, {}, null), choices: [], usage: { prompt_tokens: 10, completion_tokens: count, total_tokens: 10 + count } })}\n\n`);
        res.write("data: [DONE]\n\n");
        return res.end();
    }
  }

  function nextFault(key, body) {
    let script = scripts.get(key);
    if (script === undefined && key === "(none)") {
      // No key upstream: a script whose (client's) key the prompt names.
      script = [...scripts.entries()].find(([k]) => !k.startsWith("onejob-") && body.includes(k))?.[1];
    }
    script ??= defaultScript;
    if (!script || script.length === 0) return "ok";
    const head = script[0];
    if (head.endsWith("*")) return head.slice(0, -1);
    return script.shift();
  }

  function completion(request, finishReason) {
    const reply = {
      id: name ? `chatcmpl-${name}` : "chatcmpl-fake",
      object: "chat.completion",
      created: 1767225600,
      model: request.model ?? "fake",
      choices: [{ index: 0, message: { role: "assistant", content: finishReason === "content_filter" ? "" : echo(request) }, finish_reason: finishReason }],
      usage: { ...FAKE_USAGE },
    };
    return reply;
  }

  function chunk(request, delta, finishReason) {
    return { id: name ? `chatcmpl-${name}` : "chatcmpl-fake", object: "chat.completion.chunk", created: 1767225600, model: request.model ?? "fake", choices: [{ index: 0, delta, finish_reason: finishReason }] };
  }

  // `nodeKeepAlive`: Node's own default (idle connections closed after 5 s),
  // as a third-party provider behind Node would.
  if (!nodeKeepAlive) keepIdleConnections(server);
  await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address();
  return {
    name,
    port,
    baseUrl: `http://127.0.0.1:${port}/v1`,
    script(key, faults, tenant = "dev") {
      // Under the raw key too, so a test can also run against a gateway that
      // forwards the client's key (ONEJOB_CHECKOUT=an older checkout).
      scripts.set(upstreamKey(key, tenant), [...faults]);
      scripts.set(key, [...faults]);
    },
    /** A script for every key that has none of its own. */
    scriptAll(faults) {
      defaultScript = [...faults];
    },
    calls(key, tenant = "dev") {
      const keyed = [...(calls.get(upstreamKey(key, tenant)) ?? []), ...(calls.get(key) ?? [])];
      // A Responses call by id (GET, cancel) names its response in its path.
      const named = (c) => c.body.includes(key) || (RESPONSES_PATH.test(new URL(c.path, "http://fake").pathname) && c.path.includes(key));
      const unkeyed = tenant === "dev" ? (calls.get("(none)") ?? []).filter(named) : [];
      return [...keyed, ...unkeyed].sort((a, b) => a.at - b.at);
    },
    streams,
    /** The stored Responses response `id` as a GET would read it (undefined if none). */
    responses(id) {
      const record = stored.get(id);
      return record && structuredClone(record.response);
    },
    /** The SSE text (`event: …\ndata: …\n\n`) of each event of response `id` so far. */
    responseEvents(id) {
      return [...(stored.get(id)?.events ?? [])];
    },
    /** Every call, whatever its key. */
    allCalls() {
      return [...calls.values()].flat();
    },
    async close() {
      for (const record of stored.values()) clearTimeout(record.timer);
      for (const res of hanging) res.socket?.destroy();
      server.closeAllConnections?.();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}

/** `…/responses` (group 1 absent), `…/responses/{id}` (group 1), `…/responses/{id}/cancel` (group 2). */
const RESPONSES_PATH = /\/responses(?:\/([^/]+)(\/cancel)?)?$/;
/** How long a Responses stream that is to be cut waits after its last event (see `pipe`). */
const DROP_SETTLE_MS = 50;
/** Response events the writer applies to its snapshot as a whole response. */
const LIFECYCLE = new Set(["response.created", "response.queued", "response.in_progress", "response.completed", "response.failed", "response.incomplete"]);

const OPENAI_ERROR_TYPES = { 401: "authentication_error", 403: "permission_denied", 404: "not_found", 422: "invalid_request_error", 529: "overloaded" };
const ANTHROPIC_ERROR_TYPES = {
  400: "invalid_request_error",
  401: "authentication_error",
  403: "permission_error",
  404: "not_found_error",
  413: "request_too_large",
  422: "invalid_request_error",
  429: "rate_limit_error",
  500: "api_error",
  529: "overloaded_error",
};

function parse(body) {
  try {
    const value = JSON.parse(body);
    return value && typeof value === "object" ? value : {};
  } catch {
    return {};
  }
}

/** The default answer: how many bytes the request had (the same request, the same answer). */
const BYTES = Symbol("bytes");
const echo = (request) => `echo of ${request[BYTES]} bytes`;

function send(res, status, body, headers = {}) {
  const text = JSON.stringify(body);
  res.writeHead(status, { "Content-Type": "application/json", "Content-Length": Buffer.byteLength(text), ...headers });
  res.end(text);
}

function error(type, message) {
  return { error: { type, code: type, message } };
}

/** An OpenAI `invalid_request_error` body, as the Responses API words it. */
function invalidRequest(message, param, code) {
  return { error: { message, type: "invalid_request_error", param, code } };
}

const now = () => Math.floor(Date.now() / 1000);

/** A Responses output message. */
function outputMessage(id, content, status) {
  return { id, type: "message", status, content, role: "assistant" };
}

function outputText(text) {
  return { type: "output_text", annotations: [], logprobs: [], text };
}

/** Responses usage with `outputTokens` output tokens. */
function responsesUsage(outputTokens) {
  return { ...structuredClone(FAKE_RESPONSES_USAGE), output_tokens: outputTokens, total_tokens: FAKE_RESPONSES_USAGE.input_tokens + outputTokens };
}
