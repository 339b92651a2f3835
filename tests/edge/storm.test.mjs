// A thousand-way storm on one key, with the KV cache off so every duplicate
// is answered by the Ledger itself: while the first request runs (coalesced
// waiters) and after it finished (replays from the Ledger's SQLite).
import assert from "node:assert/strict";
import { after, before, test } from "node:test";

import { chat, newKey, startStack } from "../support/harness.mjs";

let stack;

before(async () => {
  stack = await startStack({ vars: { RESULT_CACHE: "off" } });
});

after(async () => {
  await stack?.stop();
});

test("1000 concurrent duplicates: one upstream call, 1000 identical 200s; then 1000 Ledger replays, identical too", async () => {
  const key = newKey();
  stack.llm.script(key, ["delay:1000"]);
  const started = performance.now();
  const storm = await Promise.all(Array.from({ length: 1000 }, () => stack.post(key, chat("storm"))));
  const stormMs = performance.now() - started;
  const statuses = storm.map((r) => r.res.status);
  assert.deepEqual(new Set(statuses), new Set([200]), `statuses: ${[...new Set(statuses)]}`);
  assert.equal(new Set(storm.map((r) => r.text)).size, 1);
  assert.equal(stack.llm.calls(key).length, 1);
  // Finished: every one of these is the Ledger's own replay from SQLite (bug 13).
  const replayStarted = performance.now();
  const replays = await Promise.all(Array.from({ length: 1000 }, () => stack.post(key, chat("storm"))));
  const replayMs = performance.now() - replayStarted;
  assert.ok(replays.every((r) => r.res.status === 200 && r.text === storm[0].text));
  assert.ok(replays.every((r) => r.res.headers.get("idempotent-replayed") === "true"));
  assert.ok(replays.every((r) => r.res.headers.get("x-should-retry") === "false"));
  assert.equal(stack.llm.calls(key).length, 1);
  console.log(`storm: 1000 duplicates in ${stormMs.toFixed(0)} ms (upstream 1000 ms); 1000 Ledger replays in ${replayMs.toFixed(0)} ms`);
});
