// A fake OpenAI-compatible LLM server that speaks real HTTP, counts calls per
// Idempotency-Key, and injects scripted faults. The worker under test calls
// it over the network exactly as it would call a real provider.
//
// The gateway never forwards the client's key: it sends one derived from
// (tenant, key). `script` and `calls` take the client's key and the tenant
// (default "dev") and look up the derived one (see keys.mjs).
//
//   const llm = await startFakeLlm();
//   llm.script("key-…", ["503", "ok"]);   // per key, consumed call by call
//   llm.calls("key-…")                     // → [{ at, body, headers, path }, …]
//
// Faults: "ok", "delay:MS", "429:SECONDS", "500", "503", "400",
// "content_filter", "big:BYTES" (a completion of that size), "hang" (never
// answers), "reset" (reads the request, then destroys the socket). A fault
// ending in "*" repeats forever; `llm.scriptAll([...])` applies to every key
// without a script of its own.
//
// Streams (real SSE, chat completion chunks): "sse:N:MS" (N content events
// MS apart, a usage chunk, then `data: [DONE]`), "sse-drop:N:MS" (N events,
// then the socket is destroyed), "sse-error:N:MS" (N events, then an error
// event), "sse-nodone:N:MS" (N events, then a clean end with no [DONE]),
// "sse-big:N:BYTES" (N events of BYTES each, then [DONE]). `llm.streams`
// counts streams whose client went away before the end.
import http from "node:http";

import { upstreamKey } from "./keys.mjs";

export async function startFakeLlm() {
  const scripts = new Map();
  let defaultScript = [];
  const calls = new Map();
  const hanging = new Set();

  const server = http.createServer(async (req, res) => {
    const chunks = [];
    for await (const chunk of req) chunks.push(chunk);
    const body = Buffer.concat(chunks).toString("utf8");
    const key = req.headers["idempotency-key"] ?? "(none)";
    if (!calls.has(key)) calls.set(key, []);
    calls.get(key).push({ at: Date.now(), body, headers: req.headers, path: req.url });

    const fault = nextFault(key);
    const [kind, arg, arg2] = fault.split(":");
    if (kind.startsWith("sse")) return stream(req, res, kind, Number(arg), Number(arg2 ?? 0), body);
    switch (kind) {
      case "hang":
        hanging.add(res);
        return; // never answer
      case "reset":
        req.socket.destroy();
        return;
      case "delay":
        await new Promise((r) => setTimeout(r, Number(arg)));
        return answer(res, 200, completion(body, "stop"));
      case "429":
        return answer(res, 429, error("rate_limited", "slow down"), { "Retry-After": arg ?? "1" });
      case "500":
        return answer(res, 500, error("server_error", "internal error"));
      case "503":
        return answer(res, 503, error("overloaded", "try again later"));
      case "400":
        return answer(res, 400, error("invalid_request_error", "bad request"));
      case "content_filter":
        return answer(res, 200, completion(body, "content_filter"));
      case "big": {
        const reply = completion(body, "stop");
        reply.choices[0].message.content = "x".repeat(Number(arg));
        return answer(res, 200, reply);
      }
      default:
        return answer(res, 200, completion(body, "stop"));
    }
  });

  const streams = { clientGone: 0 };

  async function stream(req, res, kind, count, pauseOrSize, requestBody) {
    res.writeHead(200, { "Content-Type": "text/event-stream", "Cache-Control": "no-cache" });
    let gone = false;
    res.on("close", () => {
      if (!res.writableEnded) {
        gone = true;
        streams.clientGone++;
      }
    });
    const big = kind === "sse-big";
    for (let i = 0; i < count && !gone; i++) {
      const content = big ? "x".repeat(pauseOrSize) : `token${i} `;
      res.write(`data: ${JSON.stringify(chunk(requestBody, { content }, null))}\n\n`);
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
        res.write(`data: ${JSON.stringify(chunk(requestBody, {}, "stop"))}\n\n`);
        res.write(`data: ${JSON.stringify({ ...chunk(requestBody, {}, null), choices: [], usage: { prompt_tokens: 10, completion_tokens: count, total_tokens: 10 + count } })}\n\n`);
        res.write("data: [DONE]\n\n");
        return res.end();
    }
  }

  function nextFault(key) {
    const script = scripts.get(key) ?? defaultScript;
    if (!script || script.length === 0) return "ok";
    const head = script[0];
    if (head.endsWith("*")) return head.slice(0, -1);
    return script.shift();
  }

  await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address();
  return {
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
      return [...(calls.get(upstreamKey(key, tenant)) ?? []), ...(calls.get(key) ?? [])];
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

function answer(res, status, body, headers = {}) {
  const text = JSON.stringify(body);
  res.writeHead(status, { "Content-Type": "application/json", "Content-Length": Buffer.byteLength(text), ...headers });
  res.end(text);
}

function error(type, message) {
  return { error: { type, code: type, message } };
}

function completion(requestBody, finishReason) {
  let model = "fake";
  try {
    model = JSON.parse(requestBody).model ?? model;
  } catch {}
  const content = finishReason === "content_filter" ? "" : `echo of ${requestBody.length} bytes`;
  return {
    id: "chatcmpl-fake",
    object: "chat.completion",
    created: 1767225600,
    model,
    choices: [{ index: 0, message: { role: "assistant", content }, finish_reason: finishReason }],
    usage: { prompt_tokens: 10, completion_tokens: 5, total_tokens: 15 },
  };
}

function chunk(requestBody, delta, finishReason) {
  let model = "fake";
  try {
    model = JSON.parse(requestBody).model ?? model;
  } catch {}
  return { id: "chatcmpl-fake", object: "chat.completion.chunk", created: 1767225600, model, choices: [{ index: 0, delta, finish_reason: finishReason }] };
}
