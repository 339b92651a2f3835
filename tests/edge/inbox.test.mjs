// The demo's mail inbox as a webhook effect's target: `demo:inbox`, as
// `make dev` sets it (dev.vars.example: MAIL_URL = MAIL_RECEIPT_URL =
// "demo:inbox", resolved from the triage type's `env:` URLs) or written in
// a job type itself. Core reads it as `EffectTarget::Inbox`; the mail goes
// to the demo_inbox table of the TICKETS database, keyed by its delivery id,
// and `GET /demo/inbox` lists it. With the inbox as its receipt source too,
// a mail whose record was lost is reconciled from the inbox; without one,
// it is unknown (as a webhook without a receipt URL).
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { after, before, describe, test } from "node:test";

import { RESPOND_ASYNC, newKey, startStack, triageInput, triageType, waitFor } from "../support/harness.mjs";

/** A triage type whose email goes to the inbox by its own spelling, with no receipt URL. */
const TYPES = { triage_inbox: triageType({ once_per: null, effects: { email: { url: "demo:inbox", receipt_url: null } } }) };

const newTicket = () => `T-${randomUUID().slice(0, 13)}`;
const effectOf = (view, name) => {
  const effect = view.effects?.find((e) => e.name === name);
  assert.ok(effect, `no effect ${name} in ${JSON.stringify(view)}`);
  return effect;
};

/** The inbox's mails for `ticketId` (`GET /demo/inbox`). */
async function mailsFor(stack, ticketId) {
  const res = await fetch(`${stack.url}/demo/inbox`);
  const text = await res.text();
  assert.equal(res.status, 200, `GET /demo/inbox: ${text}`);
  return JSON.parse(text).rows.filter((m) => m.payload?.ticket_id === ticketId);
}

describe("the demo inbox as an effect's target", () => {
  let stack;

  before(async () => {
    stack = await startStack({ upstream: "demo", vars: { JOB_TYPES: JSON.stringify(TYPES) } });
  });

  after(async () => {
    await stack?.stop();
  });

  for (const type of ["triage", "triage_inbox"]) {
    test(`${type}: one mail in the inbox under the effect's delivery id, with the inbox's receipt; the same key again is replayed, still one mail`, { timeout: 60_000 }, async () => {
      const key = newKey();
      const input = triageInput(newTicket());
      const first = await stack.run(type, key, input);
      assert.equal(first.status, 200, first.text);
      const email = effectOf(first.body, "email");
      assert.equal(email.kind, "webhook", "the inbox stands for a mail API");
      assert.equal(email.state, "done", first.text);
      assert.deepEqual(email.receipt, { status: 202, body: { id: email.delivery_id } });
      assert.equal(email.payload.to, input.customer_email);
      const mails = await mailsFor(stack, input.ticket_id);
      assert.equal(mails.length, 1, JSON.stringify(mails));
      assert.equal(mails[0].delivery_id, email.delivery_id);
      assert.deepEqual(mails[0].payload, email.payload);

      const second = await stack.run(type, key, input);
      assert.equal(second.status, 200, second.text);
      assert.equal(second.res.headers.get("idempotent-replayed"), "true");
      assert.equal((await mailsFor(stack, input.ticket_id)).length, 1, "one mail");
    });
  }
});

describe("the demo inbox: kill -9 after it took the mail, before the mail is recorded", () => {
  let stack;

  before(async () => {
    stack = await startStack({ faults: true, upstream: "demo", vars: { EFFECT_HANG_AFTER: "email", JOB_TYPES: JSON.stringify(TYPES) } });
  });

  after(async () => {
    await stack?.stop();
  });

  /** Runs `type` in the background until its email is in the inbox but still claimed, then kills the runtime. */
  async function crashAfterTheMail(type) {
    const key = newKey();
    const input = triageInput(newTicket());
    const accepted = await stack.run(type, key, input, { headers: RESPOND_ASYNC });
    assert.equal(accepted.status, 202, accepted.text);
    await waitFor(
      "the mail in the inbox while the email effect is still claimed",
      async () => {
        const mails = await mailsFor(stack, input.ticket_id);
        const { body: job } = await stack.getJob(key);
        const email = job.effects?.find((e) => e.name === "email");
        return { ok: mails.length === 1 && email?.state === "claimed", value: { mails: mails.length, email: email?.state } };
      },
      40_000,
      250,
    );
    await stack.crashAndRestart();
    return { key, input };
  }

  test("receipt_url demo:inbox (make dev's MAIL_RECEIPT_URL): after the restart the inbox is asked, and has it: done by a reconciliation, one mail", { timeout: 180_000 }, async () => {
    const { key, input } = await crashAfterTheMail("triage");
    const job = await stack.waitForJob(key, (j) => j.effects_state === "completed", { timeoutMs: 60_000 });
    const email = effectOf(job, "email");
    assert.equal(email.state, "done");
    assert.equal(email.reconciled, true, "done by a reconciliation, not by a second delivery");
    assert.ok(email.events.some((e) => e.what === "reconciled_done"), JSON.stringify(email.events));
    assert.equal((await mailsFor(stack, input.ticket_id)).length, 1, "one mail");
  });

  test("no receipt_url: after the restart nothing can tell whether it arrived: unknown, for an operator; one mail, never sent again", { timeout: 180_000 }, async () => {
    const { key, input } = await crashAfterTheMail("triage_inbox");
    const job = await stack.waitForJob(key, (j) => j.effects_state === "partial_success", { timeoutMs: 60_000 });
    const email = effectOf(job, "email");
    assert.equal(email.state, "unknown");
    assert.ok(email.events.some((e) => e.what === "unknown"), JSON.stringify(email.events));
    assert.equal((await mailsFor(stack, input.ticket_id)).length, 1, "one mail");
  });
});
