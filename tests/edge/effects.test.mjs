// Job types with effects (issue 11): `POST /onejob/v1/run/{type}` runs the
// bundled `triage` type (jobs/triage.json): one model call whose JSON answer
// must meet the type's output contract, then its effects in order, each
// exactly once: `record` (a row in the TICKETS D1 table, keyed by its
// delivery id) and `email` (a signed POST to the mail API, its receipt
// asked for after a crash). The breakpoints: duplicates, concurrency,
// once_per, a kill -9 between an effect and its record, a receiver that
// keeps failing (dead effect, alert, operator replay), approvals that come
// in time or too late, and an answer that breaks the contract. Every test
// counts what really happened: calls at the fake LLM, rows read back from
// D1 (GET /demo/tickets), POSTs at the fake mail API.
import assert from "node:assert/strict";
import { createHmac, randomUUID } from "node:crypto";
import http from "node:http";
import { after, before, describe, test } from "node:test";

import {
  FAKE_MAIL_SECRET,
  RESPOND_ASYNC,
  assertProblem,
  contentFault,
  delayedContent,
  newKey,
  sleep,
  startStack,
  triageInput,
  triageType,
  waitFor,
} from "../support/harness.mjs";

/** What the fake LLM answers for a triage (a JSON object that meets the contract). */
const TRIAGE = { category: "billing", priority: "high", summary: "charged twice" };
/** Every key without a script of its own gets that answer. */
const TRIAGED = [`${contentFault(TRIAGE)}*`];
/** What a message takes to reach the queue consumer at worst (wrangler dev batches). */
const DELIVERY_MS = 30_000;
/** How long to keep watching for a stray delivery that should not happen. */
const SETTLE_MS = 3000;
const ALERT_SECRET = "alert-signing-secret-for-effect-tests";
const DEAD_LETTERS = "/onejob/v1/admin/dead-letters";
const REPLAY = "/onejob/v1/admin/dead-letters/replay";

const newTicket = () => `T-${randomUUID().slice(0, 13)}`;
const jobPath = (key) => `/onejob/v1/jobs/${encodeURIComponent(key)}`;
const effectOf = (view, name) => {
  const effect = view.effects?.find((e) => e.name === name);
  assert.ok(effect, `no effect ${name} in ${JSON.stringify(view)}`);
  return effect;
};
const whats = (effect) => effect.events.map((e) => e.what);
/** Every POST the fake mail API got for `ticketId` (whatever its answer). */
const postsFor = (stack, ticketId) => stack.mail.deliveries().filter((d) => d.body?.ticket_id === ticketId);
/** The accepted (2xx) ones. */
const sentFor = (stack, ticketId) => postsFor(stack, ticketId).filter((d) => d.status >= 200 && d.status < 300);
const modelCalls = (stack, key) => stack.llm.calls(key).length;

/** The email the triage type renders for `input` and the TRIAGE answer. */
const emailOf = (input) => ({
  to: input.customer_email,
  subject: `Your ticket ${input.ticket_id} is in our ${TRIAGE.category} queue`,
  text: `Thanks for writing. We filed your ticket as ${TRIAGE.category} with ${TRIAGE.priority} priority: ${TRIAGE.summary}`,
  ticket_id: input.ticket_id,
});
const rowOf = (input) => ({ ticket_id: input.ticket_id, ...TRIAGE });

/**
 * Asserts a 200 run answer of `type` for `key` in `state` (the output and,
 * unless `effects` is false, both effects there); returns its body.
 */
function assertRun(answer, { type = "triage", key, state, effects = true }) {
  assert.equal(answer.status, 200, answer.text);
  assert.match(answer.res.headers.get("content-type") ?? "", /^application\/json/);
  const body = answer.body;
  assert.equal(body.type, type, answer.text);
  assert.equal(body.key, key, answer.text);
  if (state !== undefined) assert.equal(body.state, state, answer.text);
  assert.deepEqual(body.output, TRIAGE, answer.text);
  assert.ok(Array.isArray(body.effects), answer.text);
  if (effects) assert.deepEqual(body.effects.map((e) => [e.name, e.kind]), [["record", "d1"], ["email", "webhook"]], answer.text);
  return body;
}

/** Asserts a duplicate was answered with the stored result. */
function assertReplayed(answer, status = 200) {
  assert.equal(answer.status, status, answer.text);
  assert.equal(answer.res.headers.get("idempotent-replayed"), "true", answer.text);
}

/** Asserts a respond-async 202 for `key`. */
function assertAccepted(answer, key) {
  assert.equal(answer.status, 202, answer.text);
  assert.equal(answer.res.headers.get("location"), jobPath(key));
  assert.equal(answer.body?.key, key, answer.text);
}

/** Asserts the D1 row of `input`'s ticket is the one `record` wrote; returns it. */
function assertRow(rows, input, record) {
  assert.equal(rows.length, 1, JSON.stringify(rows));
  const [row] = rows;
  assert.deepEqual({ ticket_id: row.ticket_id, category: row.category, priority: row.priority, summary: row.summary }, rowOf(input));
  assert.equal(row.delivery_id, record.delivery_id, "the row is keyed by the effect's delivery id");
  assert.equal(row.fingerprint, record.fingerprint);
  assert.equal(typeof row.source, "string");
  assert.ok(Number.isFinite(Number(row.written_ms)) && Number(row.written_ms) > 0, JSON.stringify(row));
  return row;
}

