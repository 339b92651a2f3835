//! The demo.

mod inbox;
mod provider;
pub mod routes;

pub use inbox::{deliver_mail, mail_receipt};
pub use provider::{outage, respond, stream};
