// The support-ticket triage demo: every "Classify" is an intent sent through
// the onejob SDK; the timeline merges the SDK's events with the gateway's
// audit trail of the job (GET /onejob/v1/jobs/{key}).
import { OneJob, ready } from "/sdk/index.js";
import { isAtRest } from "/states.js";

// A short-lived user token for this browser's demo user, from the demo's
// token issuer (`make dev` only; a real app's backend mints it, see README
// "User tokens"). Neither the tenant key nor the provider's key ever
// reaches the browser. The user id is kept, so a reload resumes its jobs.
const DEMO_USER = localStorage.getItem("onejob-demo-user") ?? `demo-${crypto.randomUUID().slice(0, 8)}`;
localStorage.setItem("onejob-demo-user", DEMO_USER);
const TOKEN = (await (await fetch(`/demo/token?user=${encodeURIComponent(DEMO_USER)}`)).json()).token;

const $ = (id) => document.getElementById(id);

// "Go offline 3 s" takes this page offline the way a browser reports it:
// `navigator.onLine` reads false and `offline` fires on window; 3 s later
// the browser's own value is back and `online` fires. The SDK then does
// what it does when a browser really goes offline: it waits for `online`
// (its `offline` and `online` events) instead of spending attempts. Failing
// fetches instead would show the opposite: attempts spent on a network the
// page says is gone.
let simulatedOffline = null; // the timer that ends the simulation, while it runs
const networkFetch = globalThis.fetch.bind(globalThis);
// While simulated offline, nothing this page asks for reaches the network,
// as when the browser really is offline: the same flag as navigator.onLine.
globalThis.fetch = (...args) =>
  simulatedOffline ? Promise.reject(new TypeError("Failed to fetch (offline)")) : networkFetch(...args);

function goOffline(ms) {
  clearTimeout(simulatedOffline);
  // An own property shadows Navigator.prototype's getter; deleting it
  // restores the browser's value.
  Object.defineProperty(navigator, "onLine", { configurable: true, get: () => false });
  simulatedOffline = setTimeout(() => {
    simulatedOffline = null;
    delete navigator.onLine;
    // Still offline for real: the browser fires `online` itself later.
    if (navigator.onLine) dispatchEvent(new Event("online"));
  }, ms);
  dispatchEvent(new Event("offline"));
}

const oj = new OneJob({
  endpoint: location.origin,
  token: TOKEN,
  retry: { maxAttempts: 10, baseMs: 500, capMs: 4000 },
  onEvent,
});

// What the page shows: the job of the key last seen. `answered`: its
// request has had its answer (a 404 for its job then means there is none);
// `settledLine`: the timeline's "delivered" entry, relabelled for a stream.
let shown = { key: null, t0: 0, results: [], serverAttempts: 0, polling: false, answered: false, settledLine: null };

function reset(key) {
  shown = { key, t0: performance.now(), results: [], serverAttempts: 0, polling: false, answered: false, settledLine: null };
  $("timeline").replaceChildren();
  $("key").textContent = key;
  $("calls").textContent = "0";
  $("shown").textContent = "—";
  $("shown").dataset.count = "0";
  // The whole card is about this request: the previous answer goes with
  // the previous key (it stayed beside the new key while this one ran).
  const box = $("result");
  box.className = "result empty";
  box.textContent = "Waiting for the answer to this request…";
  delete box.dataset.tokens;
  setState("pending");
}