/** Asserts one accepted, correctly signed POST of `email`'s payload under its delivery id. */
function assertOneEmail(stack, input, email) {
  const posts = postsFor(stack, input.ticket_id);
  assert.equal(posts.length, 1, `POSTs at the mail API: ${JSON.stringify(posts.map((p) => [p.idempotencyKey, p.status]))}`);
  const [post] = posts;
  assert.equal(post.status, 202);
  assert.equal(post.idempotencyKey, email.delivery_id, "Idempotency-Key: the delivery id");
  assert.equal(post.headers["onejob-delivery"], email.delivery_id);
  assert.match(post.headers["content-type"] ?? "", /^application\/json/);
  assert.match(post.headers["onejob-timestamp"] ?? "", /^\d+$/);
  assert.ok(Math.abs(Number(post.headers["onejob-timestamp"]) - Date.now() / 1000) < 600, post.headers["onejob-timestamp"]);
  assert.equal(post.signatureValid, true, "signed with MAIL_SECRET over <timestamp>.<body>");
  assert.deepEqual(post.body, emailOf(input));
  assert.deepEqual(post.body, email.payload);
  assert.equal(stack.mail.delivered(email.delivery_id).length, 1);
}

/** A webhook receiver over real HTTP that records alerts. */
async function startAlertReceiver() {
  const deliveries = [];
  const server = http.createServer(async (req, res) => {
    let body = "";
    for await (const chunk of req) body += chunk;
    deliveries.push({ headers: req.headers, body });
    res.end("ok");
  });
  await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
  return { url: `http://127.0.0.1:${server.address().port}/alerts`, deliveries, close: () => new Promise((r) => server.close(r)) };
}

const alertSignatureOf = ({ headers, body }) =>
  `sha256=${createHmac("sha256", ALERT_SECRET).update(`${headers["onejob-timestamp"]}.${body}`).digest("hex")}`;

