//! What a folder of job types needs of the deployment that bundles it.
//!
//! ```sh
//! cargo run -q -p onejob-core --example job-types -- jobs
//! ```
//!
//! Reads each `*.json` of the folder (as the worker's build bundles them:
//! the file's name is the type's) and prints, as JSON, each type's needs in
//! the core's words ([`onejob_core::job_type::JobType::needs`]): the
//! variable of each webhook's `env:` URL, each webhook's signing secret and
//! each d1 effect's database binding. No folder: no job types, `{}`. The
//! Makefile writes this beside every build of the worker (`job-types.json`),
//! and `make deploy-check` compares it with the deployment's configuration.
//! A definition the worker would refuse is refused here too (exit 1).

use std::process::ExitCode;

use onejob_core::job_type::JobTypes;
use serde_json::{Map, Value, json};

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let dir = match args.as_slice() {
        [] => None,
        [dir] if dir.trim().is_empty() => None,
        [dir] => Some(dir),
        _ => {
            eprintln!("usage: job-types [FOLDER]");
            return ExitCode::from(2);
        }
    };
    let mut definitions = Vec::new();
    if let Some(dir) = dir {
        let entries = match std::fs::read_dir(dir) {
            Ok(entries) => entries,
            Err(err) => {
                eprintln!("job-types: cannot read the folder {dir}: {err}");
                return ExitCode::from(1);
            }
        };
        let mut files: Vec<_> = entries.filter_map(Result::ok).map(|e| e.path()).collect();
        files.retain(|p| p.extension().is_some_and(|e| e == "json"));
        files.sort();
        for file in files {
            let Some(name) = file.file_stem().and_then(|s| s.to_str()).map(str::to_owned) else {
                eprintln!("job-types: {} has no UTF-8 name", file.display());
                return ExitCode::from(1);
            };
            match std::fs::read_to_string(&file) {
                Ok(text) => definitions.push((name, text)),
                Err(err) => {
                    eprintln!("job-types: cannot read {}: {err}", file.display());
                    return ExitCode::from(1);
                }
            }
        }
    }
    let borrowed: Vec<(&str, &str)> = definitions.iter().map(|(n, t)| (n.as_str(), t.as_str())).collect();
    let types = match JobTypes::from_definitions(&borrowed) {
        Ok(types) => types,
        Err(err) => {
            eprintln!("job-types: {err}");
            return ExitCode::from(1);
        }
    };
    let mut manifest = Map::new();
    for job_type in types.iter() {
        let needs: Vec<Value> = job_type.needs().iter().map(|s| json!({"kind": s.kind(), "name": s.name()})).collect();
        manifest.insert(job_type.name.clone(), json!({ "needs": needs }));
    }
    println!("{}", serde_json::to_string_pretty(&Value::Object(manifest)).expect("JSON values serialise"));
    ExitCode::SUCCESS
}
