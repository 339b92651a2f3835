//! The demo.

mod provider;
pub mod routes;

pub use provider::{INBOX_URL, deliver_mail, inbox, mail_receipt, outage, respond, stream};
