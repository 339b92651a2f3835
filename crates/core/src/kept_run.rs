//! A job type's run as a job keeps it (`RunOf`, in its kept submission):
//! the type it runs and the subject it holds, as the deployment defines
//! them now. Above [`crate::ledger`] and [`crate::ledger_call`], so neither
//! imports the other.

use crate::job_type::{JobType, JobTypes};
use crate::ledger::subject::Subject;
use crate::ledger_call::RunOf;

/// The job type `run` runs: none for a job that is not a job type's (or
/// kept no request), or whose type is gone from the deployment (what it
/// still has runs nothing).
pub fn job_type<'t>(job_types: &'t JobTypes, run: Option<&RunOf>) -> Option<&'t JobType> {
    job_types.get(&run?.job_type)
}

/// The subject the job of `run` holds (`once_per`): none for a job that is
/// not a job type's, and as [`Subject::of`] says.
pub fn subject<'a>(job_types: &'a JobTypes, run: Option<&'a RunOf>) -> Option<Subject<'a>> {
    let run = run?;
    Subject::of(job_types, &run.job_type, &run.input)
}

#[cfg(test)]
mod tests {
    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    use serde_json::json;

    use super::*;

    /// A type `triage` run once per `ticket_id`, and a type `summary` with no subject.
    fn job_types() -> JobTypes {
        let output = json!({"type": "object"});
        let prompt = json!({"system": "s", "user": "u"});
        let input = json!({"type": "object", "properties": {"ticket_id": {}}});
        let triage =
            json!({"model": "demo", "once_per": "ticket_id", "input": input, "prompt": prompt, "output": output});
        let summary = json!({"model": "demo", "input": input, "prompt": prompt, "output": output});
        JobTypes::from_json(&json!({"triage": triage, "summary": summary}).to_string()).expect("job types")
    }

    fn run(job_type: &str) -> RunOf {
        RunOf { job_type: job_type.into(), input: json!({"ticket_id": "T-7"}) }
    }

    #[test]
    fn a_kept_run_names_its_type_while_the_deployment_defines_it() {
        let types = job_types();
        assert_eq!(job_type(&types, Some(&run("triage"))).map(|t| t.name.as_str()), Some("triage"));
        assert!(job_type(&types, Some(&run("gone"))).is_none(), "a type gone from the deployment");
        assert!(job_type(&types, None).is_none(), "not a job type's job");
    }

    #[test]
    fn only_a_job_types_job_holds_a_subject() {
        let types = job_types();
        let triage = run("triage");
        let held = subject(&types, Some(&triage)).expect("a subject");
        assert_eq!((held.type_name, held.subject.as_str()), ("triage", "T-7"));
        assert!(subject(&types, None).is_none(), "not a job type's job");
        assert!(subject(&types, Some(&run("summary"))).is_none(), "the type names none");
    }
}
