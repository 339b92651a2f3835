// onejob's storage pattern on a first call, and nothing else (no auth, no
// fingerprint, no wasm): one SQLite Durable Object per key that looks up its
// tables, creates the job's one table, inserts the job, adds its owner, calls
// the upstream, keeps the response in the job's row, updates the job and sets
// an alarm. Like onejob's first call (RESULT_CACHE's default), it neither
// reads nor writes KV: KV is read by retries and written when a job is first
// replayed. The statements are those of crates/edge/src/ledger/store.rs (the
// one-row layout: the job, its owner and a response of up to 256 KB in one
// row of one table, `job`). `make bench` measures onejob against it (what the
// pattern costs, what is onejob's own), and against bench/sharded (the
// probe: one object per key, or many keys per object).
import { DurableObject } from "cloudflare:workers";

import { CHUNK, JOB_TABLE, RETENTION_MS, RESPONSE_TABLES, answered, attemptOf, forward, jobRecord, ready } from "./shared.js";

export default {
  async fetch(request, env) {
    const url = new URL(request.url);
    const key = request.headers.get("Idempotency-Key");
    if (ready(url) || !key) return ready(url) || new Response("no key", { status: 400 });
    return env.JOBS.getByName(`dev:${key}`).fetch(request);
  },
};

export class Job extends DurableObject {
  async fetch(request) {
    const sql = this.ctx.storage.sql;
    const key = request.headers.get("Idempotency-Key");
    const body = await request.arrayBuffer();
    // A fresh object's first statement: which tables it has (store.rs looks
    // them up once per lifetime, for an older layout to migrate).
    const tables = sql.exec("SELECT name FROM sqlite_master WHERE type = 'table'").toArray();
    if (tables.some(({ name }) => name === "job")) {
      const found = sql.exec("SELECT record FROM job WHERE id = 1").toArray()[0];
      if (found) return new Response(found.record); // a replay (not what is measured)
    }
    const now = Date.now();
    this.ctx.waitUntil(this.ctx.storage.setAlarm(now + RETENTION_MS));
    sql.exec(JOB_TABLE);
    sql.exec("INSERT INTO job (id, version, record) VALUES (1, ?, ?) ON CONFLICT (id) DO NOTHING", 1, jobRecord(1, [], now));
    const meta = JSON.stringify({ tenant: "dev", user: null, key, model: "gpt-test", metered: 0 });
    sql.exec("UPDATE job SET meta = ? WHERE id = 1 AND meta IS NULL", meta);
    const got = await forward(this.env, request, body);
    const { status, type, answer } = got;
    if (answer.length <= CHUNK) {
      sql.exec("UPDATE job SET attempt = ?, status = ?, content_type = ?, body = ? WHERE id = 1 AND attempt IS NULL", 1, status, type, answer);
    } else {
      sql.exec(RESPONSE_TABLES); // a larger response: the responses' tables, its body in chunks
      sql.exec("INSERT INTO responses (attempt, status, content_type, size, streamed) VALUES (?, ?, ?, ?, 0)", 1, status, type, answer.length);
      for (let seq = 0; seq * CHUNK < answer.length; seq++) {
        sql.exec("INSERT INTO response_chunks (attempt, seq, bytes) VALUES (?, ?, ?)", 1, seq, answer.subarray(seq * CHUNK, (seq + 1) * CHUNK));
      }
    }
    sql.exec("UPDATE job SET version = ?, record = ? WHERE id = 1 AND version = ?", 2, jobRecord(2, attemptOf(status, now), now), 1);
    return answered(got);
  }

  async alarm() {
    await this.ctx.storage.deleteAll(); // retention: the job expired, nothing is left
  }
}
