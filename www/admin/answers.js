// What the admin API answers, as JSDoc types for the console's type check
// (`make test`'s console-types suite). Types only: no view imports this file
// at run time. Each mirrors the `Serialize` struct named beside it in
// crates/core (the JSON field names are the Rust field names).

/** @typedef {import("../states.js").JobState} JobState */

/**
 * A job of the jobs list (`admin_query::IndexedJob`); `GET jobs` answers a
 * page of them (`admin_query::JobsPage`).
 * @typedef {object} IndexedJob
 * @property {string} tenant
 * @property {string | null} user
 * @property {string} key
 * @property {JobState} state
 * @property {string | null} model
 * @property {string | null} provider the provider that answered last
 * @property {string | null} error_class
 * @property {number} attempts
 * @property {number} tokens
 * @property {number} cost_usd
 * @property {boolean} background
 * @property {number} created_ms
 * @property {number} updated_ms
 *
 * @typedef {{ jobs: IndexedJob[], next_cursor: string | null }} JobsPage
 */

/**
 * One attempt of a job (`job::Attempt`).
 * @typedef {object} Attempt
 * @property {number} number 1 for the first
 * @property {string} provider
 * @property {string | null} model
 * @property {number} started_ms
 * @property {number | null} ended_ms
 * @property {string} outcome `running`, `succeeded`, … (`job::AttemptOutcome`)
 * @property {number | null} status
 * @property {number | null} latency_ms
 * @property {{ prompt_tokens: number, completion_tokens: number, total_tokens: number } | null} usage
 * @property {string | null} error_class
 * @property {boolean} [streamed]
 * @property {number} [first_byte_ms]
 */

/**
 * What an operator did to a job (`job::OperatorEvent`).
 * @typedef {{ action: string, by: string, request: string, at_ms: number }} OperatorEvent
 */

/**
 * A job type's effect (`effect::Effect`).
 * @typedef {object} Effect
 * @property {string} name
 * @property {"d1" | "webhook"} kind
 * @property {string} delivery_id
 * @property {unknown} payload what is written or sent
 * @property {string} state `awaiting_approval`, `ready`, `claimed`, `done`, `dead`, `unknown`, `conflict`, `expired` (`effect::EffectState`)
 * @property {number} max_attempts
 * @property {{ number: number, started_ms: number, ended_ms: number | null, end: string | null, status: number | null, detail: string | null }[]} attempts
 * @property {{ expires_ms: number, approved_by: string | null, approved_ms: number | null } | null} approval
 * @property {unknown} receipt the proof it happened
 * @property {boolean} reconciled
 * @property {{ at_ms: number, what: string, by?: string }[]} events
 */

/**
 * A job as an operator sees it (`view::AdminJob`: the tenant's `JobView`,
 * whose it is and its stored answer): `GET jobs/{tenant}/{key}`.
 * @typedef {object} AdminJob
 * @property {string} key
 * @property {JobState} state
 * @property {string} fingerprint
 * @property {number} version
 * @property {number} created_ms
 * @property {number} updated_ms
 * @property {number} expires_ms
 * @property {number | null} lease_until_ms
 * @property {number | null} completed_by
 * @property {number} max_attempts
 * @property {Attempt[]} attempts
 * @property {boolean} background
 * @property {number} enqueued queue messages sent for it
 * @property {OperatorEvent[]} events
 * @property {boolean} waiting_for_operator
 * @property {Effect[]} [effects]
 * @property {string} [effects_state] `running`, `awaiting_approval`, `completed`, `partial_success`
 * @property {string} tenant
 * @property {string | null} user
 * @property {string | null} model
 * @property {{ status: number, content_type: string, body: string } | null} result its stored answer's first 64 KB
 */

/**
 * The report of a replay (`admin_route::ReplayReport`).
 * @typedef {object} ReplayReport
 * @property {{ key: string, tenant: string, user: string | null }[]} replayed
 * @property {{ key: string, tenant: string, reason: string | null, detail?: string }[]} skipped
 */

/**
 * A dead letter (`dead_letters::DeadLetter`): a job the queue gave up on.
 * @typedef {object} DeadLetter
 * @property {string} tenant
 * @property {string} [user]
 * @property {string} key
 * @property {string} error_class
 * @property {number | null} last_status
 * @property {string} detail
 * @property {number} attempts
 * @property {number} first_seen_ms
 * @property {number} last_seen_ms
 */

/**
 * `GET dead-letters` (`dead_letters::DeadLettersAnswer`): by cause, with
 * each cause's dead letters per hour over the last 24 h (oldest first).
 * @typedef {object} DeadLettersAnswer
 * @property {{ error_class: string, count: number, last_seen_ms: number, trend: number[] }[]} groups
 * @property {DeadLetter[]} entries
 */

/**
 * Which prices costs are estimated with (`admin_route::prices_note`).
 * @typedef {{ bundled_as_of: string, overridden: string[] }} PricesNote
 */

/**
 * One row of `GET costs` (`admin_query::costs_answer`): a tenant's or a model's.
 * @typedef {{ tenant?: string | null, model?: string | null, jobs: number, tokens: number, cost_usd: number }} CostRow
 * @typedef {{ by_tenant: CostRow[], by_model: CostRow[], since_ms: number, prices: PricesNote }} CostsAnswer
 */

/**
 * Saved next to spent (`savings::Figures`), for one tenant, model, bucket or all.
 * @typedef {object} Figures
 * @property {Record<AnswerKind, number> & { total: number }} answered_without_call
 * @property {number} upstream_calls_avoided
 * @property {number} tokens_saved
 * @property {number} cost_saved_usd
 * @property {number} jobs
 * @property {number} tokens
 * @property {number} cost_usd
 */

/**
 * An answer given without an upstream call (`savings::AnswerKind`).
 * @typedef {"kv_replay" | "ledger_replay" | "coalesced" | "keyless_join"} AnswerKind
 */

/**
 * `GET savings` (`savings::SavingsAnswer`): per tenant and model, the most
 * saved first, and per hour, oldest first.
 * @typedef {object} SavingsAnswer
 * @property {Figures} totals
 * @property {(Figures & { tenant: string })[]} by_tenant
 * @property {(Figures & { model: string | null })[]} by_model
 * @property {(Figures & { bucket_ms: number })[]} series
 * @property {number} since_ms the start of the hour asked from
 * @property {PricesNote} prices
 */

/**
 * `GET /onejob/v1/providers` (`provider_check::providers_page`): each
 * provider's breaker (`breaker::HealthView`) and the routes over them.
 * @typedef {"closed" | "open" | "half_open"} BreakerState
 * @typedef {object} ProviderHealth
 * @property {string} name
 * @property {string} kind
 * @property {boolean} breaker whether it has one
 * @property {BreakerState} state
 * @property {number} consecutive_failures
 * @property {number} calls
 * @property {number} failures
 * @property {number} error_rate
 * @property {number} retry_after_ms until the next probe may go
 * @property {{ from: BreakerState, to: BreakerState, at_ms: number }[]} transitions
 * @typedef {object} Route
 * @property {string} model
 * @property {{ provider: string, model: string | null }[]} providers in order
 * @property {number | null} hedge_after_ms
 * @property {boolean} contract
 * @typedef {{ providers: ProviderHealth[], routes: Route[] }} ProvidersPage
 */

export {};