describe("job types with effects: duplicates, once_per, input, approvals, output contract", () => {
  const APPROVAL_TTL_MS = 4000;
  let stack;

  before(async () => {
    stack = await startStack({
      mail: true,
      vars: {
        MAX_ATTEMPTS: "2",
        BACKOFF_BASE_MS: "100",
        BACKOFF_CAP_MS: "500",
        JOB_TYPES: JSON.stringify({
          triage_repeat: triageType({ once_per: null }),
          triage_approve: triageType({ effects: { email: { approve: true, approval_ttl_ms: APPROVAL_TTL_MS } } }),
        }),
      },
    });
    stack.llm.scriptAll(TRIAGED);
  });

  after(async () => {
    await stack?.stop();
  });

  test("1. the same triage twice (same key): one model call, one row, one email; the second answer is replayed, the same body", { timeout: 60_000 }, async () => {
    const key = newKey();
    const input = triageInput(newTicket());
    const first = await stack.run("triage", key, input);
    const body = assertRun(first, { key, state: "completed" });
    assert.equal(first.res.headers.get("idempotent-replayed"), null);
    const record = effectOf(body, "record");
    const email = effectOf(body, "email");
    assert.ok(record.delivery_id.endsWith(":record") && email.delivery_id.endsWith(":email"), first.text);
    assert.equal(record.delivery_id.slice(0, -":record".length), email.delivery_id.slice(0, -":email".length), "one storage id");
    for (const effect of [record, email]) {
      assert.equal(effect.state, "done", first.text);
      assert.match(effect.fingerprint, /^[0-9a-f]{64}$/);
      assert.deepEqual(effect.attempts.map((a) => [a.number, a.end]), [[1, "done"]]);
      assert.equal(effect.reconciled, false);
      assert.equal(effect.approval, null);
      assert.notEqual(effect.receipt, null);
    }
    assert.deepEqual(record.payload, rowOf(input));
    assert.deepEqual(email.payload, emailOf(input));

    const second = await stack.run("triage", key, input);
    assertReplayed(second);
    assert.deepEqual(second.body, first.body, "the same answer");

    assert.equal(modelCalls(stack, key), 1, "one model call");
    assertRow(await stack.tickets(input.ticket_id), input, record);
    assertOneEmail(stack, input, email);
    const { status, body: job } = await stack.getJob(key);
    assert.equal(status, 200);
    assert.equal(job.state, "completed");
    assert.equal(job.effects_state, "completed");
    assert.deepEqual(job.effects.map((e) => [e.name, e.state]), [["record", "done"], ["email", "done"]]);
  });

  test("2. five concurrent submissions of one ticket (same key): one job, one row, one email; another key for that ticket → 409 already-run", { timeout: 60_000 }, async () => {
    const key = newKey();
    const input = triageInput(newTicket());
    stack.llm.script(key, [delayedContent(800, TRIAGE)]); // the duplicates arrive while the model works
    const answers = await Promise.all(Array.from({ length: 5 }, () => stack.run("triage", key, input)));
    // A duplicate answered before the effects were planned lists none yet (state running).
    for (const answer of answers) assertRun(answer, { key, effects: false });
    assert.equal(answers.filter((a) => a.res.headers.get("idempotent-replayed") === null).length, 1, "one drove the job, four were replays");
    const planned = answers.flatMap((a) => a.body.effects.filter((e) => e.name === "record").map((e) => e.delivery_id));
    assert.ok(planned.length >= 1, "the driver's answer lists the effects");
    assert.equal(new Set(planned).size, 1, "one job");
    const job = await stack.waitForJob(key, (j) => j.effects_state === "completed");
    const record = effectOf(job, "record");
    const email = effectOf(job, "email");
    assert.equal(record.attempts.length, 1);
    assert.equal(email.attempts.length, 1);
    assert.equal(modelCalls(stack, key), 1);
    assertRow(await stack.tickets(input.ticket_id), input, record);
    assertOneEmail(stack, input, email);

    const other = newKey();
    const refused = await stack.run("triage", other, input);
    const problem = assertProblem(refused, 409, "already-run");
    assert.equal(problem.job_key, key, "names the key the ticket ran under");
    const otherText = triageInput(input.ticket_id, { text: "the same ticket, written again" });
    assert.equal(assertProblem(await stack.run("triage", newKey(), otherText), 409, "already-run").job_key, key, "once per ticket_id, whatever the rest");
    await sleep(SETTLE_MS);
    assert.equal(modelCalls(stack, other), 0, "no model call for the refused key");
    assert.equal(modelCalls(stack, key), 1);
    assertRow(await stack.tickets(input.ticket_id), input, record);
    assertOneEmail(stack, input, email);
  });

  test("3. same key, other input → 422; invalid input → 400 listing violations; unknown type → 404; without once_per a new key runs the ticket again", { timeout: 60_000 }, async () => {
    const key = newKey();
    const input = triageInput(newTicket());
    assertRun(await stack.run("triage", key, input), { key, state: "completed" });
    const reused = await stack.run("triage", key, { ...input, text: "another text" });
    assertProblem(reused, 422, "idempotency-key-reused");
    assert.equal(modelCalls(stack, key), 1);
    assert.equal((await stack.tickets(input.ticket_id)).length, 1);
    assert.equal(sentFor(stack, input.ticket_id).length, 1);

    const invalidKey = newKey();
    const invalidTicket = newTicket();
    const invalid = await stack.run("triage", invalidKey, { ticket_id: invalidTicket, customer_email: "a@example.com", priority: "urgent" });
    const problem = assertProblem(invalid, 400, "invalid-input");
    assert.ok(Array.isArray(problem.violations) && problem.violations.every((v) => typeof v === "string"), invalid.text);
    assert.ok(problem.violations.includes('$: lacks "text"'), invalid.text);
    assert.ok(problem.violations.includes('$: has no "priority" allowed'), invalid.text);
    const unknownKey = newKey();
    assertProblem(await stack.run("no_such_type", unknownKey, input), 404, "unknown-job-type");
    assert.equal(modelCalls(stack, invalidKey), 0);
    assert.equal(modelCalls(stack, unknownKey), 0);
    assert.equal((await stack.tickets(invalidTicket)).length, 0);
    assert.equal(postsFor(stack, invalidTicket).length, 0);

    // triage_repeat: the triage type without once_per.
    const repeated = triageInput(newTicket());
    const [keyA, keyB] = [newKey(), newKey()];
    const a = assertRun(await stack.run("triage_repeat", keyA, repeated), { type: "triage_repeat", key: keyA, state: "completed" });
    const b = assertRun(await stack.run("triage_repeat", keyB, repeated), { type: "triage_repeat", key: keyB, state: "completed" });
    assert.equal(modelCalls(stack, keyA), 1);
    assert.equal(modelCalls(stack, keyB), 1);
    const rows = await stack.tickets(repeated.ticket_id);
    assert.equal(rows.length, 2, "two jobs, two rows");
    assert.deepEqual(rows.map((r) => r.delivery_id).sort(), [effectOf(a, "record").delivery_id, effectOf(b, "record").delivery_id].sort());
    const sent = sentFor(stack, repeated.ticket_id);
    assert.equal(postsFor(stack, repeated.ticket_id).length, 2);
    assert.deepEqual(sent.map((d) => d.idempotencyKey).sort(), [effectOf(a, "email").delivery_id, effectOf(b, "email").delivery_id].sort());
  });

  test("7. approval: nothing is sent before it (the record, which needs none, is written); approved in time → sent once, approved again → still once; too late → 409 approval-expired, nothing sent", { timeout: 90_000 }, async () => {
    const key = newKey();
    const input = triageInput(newTicket());
    const run = await stack.run("triage_approve", key, input);
    const waiting = assertRun(run, { type: "triage_approve", key, state: "awaiting_approval" });
    assert.equal(effectOf(waiting, "record").state, "done");
    const pending = effectOf(waiting, "email");
    assert.equal(pending.state, "awaiting_approval");
    assert.deepEqual(pending.attempts, []);
    assert.equal(pending.approval.approved_by, null);
    assert.ok(pending.approval.expires_ms > Date.now(), run.text);
    await sleep(1500);
    const { body: held } = await stack.getJob(key);
    assert.equal(held.effects_state, "awaiting_approval");
    assert.equal(effectOf(held, "email").state, "awaiting_approval");
    assert.equal(postsFor(stack, input.ticket_id).length, 0, "nothing sent before the approval");
    assert.equal((await stack.tickets(input.ticket_id)).length, 1, "the record needs no approval");

    const approved = await stack.approve(key);
    assert.equal(approved.status, 200, approved.text);
    assert.equal(approved.body.key, key, approved.text);
    assert.ok(["completed", "running"].includes(approved.body.state), approved.text);
    const job = await stack.waitForJob(key, (j) => j.effects_state === "completed");
    const email = effectOf(job, "email");
    assert.equal(email.state, "done");
    assert.equal(typeof email.approval.approved_by, "string");
    assert.ok(email.approval.approved_ms <= email.approval.expires_ms, JSON.stringify(email.approval));
    assert.deepEqual(whats(email), ["approved"]);
    assertOneEmail(stack, input, email);

    const again = await stack.approve(key);
    assert.equal(again.status, 200, again.text);
    await sleep(SETTLE_MS);
    assertOneEmail(stack, input, email);
    const settled = effectOf((await stack.getJob(key)).body, "email");
    assert.equal(settled.attempts.length, 1);
    assert.deepEqual(whats(settled), ["approved"], "approving twice approves once");
    assert.equal(modelCalls(stack, key), 1);
    assert.equal((await stack.tickets(input.ticket_id)).length, 1);

    // Too late.
    const lateKey = newKey();
    const late = triageInput(newTicket());
    const lateRun = assertRun(await stack.run("triage_approve", lateKey, late), { type: "triage_approve", key: lateKey, state: "awaiting_approval" });
    const expiresMs = effectOf(lateRun, "email").approval.expires_ms;
    await sleep(Math.max(0, expiresMs - Date.now()) + 500);
    assertProblem(await stack.approve(lateKey), 409, "approval-expired");
    await sleep(SETTLE_MS);
    assert.equal(postsFor(stack, late.ticket_id).length, 0, "an expired approval sends nothing");
    const { body: expired } = await stack.getJob(lateKey);
    assert.equal(effectOf(expired, "email").state, "expired");
    assert.deepEqual(effectOf(expired, "email").attempts, []);
    assert.equal(expired.effects_state, "partial_success");
    assert.equal((await stack.tickets(late.ticket_id)).length, 1, "its record was written (no approval needed)");

    // A job with nothing awaiting an approval.
    const plainKey = newKey();
    assertRun(await stack.run("triage", plainKey, triageInput(newTicket())), { key: plainKey, state: "completed" });
    assertProblem(await stack.approve(plainKey), 409, "not-awaiting-approval");
  });

  test("8. an answer that breaks the output contract (category \"refunds\") → 502 output-contract; no row, no email; the last attempt's error_class is contract", { timeout: 60_000 }, async () => {
    const key = newKey();
    const input = triageInput(newTicket());
    stack.llm.script(key, [`${contentFault({ ...TRIAGE, category: "refunds" })}*`]);
    const answer = await stack.run("triage", key, input);
    assertProblem(answer, 502, "output-contract");
    const { body: job } = await stack.getJob(key);
    assert.ok(job.attempts.length >= 1 && job.attempts.length <= 2, JSON.stringify(job.attempts));
    assert.equal(job.attempts.at(-1).error_class, "contract", JSON.stringify(job.attempts));
    assert.equal(modelCalls(stack, key), job.attempts.length, "one model call per attempt");
    assert.deepEqual((job.effects ?? []).filter((e) => e.attempts.length > 0), [], "no effect ran");
    await sleep(SETTLE_MS);
    assert.equal((await stack.tickets(input.ticket_id)).length, 0, "no row");
    assert.equal(postsFor(stack, input.ticket_id).length, 0, "no email");
    const again = await stack.run("triage", key, input);
    assert.equal(again.status, 502, again.text);
    assert.equal(modelCalls(stack, key), job.attempts.length, "no new model call");
  });
});

