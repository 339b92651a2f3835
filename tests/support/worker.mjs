// Starts the built worker under `wrangler dev` (workerd, with real Durable
// Objects and KV) on free ports, and stops it. Build first: `make build-edge`
// (the production build, which wrangler.toml names), and `make
// build-edge-test` for a test that injects faults (`faults: true`).
import { spawn } from "node:child_process";
import { createHash } from "node:crypto";
import { existsSync } from "node:fs";
import net from "node:net";
import path from "node:path";
import { fileURLToPath } from "node:url";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");

export const DEV_KEY = "onejob-dev-key";
export const TENANT_B_KEY = "tenant-b-test-key";
/** The development admin (dev.vars.example ADMIN_KEYS): "dev-admin", every tenant. */
export const DEV_ADMIN_KEY = "onejob-dev-admin-key";

/**
 * The development credentials and demo switches every test worker starts
 * with: the committed template that `make dev` copies to .dev.vars. Passed
 * as `--env-file`, so wrangler reads neither a developer's own .dev.vars nor
 * a .env (a clean clone and this machine run the same tests).
 */
export const DEV_VARS_TEMPLATE = path.join(root, "dev.vars.example");

/**
 * The worker's builds, relative to a checkout. `make build-edge`: the
 * production build with the demo's job types (jobs/; wrangler.toml's
 * `main`: what `make dev` and the tests run), with no fault injection.
 * `make build-edge-test`: the same worker with the cargo feature `faults`
 * (crates/edge/src/env/faults.rs), whose knobs (QUEUE_SEND_FAULTS,
 * EFFECT_HANG_AFTER) only it reads. `make build-edge-deploy`: the
 * production build with the deployment's job types (ONEJOB_JOB_TYPES,
 * default none): what `make package` packs and a deployment runs. Each has
 * job-types.json beside it: what its job types need of a deployment.
 */
export const EDGE_BUILD = "crates/edge/build";
export const EDGE_TEST_BUILD = "crates/edge/build-test";
export const EDGE_DEPLOY_BUILD = "crates/edge/build-deploy";
/** The variables only the fault-injection build reads. */
export const FAULT_KNOBS = ["QUEUE_SEND_FAULTS", "QUEUE_SEND_DELAY_MS", "EFFECT_HANG_AFTER"];

export const sha256 = (text) => createHash("sha256").update(text).digest("hex");

/**
 * The ADMIN_KEYS var: the development admin plus `extra` admins
 * ({ key: { name, tenant } }, by their plain key). A var given to startStack
 * replaces dev.vars.example's, so the dev admin is kept here.
 */
export const adminKeysVar = (extra = {}) =>
  JSON.stringify({
    [sha256(DEV_ADMIN_KEY)]: { name: "dev-admin", tenant: "*" },
    ...Object.fromEntries(Object.entries(extra).map(([key, admin]) => [sha256(key), admin])),
  });

export async function freePort() {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.unref();
    server.on("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address();
      server.close(() => resolve(port));
    });
  });
}

/**
 * Starts `wrangler dev` with `vars` overriding `envFile` (default
 * DEV_VARS_TEMPLATE; `null`: wrangler's own look-up, the checkout's
 * .dev.vars as under `make dev`), which overrides wrangler.toml; state
 * persisted in `persistTo`. Resolves once the worker answers.
 * `faults: true` runs the fault-injection build (EDGE_TEST_BUILD) in place
 * of wrangler.toml's `main` (the production build); not with `config`.
 * `ONEJOB_CHECKOUT` runs another checkout's built worker instead (to show a
 * test failing on it).
 */
export async function startWorker(options) {
  // A port found free can be taken before wrangler binds it (workerd's own
  // sockets bind ephemeral ports too): start again on new ports, up to 3 times.
  for (let tries = 1; ; tries++) {
    try {
      return await startWorkerOnce(options);
    } catch (error) {
      if (tries >= 3 || !String(error.message).includes("Address already in use")) throw error;
    }
  }
}

