// The SDK tests of sdk.rs again, in headless Chromium.
wasm_bindgen_test::wasm_bindgen_test_configure!(run_in_browser);

include!("sdk.rs");
