//! The `Prefer` request header (RFC 7240): `respond-async` (a background
//! job) and `wait=N` (how long to wait for an in-flight job).

/// Whether a `Prefer` header asks for `respond-async` (a background job).
pub fn prefers_async(prefer: &str) -> bool {
    prefer
        .split(',')
        .any(|pref| pref.split(';').next().is_some_and(|name| name.trim().eq_ignore_ascii_case("respond-async")))
}

/// Reads `wait=N` (seconds) from a `Prefer` header, e.g. `respond-async, wait=5`.
pub fn prefer_wait_seconds(prefer: &str) -> Option<u64> {
    prefer.split(',').find_map(|pref| {
        let (name, value) = pref.split_once('=')?;
        name.trim().eq_ignore_ascii_case("wait").then(|| value.trim().trim_matches('"').parse().ok())?
    })
}

#[cfg(test)]
mod tests {
    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    use super::*;

    #[test]
    fn prefer_wait() {
        assert_eq!(prefer_wait_seconds("wait=5"), Some(5));
        assert_eq!(prefer_wait_seconds("respond-async, WAIT = 0"), Some(0));
        assert_eq!(prefer_wait_seconds("return=minimal"), None);
        assert_eq!(prefer_wait_seconds("wait=soon"), None);
    }
}
