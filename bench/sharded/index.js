// The probe of `make bench`: bench/storage-pattern's first call (the same
// statements, an alarm) with many keys'
// jobs in one SQLite Durable Object per tenant shard (SHARD_COUNT per
// tenant; a request's `X-Shards` header overrides it, 1 = the whole tenant
// in one object) instead of one object per key.
//
// What it costs beyond the figures:
// - retention: a per-key object deletes itself (one alarm, deleteAll); a
//   shard keeps jobs of many ages, so every row carries its expiry, an index
//   orders them and the alarm sweeps expired keys in batches (below);
// - alarms: one per object, so one per shard is shared by every job in it:
//   it is kept at the earliest expiry (read once per object), and a job's
//   own wake-ups (a stream's watchdog, a background job's outbox) would need
//   a schedule table of their own, swept the same way;
// - throughput: an object runs one request at a time on one thread, so a
//   tenant's first calls, replays and duplicates all queue on its 16 shards
//   (and every key of a shard waits behind the others' storage writes): the
//   tenant's ceiling is its shard count times one object's (see the single
//   shard's figure); a per-key object only limits one key.
import { DurableObject } from "cloudflare:workers";

import { CHUNK, RETENTION_MS, answered, attemptOf, forward, jobRecord, ready } from "../storage-pattern/shared.js";

// The one-row layout (store.rs), keyed: the job, its owner and a response of
// up to 256 KB in one row per key; a larger response's body in chunks.
const SHARD_SCHEMA = `CREATE TABLE IF NOT EXISTS job (key TEXT PRIMARY KEY, version INTEGER NOT NULL, record TEXT NOT NULL, expires_ms INTEGER NOT NULL,
  meta TEXT, attempt INTEGER, status INTEGER, content_type TEXT, body BLOB);
CREATE INDEX IF NOT EXISTS job_by_expiry ON job (expires_ms);
CREATE TABLE IF NOT EXISTS response_chunks (key TEXT NOT NULL, attempt INTEGER NOT NULL, seq INTEGER NOT NULL, bytes BLOB NOT NULL, PRIMARY KEY (key, attempt, seq))`;

/** A key's shard (FNV-1a of the key, modulo the count). */
function shardOf(key, count) {
  let h = 0x811c9dc5;
  for (let i = 0; i < key.length; i++) h = Math.imul(h ^ key.charCodeAt(i), 0x01000193);
  return (h >>> 0) % count;
}

export default {
  async fetch(request, env) {
    const url = new URL(request.url);
    const key = request.headers.get("Idempotency-Key");
    if (ready(url) || !key) return ready(url) || new Response("no key", { status: 400 });
    const count = Number(request.headers.get("X-Shards") ?? env.SHARD_COUNT);
    return env.SHARDS.getByName(`dev:${count}:${shardOf(key, count)}`).fetch(request);
  },
};

export class Shard extends DurableObject {
  constructor(ctx, env) {
    super(ctx, env);
    ctx.storage.sql.exec(SHARD_SCHEMA); // once per object lifetime
    this.alarmAt = undefined; // the shard's one alarm, read once
  }

  async fetch(request) {
    const sql = this.ctx.storage.sql;
    const key = request.headers.get("Idempotency-Key");
    const body = await request.arrayBuffer();
    const found = sql.exec("SELECT record FROM job WHERE key = ?", key).toArray()[0];
    if (found) return new Response(found.record); // a replay (not what is measured)
    const now = Date.now();
    const expires = now + RETENTION_MS;
    this.alarmAt ??= await this.ctx.storage.getAlarm();
    if (this.alarmAt === null || this.alarmAt > expires) {
      this.alarmAt = expires;
      this.ctx.waitUntil(this.ctx.storage.setAlarm(expires));
    }
    sql.exec("INSERT INTO job (key, version, record, expires_ms) VALUES (?, 1, ?, ?) ON CONFLICT (key) DO NOTHING", key, jobRecord(1, [], now), expires);
    const meta = JSON.stringify({ tenant: "dev", user: null, key, model: "gpt-test", metered: 0 });
    sql.exec("UPDATE job SET meta = ? WHERE key = ? AND meta IS NULL", meta, key);
    const got = await forward(this.env, request, body);
    const { status, type, answer } = got;
    const inRow = answer.length <= CHUNK;
    sql.exec("UPDATE job SET attempt = 1, status = ?, content_type = ?, body = ? WHERE key = ? AND attempt IS NULL", status, type, inRow ? answer : null, key);
    for (let seq = 0; !inRow && seq * CHUNK < answer.length; seq++) {
      sql.exec("INSERT INTO response_chunks (key, attempt, seq, bytes) VALUES (?, 1, ?, ?)", key, seq, answer.subarray(seq * CHUNK, (seq + 1) * CHUNK));
    }
    sql.exec("UPDATE job SET version = 2, record = ? WHERE key = ? AND version = 1", jobRecord(2, attemptOf(status, now), now), key);
    return answered(got);
  }

  /** Retention: the expired keys' rows, in batches, then the alarm at the next expiry. */
  async alarm() {
    const sql = this.ctx.storage.sql;
    const expired = "SELECT key FROM job WHERE expires_ms <= ? ORDER BY expires_ms LIMIT 500";
    sql.exec(`DELETE FROM response_chunks WHERE key IN (${expired})`, Date.now());
    sql.exec(`DELETE FROM job WHERE key IN (${expired})`, Date.now());
    const next = sql.exec("SELECT MIN(expires_ms) AS at FROM job").one().at;
    this.alarmAt = next ?? null;
    if (next !== null) await this.ctx.storage.setAlarm(Math.max(next, Date.now() + 1000));
  }
}