function onEvent(event) {
  if (event.type !== "warning" && event.key && event.key !== shown.key) reset(event.key);
  const text = {
    attempt: () => `request ${event.attempt} sent with the intent's key`,
    backoff: () => `waiting ${(event.delayMs / 1000).toFixed(2)} s: ${event.reason}`,
    replayed: () => `gateway replayed the stored result (status ${event.status}) — no new model call`,
    // A streamed answer is not delivered yet: readStream relabels this entry
    // and says how the stream ended.
    settled: () => `delivered (status ${event.status})`,
    gave_up: () => `stopped retrying: ${event.reason}; the key is kept for resume()`,
    offline: () => "the browser is offline: waiting for the network (no attempt spent)",
    online: () => `back online after ${(event.waitedMs / 1000).toFixed(1)} s: sending with the same key`,
    warning: () => event.message,
  }[event.type];
  const line = addLine(event.type, text ? text() : event.type, event.type === "backoff" ? { delay: event.delayMs, serverAsked: event.serverAsked } : {});
  if (event.type === "settled") {
    shown.answered = true;
    shown.settledLine = line;
  }
  if (event.type === "attempt") pollJob(event.key);
}

function addLine(kind, text, data = {}) {
  const li = document.createElement("li");
  li.className = "event";
  li.dataset.kind = kind;
  for (const [k, v] of Object.entries(data)) li.dataset[k] = String(v);
  const t = document.createElement("span");
  t.className = "t";
  t.textContent = `+${Math.round(performance.now() - shown.t0)} ms`;
  const k = document.createElement("span");
  k.className = `kind ${kind}`;
  k.textContent = kind.replace("_", " ");
  const d = document.createElement("span");
  d.textContent = text;
  li.append(t, k, d);
  $("timeline").append(li);
  return li;
}

function setState(state) {
  $("state").textContent = state.replace("_", " ");
  $("state").className = `badge ${state}`;
  $("state").dataset.state = state;
}

// The gateway's view of the job: state, and one audit record per upstream call.
async function pollJob(key) {
  if (shown.polling) return;
  // This poll belongs to the request shown now: after every await it checks
  // that the page still shows it (a new request replaces `shown`), so an
  // earlier job's state never lands beside a newer key.
  const mine = shown;
  mine.polling = true;
  const current = () => shown === mine && key === shown.key;
  try {
    // The attempt event fires as the request leaves; give the gateway a
    // moment to create the job before asking for it.
    await new Promise((r) => setTimeout(r, 150));
    for (;;) {
      // Offline, the poll fails and is asked again (a failed poll is not an attempt).
      const res = await fetch(`/onejob/v1/jobs/${encodeURIComponent(key)}`, { headers: { Authorization: `Bearer ${TOKEN}` } }).catch(() => null);
      if (!current()) return;
      // A 4xx will not change by asking again: a 404 once the request was
      // answered means no job was made under this key (a 409 already-run
      // triage makes none); before the answer the job may still be starting.
      if (res && res.status >= 400 && res.status < 500 && (res.status !== 404 || shown.answered)) {
        const problem = await res.json().catch(() => null);
        if (!current()) return;
        const why = res.status === 404 ? "the gateway has no job under this key" : (problem?.title ?? "the gateway refused to show it");
        addLine("poll-stopped", `stopped following the job: HTTP ${res.status}, ${why}`, { status: res.status });
        setState(res.status === 404 ? "no_job" : "unknown");
        return;
      }
      if (res?.ok) {
        const job = await res.json();
        if (!current()) return;
        setState(job.state);
        $("calls").textContent = String(job.attempts.length);
        $("calls").dataset.count = String(job.attempts.length);
        showServerAttempts(job);
        // At rest (finished, or unknown: no new attempt before its lease ends), its last call reported.
        if (isAtRest(job.state) && job.attempts.every((a) => a.outcome !== "running")) return;
      }
      await new Promise((r) => setTimeout(r, 400));
    }
  } finally {
    mine.polling = false;
  }
}

