// A fake upstream MCP server over real HTTP (Streamable HTTP, built with the
// official SDK's McpServer and StreamableHTTPServerTransport), for the MCP
// gateway's tests (issue 37): tools with side effects that it counts, tool
// annotations, progress notifications, a required bearer token, and scripted
// faults. It does not deduplicate anything: running a tool call once is the
// gateway's job, and the counts show whether it did.
//
//   const mcp = await startFakeMcp({ name: "tickets", requiredAuth: { token: "up-secret" } });
//   mcp.url                                          // the MCP endpoint (…/mcp)
//   mcp.script("create_ticket", ["drop-after-execute", "ok"]);   // per tool
//   mcp.script("charge", ["error"], { amount: 5 });  // per tool and arguments (first)
//   mcp.executions("create_ticket", { title: "x" })  // runs of that tool with those arguments
//   mcp.executions("create_ticket")                   // … with any arguments
//   mcp.calls()   // every tools/call received: [{ at, id, tool, args, meta, headers, sessionId, authorized }]
//   mcp.requests()   // every HTTP request: [{ at, method, path, headers, messages, status }]
//                    // (status: the fake's own refusal, 401/404/…, or "handled" by the SDK)
//
// Tools: `create_ticket` {title, body?} (a ticket "TKT-n", n counting up per
// execution), `read_ticket` {id} (readOnlyHint), `charge` {amount,
// currency?} (idempotentHint: false), `fails` (a result with isError: true),
// `slow_report` {steps?, ms?} (`steps` notifications/progress `ms` apart when
// the request has a progressToken). An execution is counted per (tool,
// canonical JSON of the arguments as sent, keys sorted).
//
// Faults, consumed call by call (a fault ending in "*" repeats forever): "ok",
// "delay:MS" (wait, then execute and answer), "hang" (never executes, never
// answers), "drop" (destroys the socket without executing),
// "drop-after-execute" (executes, counts, then destroys the socket instead of
// answering), "hang-after-execute" (executes, never answers), "error" or
// "error:CODE" (a JSON-RPC error, -32603 by default; not executed). A script
// for (tool, arguments) is used while it lasts, then the tool's.
//
// Modes: sessions (the default: Mcp-Session-Id, a standalone GET stream, as
// most servers of revision 2025-11-25 run), `stateless: true` (a server and
// transport per POST, GET answered 405), `json: true` (answers as JSON
// instead of an SSE stream). `resetSessions()` forgets every session (as a
// restarted server would: their next request gets 404).
import { randomUUID } from "node:crypto";
import http from "node:http";

import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";
import { isInitializeRequest, isJSONRPCRequest } from "@modelcontextprotocol/sdk/types.js";
// The SDK's required peer dependency (its README installs it alongside).
import * as z from "zod";

import { keepIdleConnections } from "./keep-alive.mjs";

const FAULTS = new Set(["ok", "delay", "hang", "drop", "drop-after-execute", "hang-after-execute", "error"]);

