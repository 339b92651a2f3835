// Types of the `onejob` package (every entry: browsers, Node, workerd, inline).
// Only names that both TypeScript's DOM lib and @types/node declare (`URL`,
// `Request`, `RequestInit`, `Response`), so the package checks in a browser
// project, a Node-only one (no DOM: no `RequestInfo`) and one with both.

/** What `fetch` takes as its first argument, in every runtime (DOM's `RequestInfo | URL`). */
export type FetchInput = string | URL | Request;

/**
 * Settles when the SDK's wasm can be used: at once in Node and workerd; in
 * browsers once it has been fetched and compiled (it starts at import).
 * `new OneJob()`, `oj.fetch()`, `oj.resume()` and `oj.forget()` never need
 * it; `fingerprint()` and `oj.intents()` throw a `OneJobError` before it.
 * Rejects with a `OneJobError` when the wasm cannot be loaded; the next
 * request (or `resume()`) then tries to load it again.
 */
export declare const ready: Promise<void>;

/**
 * The identity of a request, exactly as the gateway computes it (the same
 * core function): SHA-256 over the method, the URL's path and query (host and
 * fragment do not count), and the body's RFC 8785 canonical form, as 64
 * lower-case hex digits. A body that is not JSON is identified by its bytes.
 * Synchronous; no request is made. Needs {@link ready}.
 */
export declare function fingerprint(method: string, url: string, body?: string | null): string;

/** A onejob client. */
export declare class OneJob {
  /**
   * Creates a client; throws `OneJobConfigError` on a malformed option. (In a
   * browser before {@link ready}, the two checks of the retry policy that need
   * the wasm, `capMs ≥ baseMs` and a budget that affords a retry, reject every
   * request and `resume()` instead.)
   */
  constructor(options?: OneJobOptions | null);
  /** Like `fetch(input, init)`, with one idempotency key per intent. */
  fetch(input: FetchInput, init?: RequestInit | null, options?: FetchOptions | null): Promise<Response>;
  /** A plain `fetch`-compatible function bound to this client, for `new OpenAI({ fetch: oj.fetcher() })` and other SDKs. */
  fetcher(): (input: FetchInput, init?: RequestInit) => Promise<Response>;
  /** Re-sends every unresolved intent with its original key (after a reload, say) and resolves to their responses. */
  resume(): Promise<ResumedIntent[]>;
  /** Every remembered intent. Needs {@link ready}. */
  intents(): IntentRecord[];
  /** Forgets an intent (its next submission gets a new key). Returns whether it was remembered. */
  forget(intent: string): boolean;
  /** Where intents persist: "local" or "memory". */
  readonly storage: "local" | "memory";
  /** The endpoint relative inputs resolve against, if one was given. */
  readonly endpoint: string | undefined;
}
/** Options of `new OneJob(options)`. Every field is optional. */
export interface OneJobOptions {
  /**
   * Base URL that relative inputs go under, e.g. "https://gw.example.com" or
   * "https://example.com/api" (its path is kept: "/v1/chat/completions" goes to
   * "https://example.com/api/v1/chat/completions"; a trailing slash is ignored).
   * @defaultValue none: relative inputs resolve against the page (`location.href`), as `fetch` does; required where there is no page (Node, Cloudflare Workers). Must be an absolute URL. A gateway
   * under a path on the page's own origin needs it too: polls and stream resumes go under it
   */
  endpoint?: string;
  /**
   * Tenant key or user token, sent as `Authorization: Bearer <token>` unless
   * the request has its own `Authorization` header. Never persisted.
   * @defaultValue none (no `Authorization` header is added)
   */
  token?: string;
  /**
   * Where unresolved intents persist: "local" (`localStorage`: survives a
   * reload, throws `OneJobConfigError` where unusable), "memory" (this page
   * only) or "auto".
   * @defaultValue "auto": "local" when `localStorage` works, else "memory"
   */
  storage?: "auto" | "local" | "memory";
  /** Retry policy: full jitter `random(0, min(capMs, baseMs·2^n))` within a retry budget. */
  retry?: RetryOptions;
  /**
   * How long an intent's key is remembered, in milliseconds; match the
   * gateway's `RETENTION_SECONDS` (after it, the gateway has forgotten the key).
   * @defaultValue 86 400 000 (24 h)
   */
  retentionMs?: number;
  /**
   * Called synchronously for every event, for timelines and progress UIs.
   * An exception it throws is swallowed (it never breaks a request).
   * @defaultValue none
   */
  onEvent?: (event: OneJobEvent) => void;
}