function showServerAttempts(job) {
  for (const attempt of job.attempts.slice(shown.serverAttempts)) {
    if (attempt.outcome === "running") return;
    const previous = job.attempts[attempt.number - 2];
    if (previous?.ended_ms) {
      const waited = attempt.started_ms - previous.ended_ms;
      addLine("server-wait", `gateway waited ${(waited / 1000).toFixed(2)} s before upstream call ${attempt.number} (call ${previous.number} got ${previous.status ?? previous.error_class})`, { waited });
    }
    const where = attempt.model ? `${attempt.provider} (${attempt.model})` : attempt.provider;
    if (attempt.outcome === "lost_race" && !attempt.ended_ms) {
      addLine("server", `upstream call ${attempt.number} to ${where}: lost the race to a faster provider (its answer, if it comes, is audited and never used)`);
      shown.serverAttempts = attempt.number;
      continue;
    }
    const status = attempt.status ? `HTTP ${attempt.status}` : (attempt.error_class ?? "no answer").replaceAll("_", " ");
    const tokens = attempt.usage ? `, ${attempt.usage.total_tokens} tokens` : "";
    addLine("server", `upstream call ${attempt.number} to ${where}: ${attempt.outcome.replaceAll("_", " ")} (${status}) in ${attempt.latency_ms} ms${tokens}`);
    shown.serverAttempts = attempt.number;
  }
}

function showResult(key, status, text) {
  if (key && key !== shown.key) reset(key);
  shown.results.push(text);
  const identical = new Set(shown.results).size === 1;
  $("shown").textContent = `${shown.results.length} × ${identical ? "identical" : "DIFFERENT"}`;
  $("shown").dataset.count = String(shown.results.length);
  $("shown").dataset.identical = String(identical);
  const box = $("result");
  if (status === 200) {
    const content = JSON.parse(text).choices?.[0]?.message?.content ?? "";
    // demo-json answers a JSON object (its route's contract); the others "name: value" lines.
    let json = null;
    try {
      json = JSON.parse(content);
    } catch {}
    const field = (name) => (json && typeof json === "object" ? String(json[name] ?? "") : (content.match(new RegExp(`^${name}: (.*)$`, "m"))?.[1] ?? ""));
    box.className = "result";
    box.innerHTML = "";
    const category = Object.assign(document.createElement("span"), { className: "category", textContent: field("category").replace("_", " ") });
    const priority = Object.assign(document.createElement("span"), { className: `priority ${field("priority")}`, textContent: `${field("priority")} priority` });
    const summary = Object.assign(document.createElement("div"), { className: "summary", textContent: field("summary") });
    box.append(category, priority, summary);
  } else {
    let detail = text;
    try {
      const problem = JSON.parse(text);
      detail = `${problem.title ?? problem.error?.message ?? "Error"} — ${problem.detail ?? ""}`;
    } catch {}
    box.className = "result error";
    box.textContent = `HTTP ${status}: ${detail}`;
  }
  pollJob(key);
}

// A streamed answer, shown as it is written; resolves to the same JSON a
// non-streamed call returns, so the rest of the page handles both alike.
async function readStream(res) {
  // The SDK says "settled" when the answer begins; a stream is delivered
  // only once read to its end, so its entry says what it is until then.
  if (shown.settledLine) shown.settledLine.lastChild.textContent = `stream opened (status ${res.status}): the answer is being written`;
  const box = $("result");
  box.className = "result streaming";
  box.textContent = "";
  const reader = res.body.getReader();
  const decoder = new TextDecoder();
  let pending = "";
  let content = "";
  let chunks = 0;
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      pending += decoder.decode(value, { stream: true });
      const events = pending.split("\n\n");
      pending = events.pop();
      for (const event of events) {
        const data = event.split("\n").filter((l) => l.startsWith("data: ")).map((l) => l.slice(6)).join("\n");
        if (!data || data === "[DONE]") continue;
        const chunk = JSON.parse(data);
        if (chunk.error) throw Object.assign(new Error(chunk.error.message), { name: "StreamError" });
        content += chunk.choices?.[0]?.delta?.content ?? "";
        chunks += 1;
        box.textContent = content;
        box.dataset.tokens = String(chunks);
      }
    }
  } catch (error) {
    addLine("stream-failed", `the stream failed after ${chunks} chunk${chunks === 1 ? "" : "s"} (${error.name}: ${error.message}); the part written so far stays in the Result card`);
    throw Object.assign(error, { streamFailed: true });
  }
  addLine("stream-end", `delivered: the stream ended after ${chunks} chunk${chunks === 1 ? "" : "s"}`);
  return JSON.stringify({ choices: [{ message: { role: "assistant", content } }] });
}

