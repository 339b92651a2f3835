//! A job type's subject (`once_per`) as the Ledger holds it: which subject
//! a job holds, what a claim of it answers, and when an expiring job frees it.
//!
//! A new job of a type with `once_per` claims its subject first; a job that
//! ends without an answer frees it (a new job may run it), an answered one
//! keeps it for good (a triaged ticket is not triaged again, also after its
//! job is deleted).

use serde_json::Value;

use crate::job::Job;
use crate::job_type::{JobType, JobTypes};
use crate::ledger::effects::follow_up::{Ended, Held};
use crate::wire::{Problem, ProblemType};

/// The subject a job of a type holds.
#[derive(Debug, Clone)]
pub struct Subject<'a> {
    /// The job's type, as the deployment defines it now.
    pub job_type: &'a JobType,
    /// Its name (the job's `run.job_type`).
    pub type_name: &'a str,
    /// The subject its input names.
    pub subject: String,
}

impl<'a> Subject<'a> {
    /// The subject of a job of type `type_name` with `input`: `None` when
    /// the type is gone from the deployment, names no subject, or the input
    /// has none (no claim is made then, and none is freed).
    pub fn of(job_types: &'a JobTypes, type_name: &'a str, input: &Value) -> Option<Self> {
        let job_type = job_types.get(type_name)?;
        let subject = job_type.subject_of(input)?;
        Some(Self { job_type, type_name, subject })
    }

    /// The hold of the job on it, as its follow-up frees it or marks it answered.
    pub fn held(&self) -> Held {
        Held { type_name: self.type_name.to_owned(), subject: self.subject.clone() }
    }

    /// What a claim of it by the job under `key` (of `caller_user`)
    /// answers: `None`, the job may run; else the refusal. `claimed` is the
    /// claim's outcome: free (or this job's), held by another job (its
    /// user and key), or not known (the check failed: nothing runs, the
    /// caller retries with the same key).
    pub fn refusal<E>(
        &self,
        claimed: Result<Option<(&str, &str)>, E>,
        key: &str,
        caller_user: Option<&str>,
    ) -> Option<Problem> {
        match claimed {
            Ok(None) => None,
            Ok(Some(holder)) => {
                Some(self.job_type.subject_taken(self.type_name, &self.subject, key, holder, caller_user))
            }
            Err(_) => Some(
                Problem::new(ProblemType::Internal, "the job type's subject could not be checked; retry")
                    .with_key(key)
                    .with_retry_after_ms(1_000),
            ),
        }
    }
}

/// Whether a job that expires frees its subject: one without its answer
/// would otherwise hold it for good; an answered one keeps it. `None`: the
/// job is gone (or unreadable), so it has no answer either.
pub fn freed_at_expiry(job: Option<&Job>) -> bool {
    !job.and_then(Ended::of_job).is_some_and(|ended| ended.answered())
}

#[cfg(test)]
mod tests;
