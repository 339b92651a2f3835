// Deploying onejob: the worker bundle `make package` writes
// (scripts/package.sh), the production template in it (deploy/wrangler.toml)
// and `make deploy-check` (scripts/deploy-check.mjs: `wrangler deploy
// --dry-run`, offline), which must refuse a credential, a demo switch, a
// placeholder id or an unguarded console. Also the development side: what
// `wrangler.toml` would ship, and `make dev`'s .dev.vars. Needs the worker's
// two builds and the client (`make build-edge build-edge-test build-client`).
import assert from "node:assert/strict";
import { execFile, spawnSync } from "node:child_process";
import { randomBytes, randomUUID } from "node:crypto";
import { copyFileSync, cpSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { after, before, describe, test } from "node:test";
import { fileURLToPath } from "node:url";

import { unstable_readConfig } from "wrangler";

import { DEV_KEY, sha256, startFakeLlm, startWorker } from "../support/harness.mjs";
import { EDGE_BUILD, EDGE_DEPLOY_BUILD, EDGE_TEST_BUILD, FAULT_KNOBS } from "../support/worker.mjs";

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");
const VERSION = readFileSync(path.join(ROOT, "Cargo.toml"), "utf8").match(/^version = "([^"]+)"/m)[1];

let dist;
let bundle;
let template;

before(() => {
  dist = mkdtempSync(path.join(tmpdir(), "onejob-deploy-"));
  const packaged = spawnSync("bash", ["scripts/package.sh", dist], { cwd: ROOT, encoding: "utf8" });
  assert.equal(packaged.status, 0, packaged.stdout + packaged.stderr);
  bundle = path.join(dist, `onejob-worker-${VERSION}`);
  template = readFileSync(path.join(bundle, "wrangler.toml"), "utf8");
});

after(() => {
  if (dist) rmSync(dist, { recursive: true, force: true });
});

/** `node scripts/deploy-check.mjs config ...args`: its exit status, its lines, and its FAIL lines. */
async function deployCheck(config, ...args) {
  const result = await new Promise((resolve) =>
    execFile("node", ["scripts/deploy-check.mjs", config, ...args], { cwd: ROOT, encoding: "utf8" }, (error, stdout, stderr) =>
      resolve({ status: error ? error.code : 0, stdout, stderr }),
    ),
  );
  const lines = `${result.stdout}${result.stderr}`.trim().split("\n");
  const failures = lines.filter((l) => l.startsWith("  FAIL ")).map((l) => l.slice("  FAIL ".length));
  return { status: result.status, lines, failures, output: lines.join("\n") };
}

/** The template with every REPLACE_WITH_… filled in as an operator would. */
function filled(text = template) {
  return text.replace(/"REPLACE_WITH_([A-Z_]+)"/g, (_, what) => {
    if (what.endsWith("_DATABASE_ID")) return `"${randomUUID()}"`;
    if (what.endsWith("_NAMESPACE_ID")) return `"${randomBytes(16).toString("hex")}"`;
    throw new Error(`a placeholder this test does not know: ${what}`);
  });
}

/** Writes `text` as a configuration beside the bundle's worker; its path. */
function config(text) {
  const file = path.join(bundle, `wrangler.${randomUUID()}.toml`);
  writeFileSync(file, text);
  return file;
}

/** `text` with `lines` added to its [vars] (the template's last table). */
const withVars = (text, lines) => `${text.trimEnd()}\n${lines.join("\n")}\n`;