describe("job types with effects: kill -9 after the D1 row is committed, before it is recorded", () => {
  let stack;

  before(async () => {
    stack = await startStack({ faults: true, mail: true, vars: { EFFECT_HANG_AFTER: "record" } });
    stack.llm.scriptAll(TRIAGED);
  });

  after(async () => {
    await stack?.stop();
  });

  test("4. crash after commit: after the restart the row is found (reconciled), not written again; one row, one model call, one email", { timeout: 180_000 }, async () => {
    const key = newKey();
    const input = triageInput(newTicket());
    assertAccepted(await stack.run("triage", key, input, { headers: RESPOND_ASYNC }), key);
    const held = await waitFor(
      "the row committed while the record effect is still claimed",
      async () => {
        const rows = await stack.tickets(input.ticket_id);
        const { body: job } = await stack.getJob(key);
        const record = job.effects?.find((e) => e.name === "record");
        return { ok: rows.length === 1 && record?.state === "claimed", value: { rows: rows.length, record: record?.state, job } };
      },
      DELIVERY_MS + 10_000,
      250,
    );
    const beforeKill = effectOf(held.job, "record").state;
    assert.equal(beforeKill, "claimed");
    assert.equal(postsFor(stack, input.ticket_id).length, 0, "the email comes after the record");

    await stack.crashAndRestart();
    const job = await stack.waitForJob(key, (j) => j.effects_state === "completed", { timeoutMs: 60_000 });
    const record = effectOf(job, "record");
    assert.equal(record.state, "done");
    assert.equal(record.reconciled, true, "done by a reconciliation, not by a second write");
    assert.deepEqual(record.attempts.map((a) => [a.number, a.end]), [[1, "done"]], "one attempt");
    assert.ok(whats(record).includes("reconciled_done"), JSON.stringify(record.events));
    const rows = await stack.tickets(input.ticket_id);
    assertRow(rows, input, record);
    const email = effectOf(job, "email");
    assert.equal(email.state, "done");
    assertOneEmail(stack, input, email);
    const calls = modelCalls(stack, key);
    assert.equal(calls, 1, "the model is not called again");
    assert.equal(job.state, "completed");
    console.log(JSON.stringify({ before: beforeKill, after_restart: job.effects_state, effects: rows.length, attempts: calls }));
  });

  test("4b. the same crash under a caller's own request (no respond-async, so no queue message): the caller's connection drops; after the restart the Ledger's watch alarm finds the row; one row, one model call, one email", { timeout: 180_000 }, async () => {
    const key = newKey();
    const input = triageInput(newTicket());
    const caller = stack.run("triage", key, input).then(
      (answer) => ({ status: answer.status }),
      (error) => ({ error: String(error) }),
    );
    await waitFor(
      "the row committed while the record effect is still claimed",
      async () => {
        const rows = await stack.tickets(input.ticket_id);
        const { body: job } = await stack.getJob(key);
        const record = job.effects?.find((e) => e.name === "record");
        return { ok: rows.length === 1 && record?.state === "claimed", value: { rows: rows.length, record: record?.state } };
      },
      30_000,
      250,
    );
    await stack.crashAndRestart();
    assert.ok((await caller).error, "the caller's request ended with the runtime");
    const job = await stack.waitForJob(key, (j) => j.effects_state === "completed", { timeoutMs: 60_000 });
    const record = effectOf(job, "record");
    assert.equal(record.reconciled, true, "done by a reconciliation, not by a second write");
    assert.deepEqual(record.attempts.map((a) => [a.number, a.end]), [[1, "done"]], "one attempt");
    assertRow(await stack.tickets(input.ticket_id), input, record);
    assertOneEmail(stack, input, effectOf(job, "email"));
    assert.equal(modelCalls(stack, key), 1, "the model is not called again");
  });
});

