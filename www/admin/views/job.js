// 2. One job (`#job?tenant=dev&key=K[&user=U]`): what was asked, every
// attempt on a time axis, its effects, operator events, the stored result.
// The operator's actions are in job-actions.js.
import { isMoving } from "../../states.js";
import { getJob } from "../api.js";
import { $, append, el } from "../dom.js";
import { badge, fmtMs, fmtNumber, hasCause, pretty, timeCell, words } from "../format.js";
import { flashFor, isCurrent, load, render } from "../router.js";
import { labelCells } from "../table.js";
import { effectActions, jobActions } from "./job-actions.js";

/** @typedef {import("../answers.js").AdminJob} AdminJob */
/** @typedef {import("../answers.js").Attempt} Attempt */

/** Attempts whose answer was not used (a hedge's loser, a late report). */
const UNUSED = ["lost_race", "discarded"];

/** @type {import("../router.js").View} */
export async function showJob(params, id) {
  const section = $("view-job");
  const job = { tenant: params.get("tenant"), key: params.get("key"), user: params.get("user") };
  const body = $("job-body");
  // Another job than the one shown: clear the page (a refresh of the same job keeps it until the answer).
  const shown = JSON.stringify(job);
  if (body.dataset.shown !== shown) body.replaceChildren();
  body.dataset.shown = shown;
  await load(section, id, () => getJob(job), (view) => {
    const outcome = flashFor("job");
    body.replaceChildren(
      ...[outcome, jobSummary(view), jobActions(view), jobEffects(view), jobAttempts(view), jobEvents(view), jobResult(view)].filter((part) => part !== null),
    );
    // While it runs, look again in a moment (nothing to lose on this page then).
    if (isMoving(view.state) || view.attempts.some((a) => a.outcome === "running")) {
      setTimeout(() => isCurrent(id) && render(), 2000);
    }
  });
  if (isCurrent(id) && section.dataset.state === "error") body.replaceChildren();
}

/** @param {AdminJob} job */
function jobSummary(job) {
  // The model asked for when the view has it; else the models the attempts called.
  const model = job.model ?? [...new Set(job.attempts.map((a) => a.model).filter(Boolean))].join(", ");
  /** @type {[string, import("../dom.js").Child][]} */
  const facts = [
    ["Tenant", job.tenant],
    ["User", job.user ?? "—"],
    ["Key", el("span", { class: "mono" }, job.key)],
    ["State", badge(job.state)],
    ["Model", model || "—"],
    ["Mode", job.background ? `background (${fmtNumber(job.enqueued ?? 0)} queue message${job.enqueued === 1 ? "" : "s"})` : "sync"],
    ["Attempts", `${fmtNumber(job.attempts.length)} of ${fmtNumber(job.max_attempts)} allowed`],
    ["Completed by", job.completed_by ? `attempt ${job.completed_by}` : "—"],
    ["Created", timeCell(job.created_ms)],
    ["Updated", timeCell(job.updated_ms)],
    ["Lease until", timeCell(job.lease_until_ms)],
    ["Expires", timeCell(job.expires_ms)],
    ["Fingerprint", el("span", { class: "mono" }, job.fingerprint ?? "—")],
    ["Version", fmtNumber(job.version)],
  ];
  return el(
    "section",
    { class: "card", id: "job-summary" },
    el("div", { class: "card-head" }, el("h1", { class: "mono title" }, job.key), badge(job.state)),
    el("dl", { class: "facts" }, facts.map(([name, value]) => [el("dt", {}, name), el("dd", {}, value)])),
  );
}

/**
 * One row per attempt, with a bar on a shared time axis from the job's creation.
 * @param {AdminJob} job
 */
function jobAttempts(job) {
  const card = el("section", { class: "card wide", id: "job-attempts" }, el("h2", {}, "Attempts"));
  if (job.attempts.length === 0) return append(card, [el("p", { class: "muted" }, "No attempt yet.")]);
  const now = Date.now();
  // Where an attempt's bar ends: when it reported; now while it runs; and an
  // attempt that never reported (a hedge's loser left running) at the job's
  // last change.
  const stopOf = (/** @type {Attempt} */ a) => a.ended_ms ?? (a.outcome === "running" ? now : Math.max(a.started_ms, job.updated_ms ?? a.started_ms));
  const start = Math.min(job.created_ms, ...job.attempts.map((a) => a.started_ms));
  const end = Math.max(start + 1, ...job.attempts.map(stopOf));
  const pct = (/** @type {number} */ ms) => `${(((ms - start) / (end - start)) * 100).toFixed(2)}%`;
  const rows = job.attempts.map((a) => {
    const unused = UNUSED.includes(a.outcome);
    const stop = stopOf(a);
    const bar = el("div", { class: `bar ${a.outcome}`, title: `${fmtMs(a.started_ms - start)} → ${a.ended_ms ? fmtMs(a.ended_ms - start) : a.outcome === "running" ? "still running" : "no report"}` });
    bar.style.left = pct(a.started_ms);
    bar.style.width = `max(3px, calc(${pct(stop)} - ${pct(a.started_ms)}))`;
    const details = [
      a.status ? `HTTP ${a.status}` : a.ended_ms ? "no HTTP status" : a.outcome === "running" ? "running" : "no answer recorded",
      a.latency_ms !== undefined && a.latency_ms !== null ? fmtMs(a.latency_ms) : null,
      a.usage ? `${fmtNumber(a.usage.total_tokens)} tokens (${fmtNumber(a.usage.prompt_tokens)} in, ${fmtNumber(a.usage.completion_tokens)} out)` : a.ended_ms ? "no usage" : null,
      a.streamed ? `streamed${a.first_byte_ms ? `, first byte after ${fmtMs(a.first_byte_ms - a.started_ms)}` : ""}` : null,
    ].filter(Boolean);
    return el(
      "li",
      { class: `attempt${unused ? " unused" : ""}`, dataset: { outcome: a.outcome, number: String(a.number) } },
      el("span", { class: "n" }, `#${a.number}`),
      el("span", { class: "who" }, el("strong", {}, a.provider), a.model ? el("span", { class: "muted model" }, a.model) : null),
      el("div", { class: "track" }, bar),
      el("span", { class: "details" }, details.join(" · "), hasCause(a.error_class) ? [" · ", el("span", { class: "cause" }, a.error_class)] : null),
      el(
        "span",
        { class: "outcome-cell" },
        el("span", { class: `badge ${a.outcome}` }, words(a.outcome)),
        unused ? el("span", { class: "not-used", title: "Its answer was audited (and may have been paid for) but never given to anyone" }, "not used") : null,
      ),
    );
  });
  // The time axis under the bars, in the bars' column.
  const axis = el("div", { class: "axis" }, el("span", {}, "job created"), el("span", {}, `+${fmtMs(end - start)}`));
  rows.push(el("li", { class: "axis-row", "aria-hidden": "true" }, el("span"), el("span"), axis, el("span"), el("span")));
  return append(card, [el("ol", { class: "attempts" }, rows)]);
}