/**
 * An error in the Result card. A stream that failed part-way keeps what it
 * had written, with the error under it: both are what the user got.
 */
function showError(text) {
  const box = $("result");
  const partial = box.classList.contains("streaming") ? box.textContent : "";
  if (!partial) {
    box.className = "result error";
    box.textContent = text;
    return;
  }
  box.className = "result streaming failed";
  const kept = Object.assign(document.createElement("div"), { className: "partial", textContent: partial });
  const error = Object.assign(document.createElement("div"), { className: "stream-error", textContent: text });
  box.replaceChildren(kept, error);
}

async function classify() {
  const streamed = $("stream").checked;
  const model = $("model").value;
  const body = JSON.stringify({
    model,
    ...(streamed ? { stream: true, stream_options: { include_usage: true } } : {}),
    // demo-json's route holds answers to a JSON contract: ask for JSON, as
    // an app would (its prose-only primary then fails over to the backup).
    ...(model === "demo-json" ? { response_format: { type: "json_object" } } : {}),
    messages: [
      { role: "system", content: "Classify the support ticket: category, priority, one-line summary." },
      { role: "user", content: $("ticket").value },
    ],
  });
  try {
    const res = await oj.fetch("/v1/chat/completions", { method: "POST", headers: { "Content-Type": "application/json" }, body });
    const isStream = res.ok && (res.headers.get("Content-Type") ?? "").startsWith("text/event-stream");
    if (res.headers.get("Idempotency-Key") === shown.key) shown.answered = true;
    const text = isStream ? await readStream(res) : await res.text();
    showResult(res.headers.get("Idempotency-Key"), res.status, text);
  } catch (error) {
    // readStream has put a failed stream on the timeline already.
    if (!error.streamFailed) addLine("error", `${error.name}: ${error.message}`);
    showError(`${error.name}: ${error.message}`);
  }
}

/** Writes the Result card if it still shows `key` (a newer request has taken it over otherwise). */
function showInResult(key, className, text) {
  if (!key || key !== shown.key) return;
  $("result").className = className;
  $("result").textContent = text;
}

// The `triage` job type: the page names the type and sends the ticket; the
// server renders the prompt, checks the answer against the type's contract,
// writes the row and sends the mail, each once (see jobs/triage.json).
async function runTriage() {
  const input = { ticket_id: $("ticket-id").value, text: $("ticket").value, customer_email: $("customer-email").value };
  const box = $("run-result");
  box.className = "result";
  box.textContent = "Running…";
  try {
    const res = await oj.fetch("/onejob/v1/run/triage", {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify(input),
    });
    const body = await res.json();
    // This request's key: the Result card is about it (see showInResult).
    const key = res.headers.get("Idempotency-Key") ?? shown.key;
    // A refusal is a final answer without the SDK's "settled": mark it here.
    if (key === shown.key) shown.answered = true;
    if (res.status === 409 && body.job_key) {
      // Triaged already (once per ticket): show that job instead.
      showInResult(key, "result error", `HTTP 409: ticket ${input.ticket_id} was triaged already by job ${body.job_key}; this request made no job`);
      await followRun(body.job_key, `ticket ${input.ticket_id} was triaged already; nothing was done again`);
      return;
    }
    if (!res.ok) {
      box.className = "result error";
      box.textContent = `HTTP ${res.status}: ${body.detail ?? body.title}${body.job_key ? ` (job ${body.job_key})` : ""}`;
      showInResult(key, box.className, box.textContent);
      return;
    }
    showRun(body, res.headers.get("Idempotent-Replayed") === "true");
    if (body.state === "running") setTimeout(() => followRun(body.key, undefined, body.output), 1000);
  } catch (error) {
    box.className = "result error";
    box.textContent = `${error.name}: ${error.message}`;
  }
}

