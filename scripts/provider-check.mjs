// `make provider-check`: which providers of each route are safe fallbacks.
//
// Sends sample requests to every provider of every route that has an output
// contract (or of ROUTE=<model>), through the gateway's
// POST /onejob/v1/providers/check, and prints, per provider, each sample's
// status, latency and contract verdict. A provider is a safe fallback when
// every sample is answered with a 2xx that meets the contract.
//
//   make provider-check                          # this checkout's wrangler.toml (+ .dev.vars), run locally
//   ROUTE=gpt-4o-mini SAMPLES=samples.json make provider-check
//   ONEJOB_URL=https://gw.example ONEJOB_ADMIN_KEY=… make provider-check   # a deployed gateway (an admin key for "*")
//
// SAMPLES is a JSON file holding a list of request bodies (their `model` is
// replaced by each provider's). Checks are real, paid calls.
import { randomUUID } from "node:crypto";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";

import { sha256, startWorker } from "../tests/support/worker.mjs";

const DEFAULT_SAMPLES = {
  "/v1/chat/completions": [
    {
      messages: [
        { role: "system", content: "Triage the ticket. Answer a JSON object with keys category and priority." },
        { role: "user", content: "I was charged twice for my subscription, please refund asap." },
      ],
      response_format: { type: "json_object" },
    },
  ],
  "/v1/messages": [
    {
      max_tokens: 200,
      system: "Triage the ticket. Answer only a JSON object with keys category and priority.",
      messages: [{ role: "user", content: "I was charged twice for my subscription, please refund asap." }],
    },
  ],
};

let worker;
let persistTo;
let url = process.env.ONEJOB_URL;
let key = process.env.ONEJOB_ADMIN_KEY;
if (!url) {
  // A local run gets an admin key of its own, for this run only.
  key = `provider-check-${randomUUID()}`;
  persistTo = mkdtempSync(path.join(tmpdir(), "onejob-provider-check-"));
  // envFile null: this checkout's own .dev.vars (its providers and keys), as `make dev` runs it.
  worker = await startWorker({ persistTo, envFile: null, vars: { ADMIN_KEYS: JSON.stringify({ [sha256(key)]: { name: "provider-check", tenant: "*" } }) } });
  url = worker.url;
}
try {
  const headers = { authorization: `Bearer ${key}`, "content-type": "application/json" };
  const page = await fetch(`${url}/onejob/v1/providers`, { headers });
  if (!page.ok) throw new Error(`GET /onejob/v1/providers: ${page.status} ${await page.text()}`);
  const { providers, routes } = await page.json();
  const kinds = Object.fromEntries(providers.map((p) => [p.name, p.kind]));
  const wanted = process.env.ROUTE
    ? routes.filter((r) => r.model === process.env.ROUTE)
    : routes.filter((r) => r.contract && r.model !== "*");
  if (wanted.length === 0) {
    console.log(process.env.ROUTE ? `no route ${process.env.ROUTE}` : "no route has an output contract; name one with ROUTE=<model>");
  }
  for (const route of wanted) {
    const anthropic = route.providers.every((p) => kinds[p.provider] === "anthropic");
    const apiPath = anthropic ? "/v1/messages" : "/v1/chat/completions";
    const samples = process.env.SAMPLES ? JSON.parse(readFileSync(process.env.SAMPLES, "utf8")) : DEFAULT_SAMPLES[apiPath];
    const res = await fetch(`${url}/onejob/v1/providers/check`, {
      method: "POST",
      headers,
      body: JSON.stringify({ model: route.model, samples, path: apiPath }),
    });
    const text = await res.text();
    if (!res.ok) {
      console.log(`route ${route.model}: ${res.status} ${text}`);
      continue;
    }
    const report = JSON.parse(text);
    console.log(`\nroute ${route.model} (${report.contract ? "with" : "without"} an output contract), ${samples.length} sample(s):`);
    for (const provider of report.providers) {
      const verdict = provider.safe ? "SAFE fallback" : "NOT a safe fallback";
      console.log(`  ${provider.name.padEnd(20)} model ${String(provider.model).padEnd(16)} ${verdict}`);
      for (const r of provider.results) {
        console.log(`    sample ${r.sample}: status ${r.status ?? "-"}, ${r.latency_ms} ms, contract ${r.contract}`);
      }
    }
  }
} finally {
  await worker?.stop();
  if (persistTo) rmSync(persistTo, { recursive: true, force: true });
}