/**
 * A job type's effects: state, attempts, receipt, approvals and
 * reconciliations, with the operator's actions on the ones that need one.
 * @param {AdminJob} job
 */
function jobEffects(job) {
  if (!job.effects?.length) return null;
  const card = el("section", { class: "card wide", id: "job-effects" }, el("h2", {}, `Effects — ${words(job.effects_state ?? "")}`));
  const rows = job.effects.map((effect) => {
    const events = effect.events.map((e) => `${words(e.what)}${e.by ? ` by ${e.by}` : ""}`).join(", ");
    const last = effect.attempts.at(-1);
    // Once approved, the `approved` event says by whom.
    const approval =
      effect.state === "awaiting_approval" && effect.approval
        ? el("div", { class: "muted" }, `approval until ${new Date(effect.approval.expires_ms).toLocaleString()}`)
        : "";
    return el(
      "tr",
      { dataset: { effect: effect.name, state: effect.state } },
      el("td", {}, el("strong", {}, effect.name), " ", el("span", { class: "muted" }, effect.kind)),
      el("td", {}, el("span", { class: `badge ${effect.state === "done" ? "completed" : effect.state}` }, words(effect.state)), effect.reconciled ? " (reconciled)" : ""),
      el("td", { class: "num" }, `${effect.attempts.length} of ${effect.max_attempts}`, last?.detail ? el("div", { class: "muted" }, last.detail) : ""),
      el("td", { class: "mono muted", title: effect.delivery_id }, effect.receipt ? JSON.stringify(effect.receipt).slice(0, 120) : "—"),
      el("td", {}, events || "—", approval),
      effectActions(job, effect),
    );
  });
  const head = el("tr", {}, ...["Effect", "State", "Attempts", "Receipt", "Events", ""].map((h) => el("th", {}, h)));
  const table = el("table", { class: "effects cards" }, el("thead", {}, head), el("tbody", {}, rows));
  labelCells(table);
  return append(card, [table]);
}

/**
 * The job's operator events and, with them, what operators did to its
 * effects (an approval, a resend, a mark done): the job's own events do not
 * record those; each effect's events do, with who and when.
 * @param {AdminJob} job
 */
function jobEvents(job) {
  const card = el("section", { class: "card", id: "job-events" }, el("h2", {}, "Operator events"));
  const onEffects = (job.effects ?? []).flatMap((effect) => effect.events.filter((e) => e.by).map((e) => ({ at_ms: e.at_ms, action: e.what, by: e.by, effect: effect.name })));
  /** @type {{ at_ms: number, action: string, by?: string, request?: string, effect?: string }[]} */
  const events = [...(job.events ?? []), ...onEffects].sort((a, b) => a.at_ms - b.at_ms);
  if (!events.length) return append(card, [el("p", { class: "muted" }, "No operator has acted on this job.")]);
  const items = events.map((e) =>
    el(
      "li",
      { dataset: { action: e.action, effect: e.effect } },
      timeCell(e.at_ms),
      el("span", {}, el("strong", {}, words(e.action)), e.effect ? [" ", el("span", { class: "tag" }, e.effect)] : null, " by ", e.by),
      e.request ? el("span", { class: "mono muted", title: "the operator request's Idempotency-Key" }, e.request) : null,
    ),
  );
  return append(card, [el("ol", { class: "events" }, items)]);
}

/** @param {AdminJob} job */
function jobResult(job) {
  const card = el("section", { class: "card", id: "job-result" }, el("h2", {}, "Stored result"));
  const result = job.result;
  if (!result) return append(card, [el("p", { class: "muted" }, "None: the job has no final answer.")]);
  return append(card, [
    el("p", {}, el("span", { class: `badge ${result.status < 300 ? "completed" : "dead"}` }, `HTTP ${result.status}`), " ", el("span", { class: "mono muted" }, result.content_type ?? "")),
    el("pre", { class: "body" }, pretty(result.body)),
  ]);
}
