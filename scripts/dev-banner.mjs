// `make dev`'s last lines: once the worker under `wrangler dev` answers, the
// URLs to open and the development credentials, printed after wrangler's own
// start-up output. Gives up quietly when wrangler (PID) has exited.
//
//   node scripts/dev-banner.mjs http://127.0.0.1:8787 PID
import { readFileSync } from "node:fs";

const [url, pid] = process.argv.slice(2);
const alive = () => {
  try {
    process.kill(Number(pid), 0);
    return true;
  } catch {
    return false;
  }
};

const deadline = Date.now() + 180_000;
for (;;) {
  if (!alive() || Date.now() > deadline) process.exit(0);
  try {
    // The gateway's own docs route: 200 once the worker runs.
    if ((await fetch(`${url}/onejob/problems/not-found`)).status === 200) break;
  } catch {}
  await new Promise((r) => setTimeout(r, 250));
}

// The development credentials are dev.vars.example's; a .dev.vars whose
// TENANTS or ADMIN_KEYS differ from it has keys of its owner's.
const line = (file, name) => {
  try {
    return readFileSync(file, "utf8").split("\n").find((l) => l.startsWith(`${name}=`));
  } catch {
    return undefined;
  }
};
const same = (name) => line(".dev.vars", name) === line("dev.vars.example", name);
const tenantKey = same("TENANTS") ? "onejob-dev-key (tenant dev)" : "yours (TENANTS in .dev.vars)";
const adminKey = same("ADMIN_KEYS") ? "onejob-dev-admin-key" : "yours (ADMIN_KEYS in .dev.vars)";
console.log(`
onejob is up (README, "Try it"):
  demo page   ${url}/
  console     ${url}/admin/   admin key: ${adminKey}
  gateway     ${url}/v1/…     tenant key: ${tenantKey}
`);
