//! Everything of the built-in demo, so that trying onejob needs no API key:
//! a fake provider that speaks three APIs and misbehaves on purpose
//! ([`provider`]), a mail inbox in D1 for the triage job type's mail effect
//! ([`inbox`]), and the demo page's routes ([`routes`]). The items below are
//! all the rest of the worker uses of it.
//!
//! Imported one way only, by `upstream` (the provider), `effects` (the
//! inbox) and `routes` (the demo's routes); `env::config` also accepts the
//! inbox's URL (removed by `EffectTarget::Inbox`). May import: `env`,
//! `answer`, `http` and the core.

mod inbox;
mod provider;
pub mod routes;

pub use inbox::{deliver_mail, mail_receipt};
pub use provider::{answer, pace};
