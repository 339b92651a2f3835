// `make deploy-check [CONFIG=path/to/wrangler.toml] [WRANGLER_ENV=name]`: would this
// deployment ship something it must not? Offline: it runs
// `wrangler deploy --dry-run --outdir` (which bundles the worker and prints
// the bindings it would upload, without an account) and reads the same
// configuration through wrangler's own reader, then refuses
//
//   - a credential-named variable in [vars] (*KEY*, *SECRET*, TOKEN*,
//     TENANTS, *PASSW*, *CREDENTIAL*, OTEL_EXPORTER_OTLP_*HEADERS: a
//     collector's API key): vars ship in plain text, in the
//     dashboard too; credentials are `wrangler secret put` secrets;
//   - a demo switch: DEMO_TOKEN_ISSUER=on (mints dev-tenant tokens for
//     anyone), UPSTREAM=demo or a PROVIDERS entry of kind demo (the built-in
//     demo provider), the demo inbox (demo:inbox), a testing knob
//     (QUEUE_SEND_FAULTS, QUEUE_SEND_DELAY_MS, EFFECT_HANG_AFTER); and no UPSTREAM nor PROVIDERS
//     at all (every request would answer 500 gateway-misconfigured);
//   - the worker built with fault injection (`make build-edge-test`, the
//     cargo feature `faults`: its wasm reads those knobs) instead of the
//     production build (`make package`, `make build-edge-deploy`);
//   - a placeholder: a REPLACE_WITH_… value, a KV id that is not 32 hex
//     digits, a D1 id that is not a UUID or is one of the development's
//     00000000-0000-… ids;
//   - static assets holding the demo page (a file that calls /demo/*), or the
//     console (a file that calls /onejob/v1/admin) while ADMIN_KEYS is not in
//     secrets.required, and a configuration whose secrets.required lacks
//     TENANTS (without it every request is a 401);
//   - a job type of the worker that would be off: one of its settings (as
//     job-types.json beside the worker lists them, in the core's words:
//     every build writes it) is not in this configuration: a variable in
//     neither [vars] nor secrets.required, a secret not in
//     secrets.required, a D1 database not bound. The worker would run
//     without that type (its runs answer 503 job-type-not-configured);
//     every other route works. Types of a JOB_TYPES var are checked when
//     the worker starts, not here.
//
// Prints what would ship and one line per problem; exits 1 if there is one.
// Usage: node scripts/deploy-check.mjs [CONFIG] [--env NAME]
import { spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, readdirSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";

import { unstable_readConfig } from "wrangler";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const args = process.argv.slice(2);
const envAt = args.indexOf("--env");
const env = envAt >= 0 ? args.splice(envAt, 2)[1] : undefined;
const configPath = path.resolve(args[0] ?? "wrangler.toml");

/** A variable whose name says it holds a credential. */
const CREDENTIAL_NAME = /KEY|SECRET|PASSW|CREDENTIAL|^TOKEN|^TENANTS$|^OTEL_EXPORTER_OTLP_(TRACES_)?HEADERS$/i;
const PLACEHOLDER = "REPLACE_WITH";
/** The testing knobs (crates/edge/src/env/faults.rs), read only by the worker built with `faults`. */
const FAULT_KNOBS = ["QUEUE_SEND_FAULTS", "QUEUE_SEND_DELAY_MS", "EFFECT_HANG_AFTER"];
const KV_ID = /^[0-9a-f]{32}$/;
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
/** wrangler.toml's local D1 ids (00000000-0000-4000-8000-00000000000N). */
const DEVELOPMENT_UUID = /^00000000-0000-/;

const problems = [];
const fail = (text) => problems.push(text);

console.log(`deploy-check: ${path.relative(process.cwd(), configPath) || configPath}${env ? ` (env ${env})` : ""}`);

// 1. wrangler's own dry run: the bundle builds and these are the bindings.
const outdir = mkdtempSync(path.join(tmpdir(), "onejob-deploy-check-"));
const dry = spawnSync(
  path.join(root, "node_modules/.bin/wrangler"),
  ["deploy", "--dry-run", "--outdir", outdir, "--config", configPath, ...(env ? ["--env", env] : [])],
  { encoding: "utf8", env: { ...process.env, WRANGLER_SEND_METRICS: "false", CLOUDFLARE_CF_FETCH_ENABLED: "false", FORCE_COLOR: "0", NO_COLOR: "1" } },
);
// Without colour codes, whatever the terminal (the output is matched below).
const dryOutput = `${dry.stdout}${dry.stderr}`.replace(/\x1b\[[0-9;]*m/g, "");
let shippedVars = null;
if (dry.status !== 0) {
  // wrangler's own words, without its banner and log-file lines.
  const said = dryOutput.split("\n").filter((l) => l.trim() && !/^(⛅️ wrangler|─+$|🪵)/.test(l.trim()));
  fail(`wrangler deploy --dry-run failed (exit ${dry.status}):\n${said.slice(-15).map((l) => `    ${l}`).join("\n")}`);
} else {
  const written = readdirSync(outdir);
  if (!written.includes("index.js") || !written.some((f) => f.endsWith(".wasm"))) {
    fail(`wrangler deploy --dry-run bundled no worker (index.js and its wasm): ${written.join(", ")}`);
  }
  // Only the build with fault injection holds the knobs' names.
  for (const wasm of written.filter((f) => f.endsWith(".wasm"))) {
    const bytes = readFileSync(path.join(outdir, wasm), "latin1");
    const knobs = FAULT_KNOBS.filter((knob) => bytes.includes(knob));
    if (knobs.length) fail(`the worker is the build with fault injection (it reads ${knobs.join(", ")}): deploy the production build (make package)`);
  }
  // "env.NAME ("value…")   Environment Variable": what the upload would carry.
  shippedVars = [...dryOutput.matchAll(/^env\.([A-Za-z0-9_]+) \(.*\)\s+Environment Variable\s*$/gm)].map((m) => m[1]);
}
rmSync(outdir, { recursive: true, force: true });

// 2. The same configuration, as wrangler resolves it (an [env.NAME] applied).
let config;
try {
  config = unstable_readConfig({ config: configPath, env }, { hideWarnings: true });
} catch (error) {
  fail(`wrangler cannot read the configuration: ${error.message}`);
}

if (config) {
  const vars = config.vars ?? {};
  const names = Object.keys(vars);
  const required = config.secrets?.required ?? [];
  // A var's value as text ("" when unset); a TOML table var is JSON.
  const text = (name) => (vars[name] === undefined ? "" : typeof vars[name] === "string" ? vars[name] : JSON.stringify(vars[name])).trim();
  console.log(`  vars that would ship: ${names.join(", ") || "none"}`);
  console.log(`  secrets required: ${required.join(", ") || "none"}`);
  if (shippedVars && shippedVars.sort().join() !== [...names].sort().join()) {
    fail(`wrangler's dry run ships vars ${shippedVars.join(", ") || "none"}, not the ${names.join(", ") || "none"} read here`);
  }

  for (const name of names.filter((n) => CREDENTIAL_NAME.test(n))) {
    fail(`credential in [vars]: ${name} would ship in plain text (set it with \`wrangler secret put ${name}\`)`);
  }

  if (text("DEMO_TOKEN_ISSUER") === "on") fail("demo switch: DEMO_TOKEN_ISSUER=on (/demo/token mints dev-tenant tokens for anyone)");
  if (text("UPSTREAM") === "demo") fail("demo switch: UPSTREAM=demo (the built-in demo provider answers every call)");
  if (names.includes("PROVIDERS")) {
    let list;
    try {
      list = JSON.parse(text("PROVIDERS"));
    } catch {
      fail("PROVIDERS is not JSON (the gateway would answer 500 gateway-misconfigured)");
    }
    if (Array.isArray(list) && list.some((p) => p?.kind === "demo")) fail("demo switch: PROVIDERS has a provider of kind demo");
  }
  const upstreamSet = ["UPSTREAM", "PROVIDERS"].some((n) => text(n) !== "" || required.includes(n));
  if (!upstreamSet) fail("no UPSTREAM nor PROVIDERS: every request would answer 500 gateway-misconfigured");
  for (const name of names.filter((n) => text(n).includes("demo:inbox"))) fail(`demo switch: ${name} points at the demo inbox (demo:inbox)`);
  for (const knob of FAULT_KNOBS) {
    if (names.includes(knob) && !["", "0"].includes(text(knob))) fail(`testing knob in [vars]: ${knob}`);
  }
  if (!required.includes("TENANTS")) fail("TENANTS is not in secrets.required: a deployment without it answers every request 401");

  // The worker's job types, and what each needs (job-types.json, written
  // beside every build of the worker by the core: make build-edge*, make package).
  const manifestPath = config.main ? path.join(path.dirname(config.main), "job-types.json") : null;
  let jobTypes = null;
  try {
    jobTypes = JSON.parse(readFileSync(manifestPath, "utf8"));
  } catch (error) {
    fail(`cannot tell the worker's job types: ${manifestPath ? path.relative(process.cwd(), manifestPath) : "job-types.json"} ${error.code === "ENOENT" ? "is missing" : "is unreadable"} (every build of the worker writes it beside index.js: make package)`);
  }
  if (jobTypes) {
    // JOB_TYPES adds types, or replaces these by name: those are the worker's to check when it starts.
    let fromVar = [];
    if (text("JOB_TYPES") !== "") {
      try {
        fromVar = Object.keys(JSON.parse(text("JOB_TYPES")));
      } catch {}
    }
    const names = Object.keys(jobTypes).filter((name) => !fromVar.includes(name));
    const d1 = (config.d1_databases ?? []).map((d) => d.binding);
    const has = ({ kind, name }) =>
      kind === "variable" ? text(name) !== "" || required.includes(name)
      : kind === "secret" ? required.includes(name) || text(name) !== ""
      : kind === "d1" ? d1.includes(name)
      : false;
    const described = ({ kind, name }) => (kind === "d1" ? `the D1 database ${name}` : `the ${kind} ${name}`);
    const list = (items) => (items.length > 1 ? `${items.slice(0, -1).join(", ")} and ${items.at(-1)}` : items.join(""));
    console.log(`  job types: ${names.map((name) => `${name} (needs ${list(jobTypes[name].needs.map(described)) || "nothing"})`).join(", ") || "none"}`);
    if (fromVar.length) console.log(`  JOB_TYPES: ${fromVar.join(", ")} (checked when the worker starts)`);
    for (const name of names) {
      const lacking = jobTypes[name].needs.filter((need) => !has(need));
      if (lacking.length) {
        fail(`job type ${name} would be off (its runs answer 503 job-type-not-configured): it needs ${list(lacking.map(described))}, which this configuration does not set`);
      }
    }
  }

  for (const name of names.filter((n) => text(n).includes(PLACEHOLDER))) fail(`placeholder in [vars]: ${name} = ${text(name)}`);
  for (const { binding, id } of config.kv_namespaces ?? []) {
    if (!KV_ID.test(id ?? "")) fail(`placeholder id: KV namespace ${binding} has id "${id}" (a namespace id is 32 hex digits: wrangler kv namespace create)`);
  }
  for (const { binding, database_id: id } of config.d1_databases ?? []) {
    if (!UUID.test(id ?? "") || DEVELOPMENT_UUID.test(id)) fail(`placeholder id: D1 database ${binding} has id "${id}" (wrangler d1 create prints its UUID)`);
  }
  for (const { queue } of [...(config.queues?.producers ?? []), ...(config.queues?.consumers ?? [])]) {
    if (String(queue).includes(PLACEHOLDER)) fail(`placeholder queue name: ${queue}`);
  }

  const directory = config.assets?.directory;
  if (directory) {
    const dir = path.resolve(path.dirname(configPath), directory);
    const files = readdirSync(dir, { recursive: true, withFileTypes: true })
      .filter((entry) => entry.isFile())
      .map((entry) => path.join(entry.parentPath, entry.name));
    const calling = (route) => files.filter((file) => readFileSync(file, "latin1").includes(route)).map((file) => path.relative(dir, file));
    console.log(`  assets: ${path.relative(process.cwd(), dir) || dir} (${files.length} files)`);
    const demo = calling("/demo/");
    if (demo.length) fail(`the demo page ships in the assets: ${demo.join(", ")} call /demo/*`);
    const consoleFiles = calling("/onejob/v1/admin");
    if (consoleFiles.length && !required.includes("ADMIN_KEYS")) {
      fail(`the console ships in the assets (${consoleFiles.join(", ")}) but ADMIN_KEYS is not in secrets.required`);
    }
  } else {
    console.log("  assets: none");
  }
}

for (const problem of problems) console.log(`  FAIL ${problem}`);
console.log(problems.length ? `deploy-check: ${problems.length} problem(s): not safe to deploy` : "deploy-check: safe to deploy");
process.exitCode = problems.length ? 1 : 0;