export async function startFakeMcp({ name = "fake-mcp", stateless = false, json = false, requiredAuth } = {}) {
  const scripts = new Map();
  const counts = new Map();
  const callLog = [];
  const requestLog = [];
  const tickets = new Map();
  let ticketSeq = 0;
  let chargeSeq = 0;
  /** Session id → its context (session mode). */
  const sessions = new Map();
  /** Every live context (sessions, and in-flight stateless requests), for close(). */
  const contexts = new Set();
  /** Sockets of requests left hanging, destroyed by close(). */
  const hanging = new Set();

  function nextFault(tool, args) {
    for (const key of [argsKey(tool, args), tool]) {
      const script = scripts.get(key);
      if (!script || script.length === 0) continue;
      const head = script[0];
      if (head.endsWith("*")) return head.slice(0, -1);
      return script.shift();
    }
    return "ok";
  }

  /** One McpServer and its transport: per session, or per request when stateless. */
  function newContext() {
    const ctx = {
      /** JSON-RPC request id → the socket it came on. */
      sockets: new Map(),
      /** tools/call id → { tool, args } as sent. */
      toolCalls: new Map(),
      /** tools/call id → "drop" | "hang": what becomes of its answer. */
      onAnswer: new Map(),
    };
    const server = new McpServer({ name, version: "1.0.0" }, { capabilities: { tools: {} } });
    registerTools(server, ctx);
    const transport = new StreamableHTTPServerTransport({
      sessionIdGenerator: stateless ? undefined : () => randomUUID(),
      enableJsonResponse: json,
      onsessioninitialized: (id) => {
        ctx.sessionId = id;
        sessions.set(id, ctx);
      },
    });
    transport.onclose = () => {
      if (ctx.sessionId) sessions.delete(ctx.sessionId);
      contexts.delete(ctx);
    };
    Object.assign(ctx, { server, transport });
    contexts.add(ctx);
    return ctx;
  }

  /** Faults sit between the wire and the SDK: on the transport's messages in, and its answers out. */
  function injectFaults(ctx) {
    const { transport } = ctx;
    const deliver = transport.onmessage;
    transport.onmessage = (message, extra) => {
      if (!isJSONRPCRequest(message) || message.method !== "tools/call") return deliver(message, extra);
      const { id } = message;
      const tool = message.params?.name;
      const args = message.params?.arguments ?? {};
      ctx.toolCalls.set(id, { tool, args });
      const socket = ctx.sockets.get(id);
      const fault = nextFault(tool, args);
      const [kind, arg] = fault.split(":");
      switch (kind) {
        case "delay":
          setTimeout(() => deliver(message, extra), Number(arg));
          return;
        case "hang":
          if (socket) hanging.add(socket);
          return;
        case "drop":
          // After the transport has handed its response to Node.
          setImmediate(() => socket?.destroy());
          return;
        case "drop-after-execute":
        case "hang-after-execute":
          ctx.onAnswer.set(id, kind === "drop-after-execute" ? "drop" : "hang");
          return deliver(message, extra);
        case "error":
          transport
            .send({ jsonrpc: "2.0", id, error: { code: arg === undefined ? -32603 : Number(arg), message: `fake MCP error (${tool})` } })
            .catch(() => {});
          return;
        case "ok":
          return deliver(message, extra);
        default:
          throw new Error(`fake-mcp: unknown fault ${JSON.stringify(fault)}`);
      }
    };
    const send = transport.send.bind(transport);
    transport.send = async (message, options) => {
      const answer = message && ("result" in message || "error" in message);
      if (answer && ctx.onAnswer.has(message.id)) {
        const fate = ctx.onAnswer.get(message.id);
        ctx.onAnswer.delete(message.id);
        const socket = ctx.sockets.get(message.id);
        if (fate === "drop") socket?.destroy();
        else if (socket) hanging.add(socket);
        return; // the answer is never sent
      }
      return send(message, options);
    };
  }

  /** Counts an execution of the call `extra` belongs to, as it was sent. */
  function executed(ctx, tool, extra) {
    const args = ctx.toolCalls.get(extra.requestId)?.args ?? {};
    const key = argsKey(tool, args);
    counts.set(key, (counts.get(key) ?? 0) + 1);
  }

  function registerTools(server, ctx) {
    server.registerTool(
      "create_ticket",
      {
        description: "Creates a support ticket (a side effect: each call creates one).",
        inputSchema: { title: z.string(), body: z.string().optional() },
      },
      async ({ title, body }, extra) => {
        executed(ctx, "create_ticket", extra);
        const id = `TKT-${++ticketSeq}`;
        tickets.set(id, { id, title, body });
        return { content: [{ type: "text", text: `created ticket ${id}` }], structuredContent: { id } };
      },
    );
    server.registerTool(
      "read_ticket",
      {
        description: "Reads a ticket.",
        inputSchema: { id: z.string() },
        annotations: { readOnlyHint: true },
      },
      async ({ id }, extra) => {
        executed(ctx, "read_ticket", extra);
        const ticket = tickets.get(id);
        if (!ticket) return { content: [{ type: "text", text: `no ticket ${id}` }], isError: true };
        return { content: [{ type: "text", text: JSON.stringify(ticket) }] };
      },
    );
    server.registerTool(
      "charge",
      {
        description: "Charges an amount (each call charges again).",
        inputSchema: { amount: z.number(), currency: z.string().optional() },
        annotations: { readOnlyHint: false, destructiveHint: false, idempotentHint: false, openWorldHint: true },
      },
      async ({ amount, currency }, extra) => {
        executed(ctx, "charge", extra);
        return { content: [{ type: "text", text: `charged ${amount} ${currency ?? "USD"} (CH-${++chargeSeq})` }] };
      },
    );
    server.registerTool("fails", { description: "Always fails (a tool error, isError: true)." }, async (extra) => {
      executed(ctx, "fails", extra);
      return { content: [{ type: "text", text: "the tool failed" }], isError: true };
    });
    server.registerTool(
      "slow_report",
      {
        description: "Builds a report in steps, reporting progress.",
        inputSchema: { steps: z.number().int().min(1).max(100).optional(), ms: z.number().int().min(0).optional() },
        annotations: { readOnlyHint: true },
      },
      async ({ steps = 3, ms = 20 }, extra) => {
        executed(ctx, "slow_report", extra);
        const progressToken = extra._meta?.progressToken;
        for (let i = 1; i <= steps; i++) {
          if (progressToken !== undefined) {
            await extra.sendNotification({ method: "notifications/progress", params: { progressToken, progress: i, total: steps, message: `step ${i}` } });
          }
          if (ms) await new Promise((r) => setTimeout(r, ms));
        }
        return { content: [{ type: "text", text: `report of ${steps} steps` }] };
      },
    );
  }

  async function connect(ctx) {
    await ctx.server.connect(ctx.transport);
    injectFaults(ctx);
    return ctx;
  }

  async function handle(req, res) {
    const url = new URL(req.url, "http://fake");
    const chunks = [];
    for await (const chunk of req) chunks.push(chunk);
    const text = Buffer.concat(chunks).toString("utf8");
    let body;
    let parseError = false;
    if (text) {
      try {
        body = JSON.parse(text);
      } catch {
        parseError = true;
      }
    }
    const messages = body === undefined ? [] : Array.isArray(body) ? body : [body];
    const authorized = !requiredAuth || req.headers.authorization === `Bearer ${requiredAuth.token}`;
    const at = Date.now();
    const sessionId = req.headers["mcp-session-id"];
    const logged = { at, method: req.method, path: url.pathname, headers: { ...req.headers }, messages };
    requestLog.push(logged);
    for (const m of messages) {
      if (m?.method === "tools/call") {
        callLog.push({ at, id: m.id, tool: m.params?.name, args: m.params?.arguments, meta: m.params?._meta, headers: { ...req.headers }, sessionId, authorized });
      }
    }
    const reply = (status, value, headers = {}) => {
      logged.status = status;
      sendJson(res, status, value, headers);
    };

    if (url.pathname !== "/mcp") return reply(404, rpcError(-32601, "not found"));
    if (!authorized) {
      const error = req.headers.authorization ? ', error="invalid_token"' : "";
      return reply(401, rpcError(-32001, "unauthorized"), { "WWW-Authenticate": `Bearer realm="${name}"${error}` });
    }
    if (parseError) return reply(400, rpcError(-32700, "Parse error: Invalid JSON"));

    let ctx;
    if (stateless) {
      if (req.method !== "POST") return reply(405, rpcError(-32000, "Method not allowed."), { Allow: "POST" });
      ctx = await connect(newContext());
      res.on("close", () => {
        ctx.transport.close().catch(() => {});
        ctx.server.close().catch(() => {});
      });
    } else if (sessionId !== undefined) {
      ctx = sessions.get(sessionId);
      if (!ctx) return reply(404, rpcError(-32001, "Session not found"));
    } else if (req.method === "POST" && messages.some((m) => isInitializeRequest(m))) {
      ctx = await connect(newContext());
    } else {
      return reply(400, rpcError(-32000, "Bad Request: No valid session ID provided"));
    }
    for (const m of messages) if (isJSONRPCRequest(m)) ctx.sockets.set(m.id, req.socket);
    logged.status = "handled";
    await ctx.transport.handleRequest(req, res, body);
  }

  const server = http.createServer((req, res) => {
    res.on("error", () => {});
    handle(req, res).catch((error) => {
      if (!res.headersSent) sendJson(res, 500, rpcError(-32603, `fake-mcp: ${error?.message ?? error}`));
      else res.destroy();
    });
  });
  keepIdleConnections(server);
  await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address();

  return {
    name,
    port,
    url: `http://127.0.0.1:${port}/mcp`,
    /** `faults` for `tool`'s next calls; with `args`, only for calls with those arguments. */
    script(tool, faults, args) {
      for (const fault of faults) {
        const kind = fault.replace(/\*$/, "").split(":")[0];
        if (!FAULTS.has(kind)) throw new Error(`fake-mcp: unknown fault ${JSON.stringify(fault)}`);
      }
      scripts.set(args === undefined ? tool : argsKey(tool, args), [...faults]);
    },
    /** How many times `tool` ran (with `args`, with exactly those arguments). */
    executions(tool, args) {
      if (args !== undefined) return counts.get(argsKey(tool, args)) ?? 0;
      let total = 0;
      for (const [key, n] of counts) if (key.startsWith(`${tool}\u0000`)) total += n;
      return total;
    },
    /** Every tools/call received (also those refused for want of the token), in order. */
    calls() {
      return callLog.map((c) => ({ ...c }));
    },
    /** Every HTTP request received. */
    requests() {
      return requestLog.map((r) => ({ ...r }));
    },
    /** Live session ids (session mode). */
    sessionIds() {
      return [...sessions.keys()];
    },
    /** Forgets every session, as a restarted server would: their next request gets 404. */
    async resetSessions() {
      const live = [...sessions.values()];
      sessions.clear();
      for (const ctx of live) await closeContext(ctx);
    },
    async close() {
      for (const socket of hanging) socket.destroy();
      for (const ctx of [...contexts]) await closeContext(ctx);
      server.closeAllConnections?.();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}

async function closeContext(ctx) {
  await ctx.transport.close().catch(() => {});
  await ctx.server.close().catch(() => {});
}

/** JSON with object keys sorted, at every depth. */
export function canonicalJson(value) {
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(",")}]`;
  if (value && typeof value === "object") {
    const keys = Object.keys(value).filter((k) => value[k] !== undefined).sort();
    return `{${keys.map((k) => `${JSON.stringify(k)}:${canonicalJson(value[k])}`).join(",")}}`;
  }
  return JSON.stringify(value) ?? "null";
}

const argsKey = (tool, args) => `${tool}\u0000${canonicalJson(args ?? {})}`;

const rpcError = (code, message) => ({ jsonrpc: "2.0", error: { code, message }, id: null });

function sendJson(res, status, value, headers = {}) {
  const text = JSON.stringify(value);
  res.writeHead(status, { "Content-Type": "application/json", "Content-Length": Buffer.byteLength(text), ...headers });
  res.end(text);
}
