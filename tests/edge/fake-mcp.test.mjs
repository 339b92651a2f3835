// The fake upstream MCP server (tests/support/fake-mcp.mjs) the MCP
// gateway's tests will use (issue 37), tested with the official client
// (`Client` + `StreamableHTTPClientTransport`) at its defaults. No worker.
//
// What these tests also pin down about the official TypeScript SDK (the
// version package.json pins), as the gateway will meet it:
// - it negotiates protocol 2025-11-25 and keeps the server's Mcp-Session-Id;
//   JSON-RPC ids count up per client from 0 (initialize), one fresh id per
//   tools/call;
// - an SSE answer dropped after its headers does not fail the call: the
//   client reports "SSE stream disconnected" to `onerror`, does not re-send,
//   and the call fails only at its request timeout (60 s by default), after
//   which the client posts notifications/cancelled for its id;
// - the same drop on a JSON answer (`enableJsonResponse`) fails at once, with
//   a TypeError ("fetch failed"), not an McpError; progress notifications of
//   such a request never reach the client;
// - a 404 for a forgotten session fails the call: the client does not start a
//   new session by itself;
// - a 401 fails `connect` (no auth provider: no OAuth attempt).
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";

import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport, StreamableHTTPError } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { ErrorCode, McpError } from "@modelcontextprotocol/sdk/types.js";

import { canonicalJson, startFakeMcp } from "../support/fake-mcp.mjs";

/** A request timeout for answers that never come (the client's default is 60 s). */
const SHORT_MS = 700;
const PROTOCOL = "2025-11-25";
const TOOLS = ["charge", "create_ticket", "fails", "read_ticket", "slow_report"];

/** The official client at its defaults (`headers`: sent on every request). */
async function connect(fake, headers) {
  const client = new Client({ name: "fake-mcp-test", version: "1.0.0" });
  const transport = new StreamableHTTPClientTransport(new URL(fake.url), headers ? { requestInit: { headers } } : undefined);
  const errors = [];
  client.onerror = (error) => errors.push(error);
  await client.connect(transport);
  return { client, transport, errors };
}

const text = (result) => result.content.map((c) => c.text).join("");
const isTimeout = (error) => error instanceof McpError && error.code === ErrorCode.RequestTimeout;

async function until(predicate, what, ms = 2_000) {
  const end = Date.now() + ms;
  while (!predicate()) {
    if (Date.now() > end) assert.fail(`timed out waiting for ${what}`);
    await sleep(10);
  }
}

