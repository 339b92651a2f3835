#!/usr/bin/env bash
# The client's size report, per part: rebuilds wasm-bindgen's output with its
# name section (the shipped file has none), aborts its panics and optimises it
# as the Makefile does but keeps the names (-g), and prints wasm-top's largest
# functions and bytes per crate/module. Used by `make build-client`.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
source "$root/scripts/.env"
out="$root/target/size/report"
rm -rf "$out" && mkdir -p "$out"
wasm-bindgen --target web --out-dir "$out" --out-name onejob "$root/target/wasm32-unknown-unknown/sdk/onejob_client.wasm"
node "$root/scripts/wasm-abort-panics.mjs" "$out/onejob_bg.wasm" "$out/onejob_bg.wasm"
"$WASM_OPT_BIN" ${WASM_OPT_SDK:--Oz} -g $WASM_FEATURES "$out/onejob_bg.wasm" -o "$out/named.wasm"
node "$root/scripts/wasm-top.mjs" "$out/named.wasm" "${1:-12}"