describe("job types with effects: kill -9 after the mail API accepted the email, before it is recorded", () => {
  let stack;

  before(async () => {
    stack = await startStack({
      faults: true,
      mail: true,
      vars: {
        EFFECT_HANG_AFTER: "email",
        JOB_TYPES: JSON.stringify({ triage_noreceipt: triageType({ effects: { email: { receipt_url: null } } }) }),
      },
    });
    stack.llm.scriptAll(TRIAGED);
  });

  after(async () => {
    await stack?.stop();
  });

  /** Submits a background job of `type` and waits until its email was accepted while the effect is still claimed. */
  async function sentButNotRecorded(type, key, input) {
    assertAccepted(await stack.run(type, key, input, { headers: RESPOND_ASYNC }), key);
    return waitFor(
      "the email accepted by the mail API while its effect is still claimed",
      async () => {
        const { body: job } = await stack.getJob(key);
        const email = job.effects?.find((e) => e.name === "email");
        const sent = email ? stack.mail.delivered(email.delivery_id).length : 0;
        return { ok: email?.state === "claimed" && sent === 1, value: { email: email?.state, sent, job } };
      },
      DELIVERY_MS + 10_000,
      250,
    );
  }

  test("5. crash after the webhook answered: with a receipt URL the email is found (done, reconciled), not sent again; without one it is unknown (partial_success), still sent once", { timeout: 300_000 }, async () => {
    // With a receipt URL (the bundled triage type).
    const key = newKey();
    const input = triageInput(newTicket());
    await sentButNotRecorded("triage", key, input);
    await stack.crashAndRestart();
    const job = await stack.waitForJob(key, (j) => j.effects_state === "completed", { timeoutMs: 60_000 });
    const email = effectOf(job, "email");
    assert.equal(email.state, "done");
    assert.equal(email.reconciled, true);
    assert.deepEqual(email.attempts.map((a) => [a.number, a.end]), [[1, "done"]]);
    assert.ok(whats(email).includes("reconciled_done"), JSON.stringify(email.events));
    assert.ok(stack.mail.receiptQueries(email.delivery_id).some((q) => q.found), "the receipt was asked for");
    assertOneEmail(stack, input, email);
    assert.equal(effectOf(job, "record").reconciled, false);
    assertRow(await stack.tickets(input.ticket_id), input, effectOf(job, "record"));
    assert.equal(modelCalls(stack, key), 1);

    // Without a receipt URL: nothing can tell whether it arrived.
    const blindKey = newKey();
    const blind = triageInput(newTicket());
    await sentButNotRecorded("triage_noreceipt", blindKey, blind);
    await stack.crashAndRestart();
    const unknown = await stack.waitForJob(blindKey, (j) => j.effects_state === "partial_success", { timeoutMs: 60_000 });
    const blindEmail = effectOf(unknown, "email");
    assert.equal(blindEmail.state, "unknown");
    assert.equal(blindEmail.reconciled, false);
    assert.deepEqual(blindEmail.attempts.map((a) => [a.number, a.end]), [[1, "unknown"]]);
    assert.ok(whats(blindEmail).includes("unknown"), JSON.stringify(blindEmail.events));
    assert.equal(stack.mail.receiptQueries(blindEmail.delivery_id).length, 0, "no receipt URL to ask");
    assertOneEmail(stack, blind, blindEmail);
    await sleep(SETTLE_MS);
    const later = (await stack.getJob(blindKey)).body;
    assert.equal(later.effects_state, "partial_success");
    assert.equal(effectOf(later, "email").state, "unknown", "never sent again on its own");
    assertOneEmail(stack, blind, blindEmail);
    assert.equal((await stack.tickets(blind.ticket_id)).length, 1);
    assert.equal(modelCalls(stack, blindKey), 1);
  });
});

