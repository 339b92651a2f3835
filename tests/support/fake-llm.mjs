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
import http from "node:http";

import { keepIdleConnections } from "./keep-alive.mjs";
import { upstreamKey } from "./keys.mjs";

/** Usage every non-streamed answer reports (OpenAI names, Anthropic names). */
export const FAKE_USAGE = { prompt_tokens: 10, completion_tokens: 5, total_tokens: 15 };
export const FAKE_ANTHROPIC_USAGE = { input_tokens: 11, output_tokens: 7 };

/** `content` (a string, or a value sent as JSON) as a fault: a 200 with that assistant content. */
export const contentFault = (content) => `content:${encodeContent(content)}`;
/** The same, answered after `ms`. */
export const delayedContent = (ms, content) => `delay:${ms}:${encodeContent(content)}`;
// `*` is escaped too: a trailing one would mean "repeat".
const encodeContent = (content) =>
  encodeURIComponent(typeof content === "string" ? content : JSON.stringify(content)).replaceAll("*", "%2A");

export async function startFakeLlm({ name, nodeKeepAlive = false } = {}) {
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

    const api = new URL(req.url, "http://fake").pathname.endsWith("/messages") ? anthropic : openai;
    const fault = nextFault(key, body);
    const [kind, arg, arg2, arg3] = fault.split(":");
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
      const unkeyed = tenant === "dev" ? (calls.get("(none)") ?? []).filter((c) => c.body.includes(key)) : [];
      return [...keyed, ...unkeyed].sort((a, b) => a.at - b.at);
    },
    streams,
    /** Every call, whatever its key. */
    allCalls() {
      return [...calls.values()].flat();
    },
    async close() {
      for (const res of hanging) res.socket?.destroy();
      server.closeAllConnections?.();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}

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
