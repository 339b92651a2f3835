// The package's declarations as a TypeScript user compiles them: the packed
// `onejob` package installed into a fresh app, checked by the workspace's
// pinned tsc with `--strict` and no `skipLibCheck`, under each `lib` a
// project may have: a browser app (DOM, no @types/node), a Node-only server
// (ES2022 and @types/node, no DOM: no `RequestInfo`) and
// both at once (a full-stack app). A correct use compiles in each; a wrong
// one is refused in each.
import assert from "node:assert/strict";
import { mkdirSync, symlinkSync, writeFileSync } from "node:fs";
import path from "node:path";
import { after, before, describe, test } from "node:test";
import { fileURLToPath } from "node:url";

import { bin, makeApp, run } from "../support/pages.mjs";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");

/** The lib settings a project may have. */
const SETUPS = {
  "browser (DOM, no @types/node)": { lib: ["es2022", "dom"], types: [] },
  "Node-only (ES2022 + @types/node, no DOM)": { lib: ["es2022"], types: ["node"] },
  "full stack (DOM + @types/node)": { lib: ["es2022", "dom"], types: ["node"] },
};

/** Uses every exported type; nothing here may need DOM's own names. */
const GOOD = `import { OneJob, fingerprint, ready, type OneJobEvent, type IntentRecord, type OneJobError, type ResumedIntent } from "onejob";
import { OneJob as Inline, fingerprint as inlineFingerprint } from "onejob/inline";
const seen: string[] = [];
const oj = new OneJob({ endpoint: "https://gw.test", token: "t", storage: "memory", retry: { maxAttempts: 3, baseMs: 100 },
  onEvent: (e: OneJobEvent) => { if (e.type === "backoff") seen.push(e.reason + e.delayMs.toFixed()); } });
const response: Promise<Response> = oj.fetch("/v1/chat/completions", { method: "POST", body: "{}" }, { intent: "triage:1" });
const byUrl: Promise<Response> = oj.fetch(new URL("https://gw.test/v1/x"));
const byRequest: Promise<Response> = oj.fetch(new Request("https://gw.test/v1/x", { method: "POST", body: "{}" }));
// Usable wherever the platform's own fetch is (new OpenAI({ fetch }), …).
const f: typeof fetch = oj.fetcher();
const g: (input: string | URL | Request, init?: RequestInit) => Promise<Response> = oj.fetcher();
const records: IntentRecord[] = oj.intents();
const resumed: Promise<string[]> = oj.resume().then((all: ResumedIntent[]) => all.map((r) => r.key + r.response.status));
void [response, byUrl, byRequest, f, g, records, resumed, oj.forget("triage:1") satisfies boolean];
const id: string = fingerprint("POST", "https://gw.test/v1/chat/completions", "{}");
const patient = new OneJob({ retry: { offlineWaitMs: 30_000 }, onEvent: (e) => {
  if (e.type === "online") seen.push(e.waitedMs.toFixed());
  if (e.type === "gave_up") seen.push(e.reason, String(e.status));
} });
const inlined: typeof OneJob = Inline;
const loaded: Promise<void> = ready;
const where: "local" | "memory" = oj.storage;
const failed = (error: unknown) => (error as OneJobError).name === "OneJobNetworkError";
void [id, patient, inlined, inlineFingerprint, loaded, where, failed];
`;

let app;

before(() => {
  ({ dir: app } = makeApp());
  // The workspace's pinned @types/node, as a Node project installs it.
  mkdirSync(path.join(app, "node_modules/@types"), { recursive: true });
  symlinkSync(path.join(root, "node_modules/@types/node"), path.join(app, "node_modules/@types/node"), "dir");
  symlinkSync(path.join(root, "node_modules/undici-types"), path.join(app, "node_modules/undici-types"), "dir");
  writeFileSync(path.join(app, "good.ts"), GOOD);
  writeFileSync(path.join(app, "bad.ts"), `import { OneJob } from "onejob";\nnew OneJob({ storage: "disk" });\n`);
});

after(() => {
  if (app) run("rm", ["-rf", app], root);
});

/** `tsc --strict -p` of `file` under `setup`; returns tsc's output. */
function check(name, setup, file) {
  const config = path.join(app, `tsconfig.${name}.json`);
  const compilerOptions = { strict: true, noEmit: true, module: "nodenext", moduleResolution: "nodenext", target: "es2022", skipLibCheck: false, ...setup };
  writeFileSync(config, JSON.stringify({ compilerOptions, files: [file] }));
  return run(bin("tsc"), ["--strict", "-p", config], app);
}

describe("the package's types, under each lib setting", () => {
  for (const [label, setup] of Object.entries(SETUPS)) {
    const name = label.split(" ")[0].toLowerCase();
    test(`${label}: a correct use compiles, a wrong one is refused`, () => {
      try {
        check(name, setup, "good.ts");
      } catch (error) {
        assert.fail(`tsc refused good.ts:\n${error.stdout}${error.stderr}`);
      }
      assert.throws(() => check(name, setup, "bad.ts"), (error) => /disk/.test(error.stdout + error.stderr));
    });
  }
});