function showRun(run, replayed, note) {
  const box = $("run-result");
  box.className = "result";
  box.dataset.state = run.state;
  const output = run.output ? `${run.output.category} · ${run.output.priority} — ` : "";
  box.textContent = `${output}${run.state}${replayed ? " (replayed: nothing was done again)" : ""}${note ? ` (${note})` : ""}`;
  showInResult(run.key, "result", `Triage & notify: ${box.textContent}. Its effects are in the card below.`);
  $("run-effects").replaceChildren(
    ...run.effects.map((effect) => {
      const tr = document.createElement("tr");
      tr.dataset.effect = effect.name;
      const receipt = effect.receipt ? JSON.stringify(effect.receipt).slice(0, 80) : "—";
      for (const [text, mono] of [[effect.name], [effect.state + (effect.reconciled ? " (reconciled)" : "")], [String(effect.attempts.length)], [receipt, true]]) {
        const td = document.createElement("td");
        td.textContent = text;
        if (mono) td.className = "mono";
        tr.append(td);
      }
      return tr;
    }),
  );
}

/** Follows a run's effects; `output` is its answer when known (the job view does not carry it). */
async function followRun(key, note, output = null) {
  const res = await fetch(`/onejob/v1/jobs/${encodeURIComponent(key)}`, { headers: { Authorization: `Bearer ${TOKEN}` } }).catch(() => null);
  // Offline (or the network failed): ask again in a second.
  if (!res) return void setTimeout(() => followRun(key, note, output), 1000);
  if (!res.ok) return;
  const job = await res.json();
  showRun({ key, state: job.effects_state ?? "running", output, effects: job.effects ?? [] }, false, note);
  if ((job.effects_state ?? "running") === "running") setTimeout(() => followRun(key, note, output), 1000);
}

$("run-triage").addEventListener("click", runTriage);
$("run-new").addEventListener("click", () => {
  $("ticket-id").value = `T-${Math.floor(1000 + Math.random() * 9000)}`;
});
$("classify").addEventListener("click", classify);
$("burst").addEventListener("click", () => {
  for (let i = 0; i < 20; i++) $("classify").click();
});
$("reload").addEventListener("click", () => {
  $("model").value = "demo-slow";
  $("classify").click();
  setTimeout(() => location.reload(), 1200);
});
$("offline").addEventListener("click", () => {
  goOffline(3000);
  $("classify").click();
});

function setNet(online) {
  $("net").textContent = online ? "online" : "offline";
  $("net").className = `pill ${online ? "ok" : "bad"}`;
}
addEventListener("online", () => setNet(navigator.onLine));
addEventListener("offline", () => setNet(navigator.onLine));
setNet(navigator.onLine);
$("storage").textContent = `intents kept in ${oj.storage === "local" ? "localStorage" : "memory"}`;

// After a reload: finish what was in flight, with the original keys (the
// stored intents are read by the SDK's wasm, loaded since the import).
await ready;
const unfinished = oj.intents().filter((i) => i.state !== "delivered");
if (unfinished.length > 0) {
  reset(unfinished[0].key);
  addLine("resumed", `page reloaded: resuming ${unfinished.length} unfinished intent(s) with their original key`);
  for (const { key, response } of await oj.resume()) {
    addLine("resumed", `resumed intent finished (status ${response.status})`);
    const isStream = response.ok && (response.headers.get("Content-Type") ?? "").startsWith("text/event-stream");
    showResult(key, response.status, isStream ? await readStream(response) : await response.text());
  }
}
document.body.dataset.ready = "true";