for (const [mode, options] of [
  ["sessions", {}],
  ["stateless", { stateless: true }],
]) {
  describe(`fake MCP server (${mode}) with the official client`, () => {
    let fake, client, transport, errors;
    before(async () => {
      fake = await startFakeMcp({ name: `tickets-${mode}`, ...options });
      ({ client, transport, errors } = await connect(fake));
    });
    after(async () => {
      await client?.close();
      await fake?.close();
    });

    test("negotiates 2025-11-25 and lists the tools with their annotations", async () => {
      assert.equal(transport.protocolVersion, PROTOCOL);
      assert.equal(client.getServerVersion()?.name, `tickets-${mode}`);
      if (mode === "sessions") {
        assert.match(transport.sessionId ?? "", /^[0-9a-f-]{36}$/);
        assert.deepEqual(fake.sessionIds(), [transport.sessionId]);
      } else {
        assert.equal(transport.sessionId, undefined);
        assert.deepEqual(fake.sessionIds(), []);
      }
      const initialize = fake.requests().find((r) => r.messages.some((m) => m.method === "initialize"));
      assert.equal(initialize.messages[0].id, 0, "the client's first JSON-RPC id");

      const { tools } = await client.listTools();
      const byName = Object.fromEntries(tools.map((t) => [t.name, t]));
      assert.deepEqual(Object.keys(byName).sort(), TOOLS);
      assert.equal(byName.read_ticket.annotations?.readOnlyHint, true);
      assert.equal(byName.charge.annotations?.idempotentHint, false);
      assert.equal(byName.create_ticket.annotations, undefined, "create_ticket says nothing about itself");
      assert.deepEqual(byName.create_ticket.inputSchema.required, ["title"]);
    });

    test("create_ticket twice with the same arguments runs twice (the fake does not deduplicate)", async () => {
      const args = { title: `printer ${mode}`, body: "out of toner" };
      const first = await client.callTool({ name: "create_ticket", arguments: args });
      const second = await client.callTool({ name: "create_ticket", arguments: { body: args.body, title: args.title } });
      const [a, b] = [first, second].map((r) => text(r).match(/TKT-(\d+)$/)?.[1]);
      assert.ok(a && b, `ticket ids in ${text(first)} / ${text(second)}`);
      assert.equal(Number(b), Number(a) + 1, "a new ticket each time");
      assert.equal(fake.executions("create_ticket", args), 2);
      assert.equal(fake.executions("create_ticket", { title: args.title }), 0, "other arguments, other count");

      const read = await client.callTool({ name: "read_ticket", arguments: { id: `TKT-${b}` } });
      assert.equal(JSON.parse(text(read)).title, args.title);

      const calls = fake.calls().filter((c) => c.tool === "create_ticket" && canonicalJson(c.args) === canonicalJson(args));
      assert.equal(calls.length, 2);
      assert.notEqual(calls[0].id, calls[1].id, "a fresh JSON-RPC id per call");
      for (const call of calls) {
        assert.equal(call.headers["mcp-protocol-version"], PROTOCOL);
        assert.equal(call.sessionId, transport.sessionId);
        assert.equal(call.headers.authorization, undefined);
        assert.equal(call.authorized, true);
      }
    });

    test("drop-after-execute: executed once, the client waits for its timeout, then cancels", async () => {
      const args = { title: `dropped ${mode}` };
      fake.script("create_ticket", ["drop-after-execute"], args);
      const errorsBefore = errors.length;
      const started = Date.now();
      await assert.rejects(client.callTool({ name: "create_ticket", arguments: args }, undefined, { timeout: SHORT_MS }), isTimeout);
      assert.ok(Date.now() - started >= SHORT_MS - 50, "no earlier failure than the timeout");
      assert.equal(fake.executions("create_ticket", args), 1, "the effect happened");
      assert.ok(
        errors.slice(errorsBefore).some((e) => /SSE stream disconnected/.test(e.message)),
        `the broken stream was reported: ${errors.map((e) => e.message)}`,
      );
      const dropped = fake.calls().filter((c) => c.args?.title === args.title);
      assert.equal(dropped.length, 1, "the client did not re-send it");
      await until(
        () => fake.requests().some((r) => r.messages.some((m) => m.method === "notifications/cancelled" && m.params?.requestId === dropped[0].id)),
        "notifications/cancelled for the dropped call",
      );

      // The caller's own retry (what a runtime does) runs it again.
      const retry = await client.callTool({ name: "create_ticket", arguments: args });
      assert.match(text(retry), /^created ticket TKT-\d+$/);
      assert.equal(fake.executions("create_ticket", args), 2);
    });

    test("faults per arguments first, then per tool, consumed call by call", async () => {
      const one = { amount: 1 };
      fake.script("charge", ["delay:150", "error:-32000"]);
      fake.script("charge", ["error"], one);
      await assert.rejects(client.callTool({ name: "charge", arguments: one }), (e) => e instanceof McpError && e.code === ErrorCode.InternalError);
      assert.equal(fake.executions("charge", one), 0, "an error answer runs nothing");

      const started = Date.now();
      const charged = await client.callTool({ name: "charge", arguments: one });
      assert.ok(Date.now() - started >= 140, "the tool's script: delayed");
      assert.match(text(charged), /^charged 1 USD \(CH-\d+\)$/);
      assert.equal(fake.executions("charge", one), 1);

      await assert.rejects(client.callTool({ name: "charge", arguments: { amount: 2 } }), (e) => e instanceof McpError && e.code === -32000);
      assert.match(text(await client.callTool({ name: "charge", arguments: { amount: 2 } })), /^charged 2 USD/, "the script is used up");
      assert.equal(fake.executions("charge"), 2);
    });

    test("hang: never executed, never answered", async () => {
      fake.script("read_ticket", ["hang"]);
      await assert.rejects(client.callTool({ name: "read_ticket", arguments: { id: "TKT-404" } }, undefined, { timeout: SHORT_MS / 2 }), isTimeout);
      assert.equal(fake.executions("read_ticket", { id: "TKT-404" }), 0);
      assert.equal(fake.calls().filter((c) => c.args?.id === "TKT-404").length, 1, "received");
    });

    test("a tool error is a result with isError: true", async () => {
      const result = await client.callTool({ name: "fails" });
      assert.equal(result.isError, true);
      assert.equal(text(result), "the tool failed");
      assert.equal(fake.executions("fails"), 1);
    });

    test("slow_report sends notifications/progress to the caller's onprogress", async () => {
      const progress = [];
      const result = await client.callTool({ name: "slow_report", arguments: { steps: 3, ms: 10 } }, undefined, { onprogress: (p) => progress.push(p) });
      assert.equal(text(result), "report of 3 steps");
      assert.deepEqual(
        progress.map((p) => [p.progress, p.total]),
        [
          [1, 3],
          [2, 3],
          [3, 3],
        ],
      );
      const call = fake.calls().find((c) => c.tool === "slow_report");
      assert.notEqual(call.meta?.progressToken, undefined, "the client asked for progress");
    });
  });
}