/** `retry` of {@link OneJobOptions}. Every field is optional; times are in milliseconds. */
export interface RetryOptions {
  /**
   * Requests per `fetch()` call, the first included (an outage the browser
   * reports as offline costs none; see `offlineWaitMs`).
   * @defaultValue 4
   */
  maxAttempts?: number;
  /** Base of the backoff, in milliseconds (≥ 1). @defaultValue 500 */
  baseMs?: number;
  /** Largest backoff delay, in milliseconds (≥ baseMs). @defaultValue 20 000 */
  capMs?: number;
  /**
   * Longest `Retry-After` / `retry-after-ms` honoured, in milliseconds; a
   * longer one is cut to this.
   * @defaultValue 60 000
   */
  retryAfterCapMs?: number;
  /**
   * While the browser reports offline (`navigator.onLine === false`), a send
   * waits for the `online` event instead of spending attempts, then goes on
   * with the same key; this is the longest it waits in all, in milliseconds
   * (0: never wait). The caller's `signal` ends the wait at once.
   * @defaultValue 300 000 (5 minutes)
   */
  offlineWaitMs?: number;
  /**
   * Token bucket shared by every intent of this client (AWS's defaults): a
   * retry costs `retryCost` tokens (`timeoutRetryCost` after a timeout), a
   * success refunds `successRefund`; with too few tokens, no retry.
   * @defaultValue `{ capacity: 500, retryCost: 5, timeoutRetryCost: 10, successRefund: 1 }` (tokens)
   */
  budget?: { capacity?: number; retryCost?: number; timeoutRetryCost?: number; successRefund?: number };
}

/** Third argument of `oj.fetch`. */
export interface FetchOptions {
  /**
   * Names the intent (e.g. "triage:ticket-8812"): every submission under this
   * name reuses its key until a result was delivered.
   * @defaultValue unnamed: the intent is identified by the request's fingerprint
   */
  intent?: string;
  /**
   * Run it as a background job (`Prefer: respond-async`): the gateway queues
   * it and answers 202 at once; the returned promise resolves when the job
   * has finished (the SDK polls the job with full-jitter backoff, honouring
   * `Retry-After`), with the job's result. The intent survives a reload:
   * `resume()` follows it again.
   * @defaultValue false
   */
  background?: boolean;
}

/** Fields of every event. */
interface EventBase {
  /** The intent's id: its name, or `fp:<fingerprint>` when unnamed. */
  intent: string;
  /** The idempotency key every submission of the intent sends ("" on some warnings). */
  key: string;
  /** When it happened, in milliseconds since the Unix epoch (`Date.now()`). */
  at: number;
}
/** What `onEvent` receives, told apart by `type`. */
export type OneJobEvent =
  /** A request is being sent; `attempt` counts them for this intent (1 = the first), across reloads. */
  | (EventBase & { type: "attempt"; attempt: number })
  /** The SDK waits `delayMs` milliseconds before the next attempt; `serverAsked`: the delay is the server's `Retry-After`. */
  | (EventBase & { type: "backoff"; delayMs: number; reason: string; serverAsked: boolean })
  /** The gateway replayed a finished job's result (`Idempotent-Replayed: true`) with HTTP `status`. */
  | (EventBase & { type: "replayed"; status: number })
  /** A final answer with HTTP `status` is handed to the caller. */
  | (EventBase & { type: "settled"; status: number })
  /** Retries stopped (attempts or budget spent); `status` 0: no response at all. The key is kept for `resume()`. */
  | (EventBase & { type: "gave_up"; reason: string; status: number })
  /** The browser reports offline: the send waits for the network (no attempt is spent). */
  | (EventBase & { type: "offline" })
  /** The send goes on after waiting `waitedMs` milliseconds for the network (or for `offlineWaitMs` to pass). */
  | (EventBase & { type: "online"; waitedMs: number })
  /** Something the app should know, e.g. a stored record was unreadable or dropped for room. */
  | (EventBase & { type: "warning"; message: string });

/** What the client remembers of an intent (see `oj.intents()`); times in milliseconds since the Unix epoch. */
export interface IntentRecord {
  intent: string;
  key: string;
  /** The fingerprint (64 hex digits) of the request first submitted. */
  fingerprint: string;
  state: "pending" | "delivered" | "gave_up";
  /** Requests sent so far, across reloads. */
  attempts: number;
  created_ms: number;
  updated_ms: number;
  /** After this the record is dropped (the gateway's retention). */
  expires_ms: number;
  /** What `resume()` re-sends (never the credential). */
  request: { url: string; method: string; headers: [string, string][]; body: string | null } | null;
}

/** One entry of what `resume()` resolves to. */
export interface ResumedIntent { intent: string; key: string; response: Response }

/**
 * Errors onejob throws carry one of these names. An abort rejects with the
 * signal's reason (a DOMException named "AbortError" by default).
 */
export type OneJobErrorName = "OneJobConfigError" | "OneJobNetworkError" | "OneJobError";
/** `cause` holds the last underlying error (e.g. fetch's TypeError) when there is one. */
export interface OneJobError extends Error { name: OneJobErrorName; cause?: unknown }
