//! Bundles the job types of `jobs/*.json` (at the workspace's root) into the
//! worker: each file becomes `(name, definition)` in `BUNDLED_JOB_TYPES`,
//! read and checked by `onejob_core::job_type` when the worker starts.

use std::fmt::Write;
use std::path::Path;

fn main() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../jobs");
    println!("cargo:rerun-if-changed={}", dir.display());
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .map(|entries| entries.filter_map(Result::ok).map(|e| e.path()).collect())
        .unwrap_or_default();
    files.retain(|p| p.extension().is_some_and(|e| e == "json"));
    files.sort();
    let mut out = String::from("/// Job types bundled from `jobs/*.json`: (name, definition).\n");
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