describe("fake MCP server, JSON answers (enableJsonResponse)", () => {
  let fake, client;
  before(async () => {
    fake = await startFakeMcp({ json: true });
    ({ client } = await connect(fake));
  });
  after(async () => {
    await client?.close();
    await fake?.close();
  });

  test("drop-after-execute fails the call at once (a TypeError, not an McpError)", async () => {
    const args = { title: "dropped json" };
    fake.script("create_ticket", ["drop-after-execute"], args);
    const started = Date.now();
    await assert.rejects(client.callTool({ name: "create_ticket", arguments: args }, undefined, { timeout: 10_000 }), (e) => e instanceof TypeError && !(e instanceof McpError));
    assert.ok(Date.now() - started < 2_000, "long before the timeout");
    assert.equal(fake.executions("create_ticket", args), 1);
  });

  test("drop runs nothing; hang-after-execute runs once and never answers", async () => {
    fake.script("charge", ["drop", "hang-after-execute"]);
    await assert.rejects(client.callTool({ name: "charge", arguments: { amount: 3 } }), (e) => e instanceof TypeError);
    assert.equal(fake.executions("charge"), 0);
    await assert.rejects(client.callTool({ name: "charge", arguments: { amount: 3 } }, undefined, { timeout: SHORT_MS / 2 }), isTimeout);
    assert.equal(fake.executions("charge", { amount: 3 }), 1);
  });

  test("progress notifications never reach the client", async () => {
    const progress = [];
    const result = await client.callTool({ name: "slow_report", arguments: { steps: 2, ms: 0 } }, undefined, { onprogress: (p) => progress.push(p) });
    assert.equal(text(result), "report of 2 steps");
    assert.deepEqual(progress, []);
  });
});

describe("fake MCP server, sessions forgotten (a restarted upstream)", () => {
  test("the next call gets 404 and the client does not open a new session", async () => {
    const fake = await startFakeMcp();
    const { client, transport } = await connect(fake);
    try {
      await client.callTool({ name: "create_ticket", arguments: { title: "before" } });
      const old = transport.sessionId;
      await fake.resetSessions();
      await assert.rejects(client.callTool({ name: "create_ticket", arguments: { title: "after" } }), (e) => e instanceof StreamableHTTPError && e.code === 404);
      assert.equal(transport.sessionId, old);
      assert.equal(fake.executions("create_ticket", { title: "after" }), 0);
      assert.equal(fake.requests().filter((r) => r.messages.some((m) => m.method === "initialize")).length, 1, "one initialize only");
    } finally {
      await client.close();
      await fake.close();
    }
  });
});

describe("fake MCP server with a required bearer token", () => {
  const token = "upstream-secret";
  let fake;
  before(async () => {
    fake = await startFakeMcp({ requiredAuth: { token } });
  });
  after(() => fake?.close());

  test("no token, or a wrong one: 401, and nothing runs", async () => {
    for (const headers of [undefined, { Authorization: "Bearer nope" }]) {
      const client = new Client({ name: "fake-mcp-test", version: "1.0.0" });
      const transport = new StreamableHTTPClientTransport(new URL(fake.url), headers ? { requestInit: { headers } } : undefined);
      await assert.rejects(client.connect(transport), (e) => e instanceof StreamableHTTPError && e.code === 401);
      await client.close();
    }
    const refused = fake.requests();
    assert.equal(refused.length, 2);
    assert.deepEqual(
      refused.map((r) => r.status),
      [401, 401],
    );
    assert.deepEqual(fake.sessionIds(), []);
  });

  test("with the token: served; a tools/call without it in a live session: 401, not executed", async () => {
    const { client, transport } = await connect(fake, { Authorization: `Bearer ${token}` });
    try {
      const result = await client.callTool({ name: "create_ticket", arguments: { title: "authorized" } });
      assert.match(text(result), /^created ticket TKT-1$/);
      assert.equal(fake.calls().at(-1).headers.authorization, `Bearer ${token}`);

      const res = await fetch(fake.url, {
        method: "POST",
        headers: {
          "content-type": "application/json",
          accept: "application/json, text/event-stream",
          "mcp-session-id": transport.sessionId,
          "mcp-protocol-version": PROTOCOL,
        },
        body: JSON.stringify({ jsonrpc: "2.0", id: 99, method: "tools/call", params: { name: "create_ticket", arguments: { title: "sneaky" } } }),
      });
      assert.equal(res.status, 401);
      assert.match(res.headers.get("www-authenticate") ?? "", /^Bearer /);
      await res.body?.cancel();
      assert.equal(fake.executions("create_ticket", { title: "sneaky" }), 0);
      assert.deepEqual(
        fake.calls().map((c) => [c.id, c.authorized]),
        [
          [fake.calls()[0].id, true],
          [99, false],
        ],
      );
    } finally {
      await client.close();
    }
  });
});
