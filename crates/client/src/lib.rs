//! Browser SDK of onejob. The SDK itself arrives with the client issue; this
//! crate already builds for wasm32 so the tool chain is proven end to end.
use wasm_bindgen::prelude::*;

/// The version of the core protocol this build speaks.
#[wasm_bindgen]
pub fn version() -> String {
    env!("CARGO_PKG_VERSION").to_string()
}
