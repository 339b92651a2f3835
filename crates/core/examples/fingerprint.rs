//! Shows why two requests were judged the same or different.
//!
//! ```sh
//! echo '{"b":1e0,"a":"x"}' | cargo run -p onejob-core --example fingerprint -- POST /v1/chat/completions
//! ```
//!
//! Prints the body's RFC 8785 canonical JSON on the first line and the
//! request's fingerprint (hex) on the second. `--bytes` fingerprints the body
//! as raw bytes (what the edge does for non-JSON bodies); the first line then
//! says so.

use std::io::Read;
use std::process::ExitCode;

use onejob_core::identity::canonical::canonicalize;
use onejob_core::identity::fingerprint::{Body, Fingerprint};

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let raw = args.iter().any(|a| a == "--bytes");
    let positional: Vec<&String> = args.iter().filter(|a| !a.starts_with("--")).collect();
    let [method, path] = positional.as_slice() else {
        eprintln!("usage: fingerprint [--bytes] METHOD PATH < body");
        return ExitCode::from(2);
    };
    let mut body = Vec::new();
    if let Err(err) = std::io::stdin().read_to_end(&mut body) {
        eprintln!("fingerprint: cannot read the body from standard input: {err}");
        return ExitCode::from(1);
    }
    let (first_line, fingerprint) = if raw {
        let fp = Fingerprint::of_request(method, path, Body::Bytes(&body));
        (format!("({} bytes, hashed as bytes)", body.len()), fp)
    } else {
        match canonicalize(&body) {
            Ok(canonical) => (canonical, Fingerprint::of_request(method, path, Body::Json(&body))),
            Err(err) => {
                eprintln!("fingerprint: {err} (use --bytes for a body that is not JSON)");
                return ExitCode::from(1);
            }
        }
    };
    match fingerprint {
        Ok(fp) => {
            println!("{first_line}");
            println!("{fp}");
            ExitCode::SUCCESS
        }
        Err(err) => {
            eprintln!("fingerprint: {err}");
            ExitCode::from(1)
        }
    }
}
