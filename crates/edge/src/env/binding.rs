//! Binding and secret names (`wrangler.toml`): the Durable Object
//! namespaces, the KV namespace, the queues and the D1 databases.

/// The `Ledger` Durable Object namespace.
pub const LEDGER: &str = "LEDGER";
/// The KV namespace of finished results.
pub const RESULTS: &str = "RESULTS";
/// The `ProviderHealth` Durable Object namespace (one breaker per provider).
pub const PROVIDER_HEALTH: &str = "PROVIDER_HEALTH";
/// The queue of background jobs.
pub const JOBS: &str = "JOBS";
/// The dead-letter queue.
pub const DEAD_LETTERS: &str = "DEAD_LETTERS";
/// The dead-letter queue's name (how its consumer tells its batches apart).
pub const DEAD_LETTERS_QUEUE: &str = "onejob-dead-letters";
/// The operators' D1 database.
pub const OPS: &str = "OPS";
/// The demo app's D1 database (the triage job type writes its rows there).
pub const TICKETS: &str = "TICKETS";
/// The `QueueCursor` Durable Object namespace (how far the jobs queue's consumer has got).
pub const QUEUE_CURSOR: &str = "QUEUE_CURSOR";
/// The `UsageMeter` Durable Object namespace (quotas).
pub const USAGE_METER: &str = "USAGE_METER";
