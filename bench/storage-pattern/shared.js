// What the storage-pattern workers of `make bench` share (bench/storage-pattern,
// bench/sharded): onejob's Ledger schema (crates/edge/src/ledger/store.rs),
// a job record about the size of onejob's, the readiness route.

/** The job's one table, as store.rs creates it on a job's first write (core's `job_table!`). */
export const JOB_TABLE = `CREATE TABLE IF NOT EXISTS job (id INTEGER PRIMARY KEY CHECK (id = 1), version INTEGER NOT NULL, record TEXT NOT NULL,
  meta TEXT, attempt INTEGER, status INTEGER, content_type TEXT, body BLOB)`;
/** The tables of a response not kept in the job's row (over 256 KB), created when first written. */
export const RESPONSE_TABLES = `CREATE TABLE IF NOT EXISTS responses (attempt INTEGER PRIMARY KEY, status INTEGER NOT NULL, content_type TEXT NOT NULL, size INTEGER NOT NULL, streamed INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS response_chunks (attempt INTEGER NOT NULL, seq INTEGER NOT NULL, bytes BLOB NOT NULL, PRIMARY KEY (attempt, seq))`;
export const CHUNK = 256 * 1024;
export const RETENTION_MS = 86_400_000;
/** A job record about the size of onejob's (its JSON), at `version` with `attempts`. */
export const jobRecord = (version, attempts, now) =>
  JSON.stringify({ version, state: attempts.length ? "completed" : "in_flight", fingerprint: "f".repeat(64), created_ms: now, expires_ms: now + RETENTION_MS,
    policy: { max_attempts: 4, unknown_lease_ms: 60000, retention_ms: RETENTION_MS, unknown: "retry_after_lease" }, attempts });
export const ready = (url) => url.pathname === "/onejob/problems/not-found" && new Response("ready");


/** The upstream call both patterns make: the request's body and key, forwarded. */
export async function forward(env, request, body) {
  const target = env.UPSTREAM.replace(/\/$/, "") + new URL(request.url).pathname.replace(/^\/v1/, "");
  const headers = { "Content-Type": "application/json", "Idempotency-Key": request.headers.get("Idempotency-Key") };
  const upstream = await fetch(target, { method: "POST", headers, body });
  return { status: upstream.status, type: upstream.headers.get("Content-Type") ?? "application/json", answer: new Uint8Array(await upstream.arrayBuffer()) };
}

/** The answer, to the caller (and as the KV entry's metadata). */
export const answered = ({ status, type, answer }) => new Response(answer, { status, headers: { "Content-Type": type } });

/** The usage of an attempt, in the job record. */
export const attemptOf = (status, now) => [{ number: 1, started_ms: now, status, usage: { prompt_tokens: 10, completion_tokens: 5 } }];
