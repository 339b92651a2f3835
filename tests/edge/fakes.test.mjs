// The fakes the worker calls keep an idle keep-alive connection open (see
// tests/support/keep-alive.mjs): with Node's 5-s default, a request workerd
// wrote on a pooled connection as it closed was lost, and the gateway rightly
// recorded an unknown outcome and a second attempt (outbox.test.mjs, test 1,
// about one run in two under load, each time after a pause of 6.0 s in the
// drain). Node's own client shows the closing deterministically: with the
// default, its pooled socket is gone after about 6 s idle.
import assert from "node:assert/strict";
import http from "node:http";
import { after, before, describe, test } from "node:test";

import { startFakeLlm } from "../support/fake-llm.mjs";
import { startFakeMail } from "../support/fake-mail.mjs";
import { sleep } from "../support/harness.mjs";

/** Past the idle time after which Node closes a connection by default (5 s, about 6 in practice). */
const IDLE_MS = 7_000;

/** POSTs `body` to `url` through `agent`; the socket it went on. */
function post(agent, url, body) {
  return new Promise((resolve, reject) => {
    const req = http.request(url, { method: "POST", agent, headers: { "Content-Type": "application/json" } }, (res) => {
      res.resume();
      res.on("end", () => resolve({ status: res.statusCode, socket: req.socket }));
    });
    req.on("error", reject);
    req.end(body);
  });
}

describe("the fakes keep idle connections open", () => {
  let llm, mail;
  before(async () => {
    [llm, mail] = await Promise.all([startFakeLlm(), startFakeMail()]);
  });
  after(async () => {
    await llm?.close();
    await mail?.close();
  });

  test(`a fake LLM's and a fake mail API's connection idle for ${IDLE_MS} ms takes the next request`, { timeout: 30_000 }, async () => {
    const chat = JSON.stringify({ model: "gpt-test", messages: [{ role: "user", content: "idle" }] });
    const targets = [`${llm.baseUrl}/chat/completions`, `${mail.url}/send`];
    const agents = targets.map(() => new http.Agent({ keepAlive: true, maxSockets: 1 }));
    try {
      const first = await Promise.all(targets.map((url, i) => post(agents[i], url, chat)));
      await sleep(IDLE_MS);
      for (const [i, { socket }] of first.entries()) {
        assert.equal(socket.destroyed, false, `${targets[i]}: the server kept the idle connection`);
      }
      const second = await Promise.all(targets.map((url, i) => post(agents[i], url, chat)));
      for (const [i, { socket }] of second.entries()) assert.equal(socket, first[i].socket, `${targets[i]}: the same connection`);
    } finally {
      for (const agent of agents) agent.destroy();
    }
  });
});