describe("make package: the worker bundle", () => {
  test("holds the built worker, the production template and the console, and nothing of the demo", () => {
    const files = readdirSync(bundle, { recursive: true }).sort();
    const views = ["costs", "dead-letters", "job-actions", "job", "jobs", "not-found", "providers", "savings"].map((view) => `console/admin/views/${view}.js`);
    const modules = ["admin", "answers", "api", "dom", "format"].map((module) => `console/admin/${module}.js`);
    assert.deepEqual(files, [
      "console", "console/_headers", "console/admin", "console/admin/admin.css", ...modules, "console/admin/index.html",
      "console/admin/router.js", "console/admin/session.js", "console/admin/table.js", "console/admin/views", ...views,
      "console/states.js", "console/theme.css", "index.js", "index_bg.wasm", "job-types.json", "wrangler.toml",
    ]);
    assert.equal(template, readFileSync(path.join(ROOT, "deploy/wrangler.toml"), "utf8"));
    // The deployment's build (make build-edge-deploy), not the one make dev and the tests run.
    for (const file of ["index_bg.wasm", "job-types.json"]) {
      assert.ok(readFileSync(path.join(bundle, file)).equals(readFileSync(path.join(ROOT, EDGE_DEPLOY_BUILD, file))), file);
    }
  });

  test("a deployment's worker has the job types it names, none by default: not the demo's (issue 34)", () => {
    // make package without ONEJOB_JOB_TYPES: no job type, so nothing for a deployment to set.
    assert.deepEqual(JSON.parse(readFileSync(path.join(bundle, "job-types.json"), "utf8")), {});
    // The builds make dev and the tests run have the demo's (jobs/), with what they need.
    assert.deepEqual(JSON.parse(readFileSync(path.join(ROOT, EDGE_BUILD, "job-types.json"), "utf8")), {
      triage: { needs: [{ kind: "d1", name: "TICKETS" }, { kind: "variable", name: "MAIL_URL" }, { kind: "secret", name: "MAIL_SECRET" }] },
    });
    assert.deepEqual(readFileSync(path.join(ROOT, EDGE_TEST_BUILD, "job-types.json"), "utf8"), readFileSync(path.join(ROOT, EDGE_BUILD, "job-types.json"), "utf8"));
    // The template asks for none of the demo's settings.
    assert.doesNotMatch(template.replace(/^#.*$/gm, ""), /MAIL_URL|MAIL_SECRET|TICKETS/);
    const listed = spawnSync("tar", ["-tzf", `${bundle}.tgz`], { encoding: "utf8" }).stdout.trim().split("\n");
    assert.ok(listed.includes(`onejob-worker-${VERSION}/index_bg.wasm`) && listed.includes(`onejob-worker-${VERSION}/wrangler.toml`), listed.join(", "));
  });
});

test("the production template binds what wrangler.toml binds: Durable Objects, migrations, queues, D1 and KV", () => {
  // Written twice (development and production): a class, migration or queue
  // added to one must reach the other, or a deployment would lack it. The
  // demo's job types' databases (TICKETS) are development's only: a
  // deployment binds those its own job types need.
  const demoDatabases = Object.values(JSON.parse(readFileSync(path.join(ROOT, EDGE_BUILD, "job-types.json"), "utf8")))
    .flatMap((t) => t.needs)
    .filter((need) => need.kind === "d1")
    .map((need) => need.name);
  assert.deepEqual(demoDatabases, ["TICKETS"]);
  const read = (file) => unstable_readConfig({ config: file }, { hideWarnings: true });
  const bindings = (c) => ({
    durable_objects: c.durable_objects,
    migrations: c.migrations,
    queues: c.queues,
    d1: c.d1_databases.map((d) => d.binding).filter((binding) => !demoDatabases.includes(binding)),
    kv: c.kv_namespaces.map((k) => k.binding),
    compatibility_date: c.compatibility_date,
    name: c.name,
  });
  assert.deepEqual(bindings(read(path.join(ROOT, "deploy/wrangler.toml"))), bindings(read(path.join(ROOT, "wrangler.toml"))));
});

describe("make deploy-check", () => {
  test("wrangler.toml (development) ships no credential and no demo switch; refused for its local ids, the demo page and the console", async () => {
    const { status, lines, failures } = await deployCheck("wrangler.toml");
    assert.equal(status, 1);
    assert.ok(
      lines.includes("  vars that would ship: MAX_BODY_BYTES, COALESCE_WAIT_MS, UPSTREAM_TIMEOUT_MS, UNKNOWN_LEASE_MS, MAX_ATTEMPTS, RETENTION_SECONDS, UNKNOWN_POLICY"),
      lines.join("\n"),
    );
    assert.deepEqual(failures, [
      "no UPSTREAM nor PROVIDERS: every request would answer 500 gateway-misconfigured",
      "TENANTS is not in secrets.required: a deployment without it answers every request 401",
      "job type triage would be off (its runs answer 503 job-type-not-configured): it needs the variable MAIL_URL and the secret MAIL_SECRET, which this configuration does not set",
      'placeholder id: KV namespace RESULTS has id "onejob-results-local" (a namespace id is 32 hex digits: wrangler kv namespace create)',
      'placeholder id: D1 database OPS has id "00000000-0000-4000-8000-000000000000" (wrangler d1 create prints its UUID)',
      'placeholder id: D1 database TICKETS has id "00000000-0000-4000-8000-000000000001" (wrangler d1 create prints its UUID)',
      "the demo page ships in the assets: app.js, inbox.html call /demo/*",
      "the console ships in the assets (admin/admin.js, admin/api.js, admin/index.html) but ADMIN_KEYS is not in secrets.required",
    ]);
  });

  test("the production template as packaged is refused until each placeholder is filled in", async () => {
    const { status, failures } = await deployCheck(path.join(bundle, "wrangler.toml"));
    assert.equal(status, 1);
    assert.deepEqual(failures, [
      'placeholder id: KV namespace RESULTS has id "REPLACE_WITH_RESULTS_NAMESPACE_ID" (a namespace id is 32 hex digits: wrangler kv namespace create)',
      'placeholder id: D1 database OPS has id "REPLACE_WITH_OPS_DATABASE_ID" (wrangler d1 create prints its UUID)',
    ]);
  });

  test("the production template with its ids filled in is safe to deploy", async () => {
    const { status, lines, failures, output } = await deployCheck(config(filled()));
    assert.deepEqual(failures, []);
    assert.equal(status, 0, output);
    assert.deepEqual(lines.slice(1), [
      "  vars that would ship: UPSTREAM",
      "  secrets required: TENANTS, UPSTREAM_API_KEY",
      "  job types: none",
      "  assets: none",
      "deploy-check: safe to deploy",
    ]);
  });

  test("a credential in [vars] is refused, each by name (the values wrangler.toml used to ship)", async () => {
    // An operator who writes the secrets into [vars] instead of requiring
    // them (wrangler itself refuses a name that is both).
    const credentials = [
      `TENANTS = '{"${sha256(DEV_KEY)}":"dev"}'`,
      `ADMIN_KEYS = '{"${sha256("onejob-dev-admin-key")}":{"name":"dev-admin","tenant":"*"}}'`,
      `TOKEN_SECRETS = '{"dev":"onejob-dev-token-secret-not-for-production"}'`,
      `MAIL_SECRET = "onejob-dev-mail-secret"`,
      `UPSTREAM_API_KEY = "sk-live-0123456789"`,
      `PROVIDER_KEY_AZURE = "azure-key"`,
      `TOKEN = "t"`,
    ];
    const base = filled().replace(/^required = \[.*\]$/m, "required = []");
    const { status, failures } = await deployCheck(config(withVars(base, credentials)));
    assert.equal(status, 1);
    assert.deepEqual(failures, [
      ...["TENANTS", "ADMIN_KEYS", "TOKEN_SECRETS", "MAIL_SECRET", "UPSTREAM_API_KEY", "PROVIDER_KEY_AZURE", "TOKEN"].map(
        (name) => `credential in [vars]: ${name} would ship in plain text (set it with \`wrangler secret put ${name}\`)`,
      ),
      "TENANTS is not in secrets.required: a deployment without it answers every request 401",
    ]);
  });

  // Each a wrangler dry run of a few seconds: every switch in one
  // configuration (each check adds its own line), and no UPSTREAM in another.
  test("a demo switch is refused, each by what it turns on", async () => {
    const base = filled();
    const text = withVars(base.replace(/^UPSTREAM = .*$/m, 'UPSTREAM = "demo"'), [
      'MAIL_URL = "demo:inbox"',
      'DEMO_TOKEN_ISSUER = "on"',
      `PROVIDERS = '[{"name":"d","kind":"demo"}]'`,
      'QUEUE_SEND_FAULTS = "3"',
      'EFFECT_HANG_AFTER = "email"',
    ]);
    assert.match(text, /^UPSTREAM = "demo"$/m);
    assert.match(text, /^MAIL_URL = "demo:inbox"$/m);
    const { status, failures } = await deployCheck(config(text));
    assert.equal(status, 1);
    assert.deepEqual(failures, [
      "demo switch: DEMO_TOKEN_ISSUER=on (/demo/token mints dev-tenant tokens for anyone)",
      "demo switch: UPSTREAM=demo (the built-in demo provider answers every call)",
      "demo switch: PROVIDERS has a provider of kind demo",
      "demo switch: MAIL_URL points at the demo inbox (demo:inbox)",
      "testing knob in [vars]: QUEUE_SEND_FAULTS",
      "testing knob in [vars]: EFFECT_HANG_AFTER",
    ]);
  });

  test("the worker built with fault injection (make build-edge-test) is refused: only the production build ships", async () => {
    const faulty = path.join(ROOT, EDGE_TEST_BUILD, "index.js");
    const text = filled().replace(/^main = .*$/m, `main = ${JSON.stringify(faulty)}`);
    assert.match(text, /build-test/);
    const { status, failures } = await deployCheck(config(text));
    assert.equal(status, 1);
    assert.deepEqual(failures, [
      `the worker is the build with fault injection (it reads ${FAULT_KNOBS.join(", ")}): deploy the production build (make package)`,
      // The test build has the demo's job types, which the template does not set up.
      "job type triage would be off (its runs answer 503 job-type-not-configured): it needs the D1 database TICKETS, the variable MAIL_URL and the secret MAIL_SECRET, which this configuration does not set",
    ]);
  });

  test("no UPSTREAM (nor PROVIDERS) is refused: every request would be a 500", async () => {
    const base = filled();
    const text = base.replace(/^UPSTREAM = .*\n/m, "");
    assert.notEqual(text, base);
    const { status, failures } = await deployCheck(config(text));
    assert.equal(status, 1);
    assert.deepEqual(failures, ["no UPSTREAM nor PROVIDERS: every request would answer 500 gateway-misconfigured"]);
  });

  test("the console ships only with ADMIN_KEYS among the required secrets", async () => {
    const assets = (text) => text.replace(/^# (\[assets\]|directory = "console"|binding = "ASSETS"|run_worker_first = \[.*\])$/gm, "$1");
    const served = assets(filled());
    assert.match(served, /^\[assets\]\ndirectory = "console"$/m);
    const without = await deployCheck(config(served));
    assert.equal(without.status, 1);
    assert.deepEqual(without.failures, ["the console ships in the assets (admin/admin.js, admin/api.js, admin/index.html) but ADMIN_KEYS is not in secrets.required"]);
    const guarded = await deployCheck(config(served.replace('required = ["TENANTS", ', 'required = ["TENANTS", "ADMIN_KEYS", ')));
    assert.deepEqual(guarded.failures, []);
    assert.equal(guarded.status, 0, guarded.output);
    assert.ok(guarded.lines.includes("  secrets required: TENANTS, ADMIN_KEYS, UPSTREAM_API_KEY"), guarded.output);
  });

  test("a job type of the worker lacking a setting is reported by name (issue 34), and the configuration that sets them is safe", async () => {
    // The worker with the demo's triage type (the build make dev runs):
    // job-types.json beside it says what the type needs.
    const demoWorker = path.join(ROOT, EDGE_BUILD, "index.js");
    const base = filled().replace(/^main = .*$/m, `main = ${JSON.stringify(demoWorker)}`);
    const lacking = await deployCheck(config(base));
    assert.equal(lacking.status, 1);
    assert.deepEqual(lacking.failures, [
      "job type triage would be off (its runs answer 503 job-type-not-configured): it needs the D1 database TICKETS, the variable MAIL_URL and the secret MAIL_SECRET, which this configuration does not set",
    ]);
    assert.ok(lacking.lines.includes("  job types: triage (needs the D1 database TICKETS, the variable MAIL_URL and the secret MAIL_SECRET)"), lacking.output);
    // One setting still missing: named alone.
    const withUrl = withVars(base, ['MAIL_URL = "https://mail.example.com/v1/send"']);
    const tickets = `\n[[d1_databases]]\nbinding = "TICKETS"\ndatabase_name = "onejob-tickets"\ndatabase_id = "${randomUUID()}"\n`;
    const withDatabase = withUrl.replace(/^\[vars\]$/m, `${tickets}\n[vars]`);
    assert.notEqual(withDatabase, withUrl);
    const secretMissing = await deployCheck(config(withDatabase));
    assert.deepEqual(secretMissing.failures, [
      "job type triage would be off (its runs answer 503 job-type-not-configured): it needs the secret MAIL_SECRET, which this configuration does not set",
    ]);
    // All three: safe. A variable may also come as a required secret.
    const set = await deployCheck(config(withDatabase.replace('required = ["TENANTS", ', 'required = ["TENANTS", "MAIL_SECRET", ')));
    assert.deepEqual(set.failures, []);
    assert.equal(set.status, 0, set.output);
    const urlAsSecret = withDatabase.replace(/^MAIL_URL = .*\n/m, "").replace('required = ["TENANTS", ', 'required = ["TENANTS", "MAIL_SECRET", "MAIL_URL", ');
    assert.deepEqual((await deployCheck(config(urlAsSecret))).failures, []);
    // A JOB_TYPES var that replaces the type by name: the worker checks its own when it starts.
    const replaced = withVars(base, [`JOB_TYPES = '${JSON.stringify({ triage: {} })}'`]);
    const byVar = await deployCheck(config(replaced));
    assert.deepEqual(byVar.failures, []);
    assert.ok(byVar.lines.includes("  JOB_TYPES: triage (checked when the worker starts)"), byVar.output);
  });

  test("a worker without job-types.json beside it is refused: its job types cannot be told", async () => {
    const dir = mkdtempSync(path.join(bundle, "no-manifest-"));
    for (const file of ["index.js", "index_bg.wasm"]) copyFileSync(path.join(bundle, file), path.join(dir, file));
    const text = filled().replace(/^main = .*$/m, `main = ${JSON.stringify(path.join(dir, "index.js"))}`);
    const { status, failures } = await deployCheck(config(text));
    assert.equal(status, 1);
    assert.equal(failures.length, 1, failures.join("\n"));
    assert.match(failures[0], /^cannot tell the worker's job types: .*job-types\.json is missing/);
  });

  test("an [env.NAME] is checked as wrangler resolves it (vars are not inherited)", async () => {
    // Wrangler inherits neither vars nor bindings into an environment.
    const staging = `${filled()}\n[env.staging.vars]\nUPSTREAM = "demo"\nMAIL_URL = "demo:inbox"\n`;
    const file = config(staging);
    assert.equal((await deployCheck(file, "--env", "")).status, 0, "the top level is still safe");
    const { status, failures } = await deployCheck(file, "--env", "staging");
    assert.equal(status, 1);
    assert.deepEqual(failures, [
      "demo switch: UPSTREAM=demo (the built-in demo provider answers every call)",
      "demo switch: MAIL_URL points at the demo inbox (demo:inbox)",
      "TENANTS is not in secrets.required: a deployment without it answers every request 401",
    ]);
  });
});

test("the packaged worker runs as deployed: the API with its secrets, no demo page, inbox, console or demo token", async () => {
  // The secrets come from a file, as `wrangler deploy --secrets-file` takes
  // them (startWorker's own TENANTS var, the dev tenant and tenant-b, is laid
  // over the file's). A .dev.vars beside it, with another provider key, is
  // not read: a given --env-file replaces it, which is how the test harness
  // keeps a developer's .dev.vars out of every test worker.
  const dir = mkdtempSync(path.join(tmpdir(), "onejob-deployed-"));
  for (const file of ["index.js", "index_bg.wasm", "wrangler.toml"]) copyFileSync(path.join(bundle, file), path.join(dir, file));
  writeFileSync(path.join(dir, ".dev.vars"), "UPSTREAM_API_KEY=sk-from-dev-vars\n");
  const secrets = path.join(dir, "secrets.env");
  writeFileSync(secrets, `TENANTS='{"${sha256(DEV_KEY)}":"dev"}'\nUPSTREAM_API_KEY=sk-upstream-test\n`);
  const llm = await startFakeLlm();
  let worker;
  try {
    worker = await startWorker({
      cwd: dir,
      config: "wrangler.toml",
      persistTo: path.join(dir, ".state"),
      envFile: secrets,
      vars: { UPSTREAM: llm.baseUrl },
    });
    const res = await fetch(`${worker.url}/v1/chat/completions`, {
      method: "POST",
      headers: { Authorization: `Bearer ${DEV_KEY}`, "Content-Type": "application/json", "Idempotency-Key": randomUUID() },
      body: JSON.stringify({ model: "demo", messages: [{ role: "user", content: "deployed" }] }),
    });
    assert.equal(res.status, 200, await res.clone().text());
    assert.deepEqual(llm.allCalls().map((c) => c.headers.authorization), ["Bearer sk-upstream-test"], "the provider, with the file's key");
    // No job type: the demo's is not part of a deployment (issue 34).
    const run = await fetch(`${worker.url}/onejob/v1/run/triage`, {
      method: "POST",
      headers: { Authorization: `Bearer ${DEV_KEY}`, "Content-Type": "application/json", "Idempotency-Key": randomUUID() },
      body: JSON.stringify({ ticket_id: "T-1", text: "hi", customer_email: "a@example.com" }),
    });
    assert.equal(run.status, 404, await run.clone().text());
    assert.equal((await run.json()).type, "/onejob/problems/unknown-job-type");
    for (const route of ["/", "/index.html", "/inbox.html", "/admin/", "/admin/admin.js", "/theme.css", "/demo/token?user=a", "/demo/inbox", "/demo/tickets"]) {
      const answer = await fetch(`${worker.url}${route}`);
      const body = await answer.text();
      assert.equal(answer.status, 404, `${route}: ${body}`);
      assert.equal(JSON.parse(body).type, "/onejob/problems/not-found", route);
    }
  } finally {
    await worker?.stop();
    await llm.close();
    rmSync(dir, { recursive: true, force: true });
  }
});

test("the packaged console, once served, carries the console's headers: its pages, /theme.css and /states.js with nosniff", async () => {
  // The template's [assets] turned on, with ADMIN_KEYS, as README's Deploy says.
  const dir = mkdtempSync(path.join(tmpdir(), "onejob-console-"));
  for (const file of ["index.js", "index_bg.wasm"]) copyFileSync(path.join(bundle, file), path.join(dir, file));
  cpSync(path.join(bundle, "console"), path.join(dir, "console"), { recursive: true });
  const served = template
    .replace(/^# (\[assets\]|directory = "console"|binding = "ASSETS"|run_worker_first = \[.*\])$/gm, "$1")
    .replace('required = ["TENANTS", ', 'required = ["TENANTS", "ADMIN_KEYS", ');
  writeFileSync(path.join(dir, "wrangler.toml"), served);
  const secrets = path.join(dir, "secrets.env");
  writeFileSync(secrets, `TENANTS='{"${sha256(DEV_KEY)}":"dev"}'\nUPSTREAM_API_KEY=sk-upstream-test\nADMIN_KEYS='{"${sha256("console-admin-key")}":{"name":"ops","tenant":"*"}}'\n`);
  let worker;
  try {
    worker = await startWorker({ cwd: dir, config: "wrangler.toml", persistTo: path.join(dir, ".state"), envFile: secrets, vars: { UPSTREAM: "https://api.example.com/v1" } });
    for (const route of ["/admin/", "/admin/admin.js", "/admin/router.js", "/admin/views/job.js", "/admin/admin.css", "/theme.css", "/states.js"]) {
      const res = await fetch(`${worker.url}${route}`);
      await res.arrayBuffer();
      assert.equal(res.status, 200, route);
      assert.equal(res.headers.get("x-content-type-options"), "nosniff", route);
      if (route.startsWith("/admin/")) assert.match(res.headers.get("content-security-policy") ?? "", /default-src 'none'/, route);
    }
    assert.equal((await fetch(`${worker.url}/_headers`)).status, 404, "the file itself is not served");
  } finally {
    await worker?.stop();
    rmSync(dir, { recursive: true, force: true });
  }
});

test("make dev's .dev.vars: written from dev.vars.example in a fresh clone, then the developer's own", () => {
  const clone = mkdtempSync(path.join(tmpdir(), "onejob-clone-"));
  try {
    for (const file of ["Makefile", "dev.vars.example"]) copyFileSync(path.join(ROOT, file), path.join(clone, file));
    const make = () => spawnSync("make", ["-s", "dev-vars"], { cwd: clone, encoding: "utf8" });
    const first = make();
    assert.equal(first.status, 0, first.stderr);
    assert.equal(first.stdout, "onejob: wrote .dev.vars from dev.vars.example, with KEYLESS=window (yours to edit; git ignores it)\n");
    // The template, and make dev's keyless requests (the tests' stacks keep the default, refuse).
    const written = readFileSync(path.join(clone, ".dev.vars"), "utf8");
    const template = readFileSync(path.join(clone, "dev.vars.example"), "utf8");
    assert.ok(written.startsWith(template), "the template comes first, as it is");
    assert.match(written.slice(template.length), /^\n# make dev: [^\n]*\nKEYLESS=window\n$/);
    assert.doesNotMatch(template, /^KEYLESS=/m, "the tests' stacks read the template: keyless stays off there");
    // A developer's edit is kept; a key the template has and .dev.vars lacks is named.
    const edited = readFileSync(path.join(clone, ".dev.vars"), "utf8").replace(/^MAIL_SECRET=.*\n/m, "").replace("UPSTREAM=demo", "UPSTREAM=https://api.example/v1");
    writeFileSync(path.join(clone, ".dev.vars"), edited);
    const again = make();
    assert.equal(again.status, 0, again.stderr);
    assert.equal(again.stdout, "onejob: .dev.vars lacks MAIL_SECRET (see dev.vars.example)\n");
    assert.equal(readFileSync(path.join(clone, ".dev.vars"), "utf8"), edited);
  } finally {
    rmSync(clone, { recursive: true, force: true });
  }
  // And git never takes a .dev.vars (nor a .env) from the checkout.
  const ignored = spawnSync("git", ["check-ignore", ".dev.vars", ".env", "dist/onejob-0.1.0.tgz"], { cwd: ROOT, encoding: "utf8" });
  assert.deepEqual(ignored.stdout.trim().split("\n"), [".dev.vars", ".env", "dist/onejob-0.1.0.tgz"]);
});
