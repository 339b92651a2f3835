// The operator's actions on one job, as its state calls for them: replay a
// dead job, resolve an unknown one, replay the effects that did not happen,
// approve the ones that wait; and each effect's own (approve, resend, mark
// done). Each click is its own keyed request (api.js); its outcome is
// flashed on the job's page (router.js, act).
import { approve, effectAction, replay, resolve } from "../api.js";
import { append, el } from "../dom.js";
import { pretty, timeCell, words } from "../format.js";
import { act } from "../router.js";

/** @typedef {import("../answers.js").AdminJob} AdminJob */
/** @typedef {import("../answers.js").Effect} Effect */

/**
 * The operator actions that apply to the job's state.
 * @param {AdminJob} job
 */
export function jobActions(job) {
  const card = el("section", { class: "card", id: "job-actions" }, el("h2", {}, "Operator actions"));
  if (job.state === "dead") return append(card, replayDead(job));
  if (job.state === "unknown") return append(card, resolveUnknown(job));
  if (job.effects?.some((e) => ["dead", "unknown"].includes(e.state))) return append(card, replayEffects(job));
  if (job.effects?.some((e) => e.state === "awaiting_approval")) return append(card, approveEffects(job, job.effects));
  return append(card, [el("p", { class: "muted" }, `None for a ${words(job.state)} job: replay is for dead jobs, resolving for unknown ones.`)]);
}

/**
 * The job's name as an action's body gives it (its user only when it has one).
 * @param {AdminJob} job
 */
const nameOf = (job) => ({ tenant: job.tenant, ...(job.user ? { user: job.user } : {}), key: job.key });

/** @param {AdminJob} job */
function replayDead(job) {
  const button = el("button", { class: "primary", id: "replay", type: "button" }, "Replay");
  button.addEventListener("click", () =>
    act(button, "job", async () => {
      const answer = await replay(nameOf(job));
      if (answer.replayed?.length) return "Replayed: the job runs again under the same key, with a fresh allowance of attempts.";
      const why = answer.skipped?.[0]?.reason ?? answer.skipped?.[0]?.detail;
      return `Skipped: the job was not replayed${why ? ` (${words(why)})` : " (it is no longer dead)"}.`;
    }),
  );
  return [
    el("p", { class: "lead" }, "This job used up its attempts. A replay gives it a fresh allowance under the same key; callers waiting on the key get the new result."),
    button,
  ];
}

/** @param {AdminJob} job */
function resolveUnknown(job) {
  const response = el("textarea", { id: "resolve-body", rows: "7", spellcheck: "false", placeholder: '{"id": "chatcmpl-…", "object": "chat.completion", "choices": [ … ]}' });
  const error = el("p", { class: "problem", hidden: true });
  response.addEventListener("input", () => (error.hidden = true));
  const succeeded = el("button", { class: "primary", id: "resolve", type: "button" }, "Resolve as succeeded");
  const retry = el("button", { id: "allow-attempt", type: "button" }, "Allow one new attempt");
  succeeded.addEventListener("click", () => {
    let parsed;
    try {
      parsed = JSON.parse(response.value);
    } catch (e) {
      error.textContent = `The response is not JSON: ${/** @type {Error} */ (e).message}`;
      error.hidden = false;
      return;
    }
    act(succeeded, "job", async () => {
      await resolve({ ...nameOf(job), action: "succeeded", response: { status: 200, body: parsed } });
      return "Resolved as succeeded: callers of this key now get the response you gave.";
    });
  });
  retry.addEventListener("click", () =>
    act(retry, "job", async () => {
      await resolve({ ...nameOf(job), action: "retry" });
      // A caller's own job is not re-sent by onejob (it keeps no caller's
      // request): its next request with the key runs the attempt.
      return job.background
        ? "One new attempt allowed: the queue runs the job again now."
        : "One new attempt allowed: the next request with this key runs it (onejob does not re-send a caller's request on its own).";
    }),
  );
  return [
    el("p", { class: "lead" }, `The last attempt's outcome is unknown: the provider may have answered (and billed) it. If you found the answer (in the provider's dashboard or logs), paste it and resolve the job; otherwise allow one new attempt, at the risk of paying twice${job.background ? " (the queue runs it at once)" : " (it runs when the caller next sends the request with this key)"}.`),
    el("label", { for: "resolve-body" }, "The provider's response (JSON body, sent with status 200)"),
    response,
    error,
    el("div", { class: "actions" }, succeeded, " ", retry),
  ];
}

/** @param {AdminJob} job */
function replayEffects(job) {
  const button = el("button", { class: "primary", id: "replay-effects", type: "button" }, "Replay the effects that did not happen");
  button.addEventListener("click", () =>
    act(button, "job", async () => {
      await replay(nameOf(job));
      return "Replayed: only the dead or unknown effects go again, once each; the answer is not asked for again.";
    }),
  );
  return [
    el("p", { class: "lead" }, "The answer was delivered, but some effect did not happen (partial success). A replay sends only those effects."),
    button,
  ];
}

/**
 * The approver sees what is about to be written or sent, then approves.
 * @param {AdminJob} job
 * @param {Effect[]} effects
 */
function approveEffects(job, effects) {
  const waiting = effects.filter((e) => e.state === "awaiting_approval");
  const button = el("button", { class: "primary", id: "approve", type: "button" }, waiting.length === 1 ? `Approve ${waiting[0].name}` : `Approve all ${waiting.length}`);
  button.addEventListener("click", () =>
    act(button, "job", async () => {
      await approve(job);
      return `Approved: ${waiting.map((e) => e.name).join(", ")} ${waiting.length === 1 ? "runs" : "run"} once.`;
    }),
  );
  return [
    el("p", { class: "lead" }, `The answer is in; ${waiting.length === 1 ? "an effect waits" : `${waiting.length} effects wait`} for an operator's approval before ${waiting.length === 1 ? "it runs" : "they run"}.`),
    waiting.map((effect) => [
      el("h3", { class: "approval-head" }, `${effect.name} `, el("span", { class: "muted" }, `(${effect.kind}) will send:`)),
      effect.approval?.expires_ms ? el("p", { class: "muted" }, "Approve until ", timeCell(effect.approval.expires_ms)) : null,
      el("pre", { class: "body", dataset: { effect: effect.name } }, pretty(effect.payload)),
    ]),
    el("div", { class: "actions" }, button),
  ];
}

/**
 * An effect's row's actions cell: what an operator may do to it in its state.
 * @param {AdminJob} job
 * @param {Effect} effect
 */
export function effectActions(job, effect) {
  const actions = el("td", {});
  /**
   * @param {string} label
   * @param {() => Promise<string>} run
   */
  const button = (label, run) => {
    const b = el("button", { type: "button", dataset: { effectAction: label } }, label);
    b.addEventListener("click", () => act(b, "job", run));
    actions.append(b, " ");
  };
  if (effect.state === "awaiting_approval") {
    button("Approve", async () => {
      await approve(job);
      return `Approved: ${effect.name} runs once.`;
    });
  }
  if (["dead", "unknown"].includes(effect.state)) {
    button("Resend", async () => {
      await effectAction(job, effect.name, "resend");
      return `Resent: ${effect.name} goes once more (with its own retries).`;
    });
  }
  if (["dead", "unknown", "conflict"].includes(effect.state)) {
    button("Mark done", async () => {
      await effectAction(job, effect.name, "mark_done");
      return `Marked done: ${effect.name} will not be sent again.`;
    });
  }
  return actions;
}