describe("job types with effects: the mail API keeps failing", () => {
  let stack;
  let receiver;

  before(async () => {
    receiver = await startAlertReceiver();
    stack = await startStack({
      mail: true,
      vars: {
        ALERT_WEBHOOK_URL: receiver.url,
        ALERT_SECRET,
        JOB_TYPES: JSON.stringify({ triage_fast: triageType({ effects: { email: { attempts: 3, backoff_base_ms: 50, backoff_cap_ms: 200 } } }) }),
      },
    });
    stack.llm.scriptAll(TRIAGED);
  });

  after(async () => {
    await stack?.stop();
    await receiver?.close();
  });

  test("6. model OK, email 503 forever: partial_success (record done, email dead), one dead letter of class effect, one alert; after the fix the operator's replay sends the email once, and only it", { timeout: 180_000 }, async () => {
    const key = newKey();
    const input = triageInput(newTicket());
    stack.mail.failAlways(503);
    const run = await stack.run("triage_fast", key, input);
    const body = assertRun(run, { type: "triage_fast", key });
    assert.ok(["running", "partial_success"].includes(body.state), run.text);
    const job = await stack.waitForJob(key, (j) => j.effects_state === "partial_success");
    assert.equal(job.state, "completed", "the model part succeeded");
    const record = effectOf(job, "record");
    assert.equal(record.state, "done");
    const email = effectOf(job, "email");
    assert.equal(email.state, "dead");
    assert.equal(email.max_attempts, 3);
    assert.deepEqual(email.attempts.map((a) => [a.number, a.end, a.status]), [[1, "transient", 503], [2, "transient", 503], [3, "transient", 503]]);
    const posts = postsFor(stack, input.ticket_id);
    assert.equal(posts.length, 3, "three attempts reached the mail API");
    for (const post of posts) {
      assert.equal(post.status, 503);
      assert.equal(post.idempotencyKey, email.delivery_id, "every retry under the same delivery id");
      assert.equal(post.signatureValid, true);
    }
    assert.equal(stack.mail.delivered(email.delivery_id).length, 0);
    assertRow(await stack.tickets(input.ticket_id), input, record);
    assert.equal(modelCalls(stack, key), 1);

    const entry = await waitFor(
      "the dead effect listed as a dead letter",
      async () => {
        const list = await stack.admin(DEAD_LETTERS);
        assert.equal(list.status, 200, list.text);
        const found = list.body.entries.find((e) => e.key === key && e.error_class === "effect");
        return { ok: Boolean(found), value: found ?? list.body };
      },
      DELIVERY_MS,
      500,
    );
    assert.equal(entry.tenant, "dev");
    await waitFor("the effect alert", () => ({ ok: receiver.deliveries.length >= 1, value: receiver.deliveries.length }), DELIVERY_MS, 200);
    await sleep(SETTLE_MS);
    assert.equal(receiver.deliveries.length, 1, "one alert at once, for one dead effect");
    const [alertDelivery] = receiver.deliveries;
    assert.equal(alertDelivery.headers["onejob-signature"], alertSignatureOf(alertDelivery), "signed with ALERT_SECRET");
    assert.equal(JSON.parse(alertDelivery.body).cause, "effect");
    assert.ok(!alertDelivery.body.includes(FAKE_MAIL_SECRET), "no mail secret in the alert");

    // The mail API is fixed: the operator replays the job's dead effect.
    stack.mail.heal();
    const request = newKey();
    const replay = await stack.admin(REPLAY, { key: request, body: { tenant: "dev", key } });
    assert.equal(replay.status, 200, replay.text);
    assert.deepEqual(replay.body.replayed.map((r) => [r.tenant, r.key]), [["dev", key]], replay.text);
    const done = await stack.waitForJob(key, (j) => j.effects_state === "completed");
    const resent = effectOf(done, "email");
    assert.equal(resent.state, "done");
    assert.equal(resent.attempts.length, 4);
    assert.equal(resent.attempts.at(-1).end, "done");
    assert.ok(resent.events.some((e) => e.what === "resent" && e.by === "dev-admin"), JSON.stringify(resent.events));
    assert.deepEqual(effectOf(done, "record").attempts, record.attempts, "the record, done, is not written again");
    assert.equal(stack.mail.delivered(email.delivery_id).length, 1, "exactly one email delivered");
    assert.equal(postsFor(stack, input.ticket_id).length, 4);

    // The same replay request again, and a new one: nothing is sent again.
    const again = await stack.admin(REPLAY, { key: request, body: { tenant: "dev", key } });
    assert.equal(again.status, 200, again.text);
    assert.deepEqual(again.body, replay.body, "the same request, the same answer");
    const fresh = await stack.admin(REPLAY, { key: newKey(), body: { tenant: "dev", key } });
    assert.equal(fresh.status, 200, fresh.text);
    assert.deepEqual(fresh.body.replayed, [], "nothing left to replay");
    await sleep(SETTLE_MS);
    assert.equal(stack.mail.delivered(email.delivery_id).length, 1);
    assert.equal(postsFor(stack, input.ticket_id).length, 4);
    assert.equal((await stack.tickets(input.ticket_id)).length, 1, "still one row");
    assert.equal(modelCalls(stack, key), 1, "the model is not run again");
    assert.equal(receiver.deliveries.length, 1, "no new alert");
    assert.equal((await stack.getJob(key)).body.effects_state, "completed");
  });

  test("13. an operator marks a dead email done (nothing is sent) or resends one after the fix (sent once); the same action again changes nothing; an effect the job does not have → 404", { timeout: 180_000 }, async () => {
    const effectRoute = (key, name, action) => `/onejob/v1/admin/jobs/dev/${encodeURIComponent(key)}/effects/${name}/${action}`;
    const deadEmail = async () => {
      const key = newKey();
      const input = triageInput(newTicket());
      assertRun(await stack.run("triage_fast", key, input), { type: "triage_fast", key });
      const job = await stack.waitForJob(key, (j) => j.effects_state === "partial_success");
      assert.equal(effectOf(job, "email").state, "dead");
      return { key, input, email: effectOf(job, "email") };
    };
    stack.mail.failAlways(503);
    const marked = await deadEmail();
    const resent = await deadEmail();

    // Marked done: the operator checked the mailbox; nothing is sent.
    const mark = await stack.admin(effectRoute(marked.key, "email", "mark_done"), { method: "POST", key: newKey() });
    assert.equal(mark.status, 200, mark.text);
    assert.equal(mark.body.state, "completed", mark.text);
    const markedEmail = effectOf(mark.body, "email");
    assert.equal(markedEmail.state, "done");
    assert.deepEqual(markedEmail.receipt, { marked_done_by: "dev-admin" });
    assert.deepEqual(markedEmail.events.filter((e) => e.what === "marked_done").map((e) => e.by), ["dev-admin"]);
    const markAgain = await stack.admin(effectRoute(marked.key, "email", "mark_done"), { method: "POST", key: newKey() });
    assert.equal(markAgain.status, 200, markAgain.text);
    assert.deepEqual(effectOf(markAgain.body, "email").events, markedEmail.events, "done already: nothing changes");

    // Resent after the fix: sent once, under the same delivery id.
    stack.mail.heal();
    const resend = await stack.admin(effectRoute(resent.key, "email", "resend"), { method: "POST", key: newKey() });
    assert.equal(resend.status, 200, resend.text);
    const done = await stack.waitForJob(resent.key, (j) => j.effects_state === "completed");
    const resentEmail = effectOf(done, "email");
    assert.equal(resentEmail.state, "done");
    assert.deepEqual(resentEmail.attempts.map((a) => a.end), ["transient", "transient", "transient", "done"]);
    assert.equal(stack.mail.delivered(resent.email.delivery_id).length, 1, "exactly one email delivered");
    const resendAgain = await stack.admin(effectRoute(resent.key, "email", "resend"), { method: "POST", key: newKey() });
    assert.equal(resendAgain.status, 200, resendAgain.text);

    assertProblem(await stack.admin(effectRoute(resent.key, "nope", "resend"), { method: "POST", key: newKey() }), 404, "not-found");
    await sleep(SETTLE_MS);
    assert.equal(stack.mail.delivered(marked.email.delivery_id).length, 0, "marking done sends nothing");
    assert.equal(postsFor(stack, marked.input.ticket_id).length, 3, "only the three failed attempts");
    assert.equal(stack.mail.delivered(resent.email.delivery_id).length, 1, "still one");
    assert.equal(postsFor(stack, resent.input.ticket_id).length, 4);
  });
});

