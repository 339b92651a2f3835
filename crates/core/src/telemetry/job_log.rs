//! The log lines a job's writes print (`JOB_LOGS=json`): which, and when.
//! Their shape is [`crate::telemetry::log`]'s; the Ledger prints them.

use crate::config::settings::JobLogs;
use crate::identity::key::StorageId;
use crate::job::Job;
use crate::telemetry::{self, log::JobLog};

/// The job's log lines as its writes print them: with `JOB_LOGS=json`, a
/// line per transition and ended attempt; nothing otherwise (nothing is
/// built either).
#[derive(Debug, Clone, Default)]
pub struct Logging(Option<JobLog>);

impl Logging {
    /// The log of the job of `tenant` under `storage_id` as `setting` asks,
    /// from the job as stored (`None`: not written yet). The storage id (a
    /// digest) is derived only when logging: not on every drive.
    pub fn of(setting: JobLogs, tenant: &str, storage_id: impl FnOnce() -> StorageId, stored: Option<&Job>) -> Self {
        Self((setting == JobLogs::Json).then(|| JobLog::new(tenant, &telemetry::key_digest(&storage_id()), stored)))
    }

    /// The lines a write of `job` prints: what it changed once it is
    /// written; a write that lost changed nothing.
    pub fn written<L>(&mut self, job: &Job, written: &Result<(), L>) -> Vec<String> {
        match (&mut self.0, written) {
            (Some(log), Ok(())) => log.lines(job),
            _ => Vec::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    use super::*;
    use crate::identity::fingerprint::Fingerprint;
    use crate::identity::key::IdempotencyKey;
    use crate::job::{JobPolicy, UnknownPolicy};

    fn job() -> Job {
        let policy = JobPolicy::new(3, 1_000, 5_000, 86_400_000, UnknownPolicy::RetryAfterLease).unwrap();
        Job::new(Fingerprint::of_bytes("POST", "/v1/chat/completions", b"{}"), 1_700_000_000_000, policy)
    }

    fn storage_id() -> StorageId {
        StorageId::derive("tenant", &IdempotencyKey::parse("0123456789abcdef").unwrap())
    }

    #[test]
    fn a_write_prints_its_lines_only_when_logging_and_written() {
        let mut off = Logging::of(JobLogs::Off, "t", || unreachable!("not derived when not logging"), None);
        let mut on = Logging::of(JobLogs::Json, "t", storage_id, None);
        let job = job();
        assert!(off.written(&job, &Ok::<(), ()>(())).is_empty());
        assert!(on.written(&job, &Err::<(), _>(None::<Job>)).is_empty());
        let lines = on.written(&job, &Ok::<(), ()>(()));
        assert_eq!(lines.len(), 1, "{lines:?}");
        assert!(lines[0].contains("\"transition\""), "{}", lines[0]);
        // Printed once: the same job written again changed nothing.
        assert!(on.written(&job, &Ok::<(), ()>(())).is_empty());
        assert!(Logging::default().written(&job, &Ok::<(), ()>(())).is_empty());
    }
}
