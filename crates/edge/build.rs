//! Bundles a deployment's job types into the worker: each `*.json` of the
//! folder `ONEJOB_JOB_TYPES` names becomes `(name, definition)` in
//! `BUNDLED_JOB_TYPES`, read and checked by `onejob_core::job_type` when the
//! worker starts. A relative folder is taken from the workspace's root.
//! Unset or empty: none (a build no one named job types for has none).
//! The Makefile names `jobs/` (the demo's) for the builds `make dev` and the
//! tests run, and the deployment's own folder (or none) for `make package`.

use std::fmt::Write;
use std::path::{Path, PathBuf};

/// The variable naming the folder of job types.
const JOB_TYPES_VAR: &str = "ONEJOB_JOB_TYPES";

fn main() {
    println!("cargo:rerun-if-env-changed={JOB_TYPES_VAR}");
    let named = std::env::var(JOB_TYPES_VAR).unwrap_or_default();
    let mut files: Vec<PathBuf> = Vec::new();
    let mut from = String::from("none");
    if !named.trim().is_empty() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
        let dir = root.join(named.trim());
        // The folder itself, so that a removed or added file is seen too.
        println!("cargo:rerun-if-changed={}", dir.display());
        let entries = std::fs::read_dir(&dir).unwrap_or_else(|e| {
            panic!("{JOB_TYPES_VAR}={named}: cannot read the folder of job types {}: {e}", dir.display())
        });
        files = entries.filter_map(Result::ok).map(|e| e.path()).collect();
        files.retain(|p| p.extension().is_some_and(|e| e == "json"));
        files.sort();
        from = format!("`{}`", named.trim());
    }
    let mut out = format!("/// Job types bundled from {from}: (name, definition).\n");
    out.push_str("pub const BUNDLED_JOB_TYPES: &[(&str, &str)] = &[\n");
    for file in files {
        println!("cargo:rerun-if-changed={}", file.display());
        let name = file.file_stem().and_then(|s| s.to_str()).expect("a job type file's name is UTF-8");
        let path = file.canonicalize().expect("a job type file can be read");
        writeln!(out, "    ({name:?}, include_str!({:?})),", path.display().to_string()).unwrap();
    }
    out.push_str("];\n");
    let target = Path::new(&std::env::var("OUT_DIR").expect("cargo sets OUT_DIR")).join("job_types.rs");
    std::fs::write(target, out).expect("OUT_DIR is writable");
}