describe("job types with effects: a streamed answer", () => {
  let stack;
  before(async () => {
    // The demo provider streams its JSON triage word by word; `triage_team`
    // also wants a `team`, which the demo never answers.
    const triage_team = triageType({ output: { required: ["category", "priority", "summary", "team"] } });
    stack = await startStack({ upstream: "demo", mail: true, vars: { JOB_TYPES: JSON.stringify({ triage_team }) } });
  });
  after(async () => {
    await stack?.stop();
  });

  test("9. Accept: text/event-stream: the answer streams, then its effects run once; the replay is the same stream; the other mode is another intent (422)", async () => {
    const key = newKey();
    const ticket = newTicket();
    const input = triageInput(ticket);
    const streamed = { Accept: "text/event-stream" };
    const first = await stack.run("triage", key, input, { headers: streamed });
    assert.equal(first.status, 200, first.text);
    assert.match(first.res.headers.get("content-type") ?? "", /^text\/event-stream/);
    const deltas = first.text
      .split("\n\n")
      .map((event) => event.replace(/^data: /, ""))
      .filter((data) => data.startsWith("{"))
      .map((data) => JSON.parse(data).choices?.[0]?.delta?.content ?? "")
      .join("");
    const answer = JSON.parse(deltas);
    assert.equal(answer.category, "billing", deltas);
    assert.ok(first.text.trimEnd().endsWith("data: [DONE]"), "the whole stream");

    const job = await stack.waitForJob(key, (j) => j.effects_state === "completed", { timeoutMs: 15_000 });
    assert.equal(job.state, "completed");
    assert.equal(job.attempts.length, 1);
    assert.deepEqual(job.effects.map((e) => [e.name, e.state, e.attempts.length]), [["record", "done", 1], ["email", "done", 1]]);
    const rows = await stack.tickets(ticket);
    assert.equal(rows.length, 1);
    assert.equal(rows[0].category, answer.category);
    assert.equal(rows[0].summary, answer.summary, "the row holds the streamed answer's summary");
    assert.equal(sentFor(stack, ticket).length, 1);

    const again = await stack.run("triage", key, input, { headers: streamed });
    assert.equal(again.status, 200, again.text);
    assert.equal(again.res.headers.get("idempotent-replayed"), "true");
    assert.equal(again.text, first.text, "the stored stream, byte for byte");
    const plain = await stack.run("triage", key, input);
    assertProblem(plain, 422, "idempotency-key-reused");
    await sleep(SETTLE_MS);
    assert.equal((await stack.tickets(ticket)).length, 1);
    assert.equal(sentFor(stack, ticket).length, 1, "still one email");
  });

  test("11. a streamed answer outside the type's contract: shown as it came, but no effect runs; a dead letter of class contract; its ticket is free again", async () => {
    const key = newKey();
    const ticket = newTicket();
    const input = triageInput(ticket);
    const streamed = { Accept: "text/event-stream" };
    const first = await stack.run("triage_team", key, input, { headers: streamed });
    assert.equal(first.status, 200, first.text);
    const letters = await waitFor(
      "the contract dead letter",
      async () => {
        const answer = await stack.admin(DEAD_LETTERS);
        const entry = answer.body?.entries?.find((e) => e.key === key);
        return { ok: Boolean(entry), value: entry };
      },
      15_000,
      250,
    );
    assert.equal(letters.error_class, "contract");
    assert.match(letters.detail, /output contract/);
    const job = (await stack.getJob(key)).body;
    assert.equal(job.state, "completed");
    assert.deepEqual(job.effects ?? [], [], "no effect planned");
    await sleep(SETTLE_MS);
    assert.equal((await stack.tickets(ticket)).length, 0, "nothing written");
    assert.equal(postsFor(stack, ticket).length, 0, "nothing sent");
    // The subject was freed: a new intent for the ticket runs (and streams) again.
    const retry = await stack.run("triage_team", newKey(), input, { headers: streamed });
    assert.equal(retry.status, 200, retry.text);
  });
});

