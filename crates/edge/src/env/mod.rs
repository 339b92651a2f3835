//! The worker's environment: the only code that reads `Env` (variables,
//! secrets, binding names), the clock (`Date`, timers) and `Math.random`;
//! the core takes all of them as arguments.
//!
//! - [`config`]: the deployment's configuration, parsed once per isolate;
//! - [`binding`]: binding and secret names (`wrangler.toml`);
//! - [`clock`]: now, and a timer any task can await;
//! - [`random`]: the `RandomSource` for jitter;
//! - [`budgets`]: the per-tenant retry budgets of this isolate;
//! - [`faults`]: the tests' fault injection (a no-op without the `faults`
//!   feature).
//!
//! May import: the core only. One known exception: [`config`] accepts the
//! demo inbox's `"demo:inbox"` sentinel as an effect URL
//! (`crate::demo::INBOX_URL`), removed by `EffectTarget::Inbox` in the core.

pub mod binding;
pub mod budgets;
pub mod clock;
pub mod config;
pub mod faults;
pub mod random;
