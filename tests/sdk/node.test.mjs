// The SDK scenarios (scenarios.mjs) in Node, against the built package's
// Node entry, as a user's server imports it. One test per scenario; the
// browser-only ones run in chrome.test.mjs.
import { beforeEach, test } from "node:test";

import * as sdk from "../../crates/client/pkg/node.js";
import { scenarios } from "./scenarios.mjs";
import { runScenario, script, useSdk } from "./stub.mjs";

useSdk(sdk);
await (sdk.ready ?? Promise.resolve());

beforeEach(() => script([]));

for (const scenario of scenarios.filter((s) => !s.browserOnly)) {
  test(scenario.name, { timeout: 30_000 }, async (t) => {
    for (const line of await runScenario(scenario)) t.diagnostic(line);
  });
}