describe("job types with effects: the subject gate across users", () => {
  let stack;
  before(async () => {
    stack = await startStack({ mail: true });
    stack.llm.scriptAll(TRIAGED);
  });
  after(async () => {
    await stack?.stop();
  });

  test("10. two users, the same key and ticket: one job, one row, one email; the other user gets 409 without the first user's key", async () => {
    const { mintToken, DEV_TOKEN_SECRET } = await import("../support/keys.mjs");
    const now = Math.floor(Date.now() / 1000);
    const tokenOf = (sub) => mintToken({ tenant: "dev", sub, iat: now, exp: now + 600 }, DEV_TOKEN_SECRET);
    const key = newKey();
    const ticket = newTicket();
    const input = triageInput(ticket);
    const alice = await stack.run("triage", key, input, { token: tokenOf("alice") });
    assert.equal(alice.status, 200, alice.text);
    const bob = await stack.run("triage", key, input, { token: tokenOf("bob") });
    const refused = assertProblem(bob, 409, "already-run");
    assert.equal(refused.job_key, undefined, "another user's key is not shown");
    const again = await stack.run("triage", newKey(), input, { token: tokenOf("alice") });
    assert.equal(assertProblem(again, 409, "already-run").job_key, key, "the holder's own user sees its key");
    await sleep(SETTLE_MS);
    assert.equal((await stack.tickets(ticket)).length, 1);
    assert.equal(sentFor(stack, ticket).length, 1);
  });
});

describe("job types with effects: an operator settles an unknown run; its ticket is remembered after the job expired", () => {
  // The shortest retention the settings allow with these timeouts
  // (longer than UPSTREAM_TIMEOUT_MS + 10 s + UNKNOWN_LEASE_MS).
  const RETENTION_SECONDS = 15;
  const RESOLVE = "/onejob/v1/admin/jobs/resolve";
  let stack;

  before(async () => {
    stack = await startStack({
      mail: true,
      vars: {
        UNKNOWN_POLICY: "block",
        UPSTREAM_TIMEOUT_MS: "1500",
        UNKNOWN_LEASE_MS: "500",
        RETENTION_SECONDS: String(RETENTION_SECONDS),
      },
    });
  });

  after(async () => {
    await stack?.stop();
  });

  test("12. the model call times out (unknown); the operator's answer runs the effects once and answers the ticket: after the job expired, its key or another for that ticket → 409 already-run, nothing runs again", { timeout: 120_000 }, async () => {
    const key = newKey();
    const input = triageInput(newTicket());
    stack.llm.script(key, ["hang"]);
    assertAccepted(await stack.run("triage", key, input, { headers: RESPOND_ASYNC }), key);
    await stack.waitForJob(key, (j) => j.state === "unknown", { timeoutMs: DELIVERY_MS });

    const operatorAnswer = {
      id: "chatcmpl-from-the-dashboard",
      object: "chat.completion",
      created: 1767225600,
      model: "demo",
      choices: [{ index: 0, message: { role: "assistant", content: JSON.stringify(TRIAGE) }, finish_reason: "stop" }],
    };
    const resolved = await stack.admin(RESOLVE, {
      key: newKey(),
      body: { tenant: "dev", key, action: "succeeded", response: { status: 200, body: operatorAnswer } },
    });
    assert.equal(resolved.status, 200, resolved.text);
    const job = await stack.waitForJob(key, (j) => j.effects_state === "completed", { timeoutMs: 30_000 });
    assert.equal(job.state, "completed");
    assertRow(await stack.tickets(input.ticket_id), input, effectOf(job, "record"));
    assertOneEmail(stack, input, effectOf(job, "email"));
    assert.equal(modelCalls(stack, key), 1, "an operator's answer calls no model");

    // The job expires; its answered ticket does not become free with it.
    await waitFor(
      "the job gone after its retention",
      async () => {
        const { status } = await stack.getJob(key);
        return { ok: status === 404, value: status };
      },
      RETENTION_SECONDS * 1000 + 20_000,
      500,
    );
    // Not with its own key either (its job is gone: only the ticket remembers).
    const sameKey = assertProblem(await stack.run("triage", key, input), 409, "already-run");
    assert.equal(sameKey.job_key, key);
    const again = newKey();
    const refused = assertProblem(await stack.run("triage", again, input), 409, "already-run");
    assert.equal(refused.job_key, key, "the expired job's key, to the same user");
    assert.equal(modelCalls(stack, key), 1, "the model is not called again");
    assert.equal(modelCalls(stack, again), 0);
    assert.equal(postsFor(stack, input.ticket_id).length, 1, "still one email");
    assert.equal((await stack.tickets(input.ticket_id)).length, 1, "still one row");
  });
});
