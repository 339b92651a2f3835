//! A job type's effects: the run as a machine ([`run`]), what follows a
//! job type's answer and the run's cadence ([`follow_up`]), and the
//! subject a job holds ([`subject`]).

pub mod follow_up;
pub mod run;
pub mod subject;