async function startWorkerOnce({ vars = {}, persistTo, cwd = process.env.ONEJOB_CHECKOUT ?? root, config, logLevel, envFile = DEV_VARS_TEMPLATE, faults = false }) {
  if (faults && config) throw new Error("startWorker: faults is for the checkout's own worker, not a config of its own");
  // The production build would ignore a knob, and the test would not test it.
  const knobs = FAULT_KNOBS.filter((name) => name in vars);
  if (knobs.length && !faults) throw new Error(`startWorker: ${knobs.join(", ")} needs the fault-injection build: pass faults: true`);
  const script = faults ? path.join(EDGE_TEST_BUILD, "index.js") : null;
  if (script && !existsSync(path.join(cwd, script))) {
    throw new Error(`startWorker: ${path.join(cwd, script)} is missing: run make build-edge-test (the worker with fault injection)`);
  }
  const port = await freePort();
  const inspectorPort = await freePort();
  const tenants = { [sha256(DEV_KEY)]: "dev", [sha256(TENANT_B_KEY)]: "tenant-b" };
  const allVars = { TENANTS: JSON.stringify(tenants), ...vars };
  const args = [
    "dev",
    // The entry point instead of wrangler.toml's `main`, the rest of it kept.
    ...(script ? [script] : []),
    "--ip", "127.0.0.1",
    "--port", String(port),
    "--inspector-port", String(inspectorPort),
    "--persist-to", persistTo,
    "--log-level", logLevel ?? "warn",
    "--show-interactive-dev-session=false",
  ];
  if (config) args.push("--config", config);
  if (envFile) args.push("--env-file", envFile);
  for (const [name, value] of Object.entries(allVars)) args.push("--var", `${name}:${value}`);
  const wrangler = path.join(root, "node_modules/.bin/wrangler");
  const child = spawn(wrangler, args, {
    cwd,
    env: { ...process.env, WRANGLER_SEND_METRICS: "false", CLOUDFLARE_CF_FETCH_ENABLED: "false", CI: "true" },
    stdio: ["ignore", "pipe", "pipe"],
    detached: true,
  });
  let output = "";
  child.stdout.on("data", (d) => (output += d));
  child.stderr.on("data", (d) => (output += d));
  const url = `http://127.0.0.1:${port}`;
  const deadline = Date.now() + 60_000;
  for (;;) {
    if (child.exitCode !== null) throw new Error(`wrangler dev exited early:\n${output}`);
    try {
      // The gateway answers its docs route; any other worker answers something.
      const res = await fetch(`${url}/onejob/problems/not-found`);
      if (config ? res.status > 0 : res.status === 200) break;
    } catch {}
    if (Date.now() > deadline) {
      stopProcess(child);
      throw new Error(`wrangler dev did not become ready:\n${output}`);
    }
    await new Promise((r) => setTimeout(r, 200));
  }
  return {
    url,
    /** wrangler's process id: also the id of the process group its workerd runs in. */
    pid: child.pid,
    output: () => output,
    /** kill -9 of the runtime (wrangler and workerd), as a crash would. */
    async kill() {
      const exited = new Promise((resolve) => (child.exitCode !== null || child.signalCode !== null ? resolve() : child.once("exit", resolve)));
      stopProcess(child);
      await exited;
    },
    async stop() {
      // Ask wrangler to shut down (it stops and reaps workerd itself); only
      // if it does not exit in time, kill the whole process group.
      // Already gone (a kill -9 before): exitCode stays null, signalCode is set.
      const exited = new Promise((resolve) => (child.exitCode !== null || child.signalCode !== null ? resolve() : child.once("exit", resolve)));
      try {
        child.kill("SIGINT");
      } catch {}
      const timeout = new Promise((resolve) => setTimeout(() => resolve("timeout"), 5000));
      if ((await Promise.race([exited, timeout])) === "timeout") {
        stopProcess(child);
        await exited;
      }
      stopProcess(child); // anything wrangler left behind in its group
    },
  };
}

function stopProcess(child) {
  try {
    process.kill(-child.pid, "SIGKILL"); // the whole group: wrangler and workerd
  } catch {}
}
