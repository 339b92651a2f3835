//! What the Ledger holds in memory about who works on its job: the core's
//! [`Coordination`], shared by the object and the stream's pump (which
//! ends the drive it was handed).

use std::cell::RefCell;
use std::rc::Rc;

use onejob_core::ledger::coordination::Coordination;

use crate::api::handoff::Submission;

/// A background submission that arrived while a caller ran the job, with
/// its body: adopted if that run does not finish the job.
pub(crate) type AdoptLater = (Submission, Vec<u8>);

/// Who works on the job in this object.
pub(crate) type Memory = Rc<RefCell<Coordination<AdoptLater>>>;
