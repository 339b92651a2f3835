#!/usr/bin/env bash
# Runs every test suite of onejob and prints, per suite and in total, how many
# tests passed and failed. Called by `make test` after scripts/bootstrap.sh.
set -uo pipefail
cd "$(dirname "$0")/.."
source scripts/.env

mkdir -p target/test-logs
declare -a names=() passed=() failed=() skipped=()
status=0

sum_of() { # WORD LOG: adds up "N WORD" over the log's libtest "test result:"
  # lines and node's "ℹ pass N" / "ℹ fail N" / "ℹ skipped N" lines.
  local node_word=pass; [ "$1" = failed ] && node_word=fail; [ "$1" = skipped ] && node_word=skipped
  {
    grep -E '^test result' "$2" | sed -E "s/.* ([0-9]+) $1.*/\\1/"
    grep -E "^ℹ $node_word [0-9]+$" "$2" | awk '{ print $3 }'
  } | awk '{ s += $1 } END { print s + 0 }'
}

# run NAME COMMAND...: runs one suite, tees its output to a log, and counts
# its results (see sum_of). A suite that exits non-zero without a counted
# failure (a compile error, say) counts as one failure.
run() {
  local name=$1; shift
  local log="target/test-logs/$name.log"
  echo "=== $name: $*"
  # No `-e` here and no `|| true`: PIPESTATUS must be the suite's own status.
  "$@" 2>&1 | tee "$log" | grep -E '^(test result|running|error|failures|---- |thread |.*panicked|ℹ (pass|fail|skipped)|\s*✖|\s*﹣|abort during|package tarball|.*: error TS[0-9]+|simulation: )'
  local rc=${PIPESTATUS[0]}
  local p f s
  p=$(sum_of passed "$log"); f=$(sum_of failed "$log"); s=$(sum_of skipped "$log")
  if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then f=1; echo "$name: exited $rc (see $log)"; fi
  [ "$rc" -eq 0 ] || status=1
  names+=("$name"); passed+=("$p"); failed+=("$f"); skipped+=("$s")
}

# The worker and the client, built once for every suite that needs them
# (worker-build and wasm-bindgen), with their sizes. The worker three times:
# the production build with the demo's job types most suites run, the build
# with fault injection (cargo feature `faults`) for the edge tests that set
# its knobs (tests/support/worker.mjs, `faults: true`), and the deployment's
# build (no job type unless ONEJOB_JOB_TYPES names a folder) that the
# package ships (tests/package/deploy.test.mjs).
echo "=== build: worker (production, with faults, a deployment's) and client for wasm32"
make -s build-edge build-edge-test build-edge-deploy build-client || { echo "build: FAILED"; status=1; }

# Formatting is part of the code (rustfmt.toml): a diff fails the run.
run format cargo fmt --all -- --check
# The module graph of both crates (scripts/modgraph.mjs): no cycle in either,
# no import outside the edge's may-import table, and no core folder importing
# one listed after it in lib.rs's map.
run modgraph node --test --test-reporter=spec tests/modgraph.test.mjs
# Clippy's lints as errors, natively (the edge without its `faults` feature)
# and for wasm32 (the worker and the SDK as they ship, the edge with
# `faults`, so both sides of its cfg are linted).
clippy_all() {
  cargo clippy --workspace --all-targets -- -D warnings &&
    cargo clippy --workspace --all-targets --target wasm32-unknown-unknown --features onejob-edge/faults -- -D warnings
}
run clippy clippy_all
# The simulation (tests/simulation.rs) runs in its own suite below, once.
run core-native cargo test -p onejob-core --all-targets -- --skip simulation_
run core-wasm32 env CARGO_TARGET_WASM32_UNKNOWN_UNKNOWN_RUNNER=wasm-bindgen-test-runner \
  cargo test -p onejob-core --target wasm32-unknown-unknown --lib --tests
run core-doc cargo test -p onejob-core --doc
# The Ledger's deterministic simulation: 10,000 seeds, one summary line.
run simulation cargo test -p onejob-core --test simulation -- --nocapture
run examples bash scripts/test-examples.sh
# The edge's own logic that needs no runtime (the Ledger's drive lock),
# natively; then the fault injection's own tests, with the feature.
edge_native() {
  cargo test -p onejob-edge --lib && cargo test -p onejob-edge --lib --features faults faults::
}
run edge-native edge_native
run edge-workerd node --test --test-reporter=spec tests/edge/*.test.mjs
run client-node wasm-pack test --node crates/client -- --nocapture
# The SDK's JavaScript shell type-checked from its JSDoc (tsc --checkJs
# --strict, against the engine's types from the client build).
run sdk-types tsc -p crates/client/tsconfig.check.json
# The operations console's modules (www/admin/) and the job states' names
# it shares with the demo page (www/states.js), the same way: no build step.
run console-types tsc -p www/tsconfig.check.json
run sdk node --test --test-reporter=spec tests/sdk/*.test.mjs
run browser-e2e node --test --test-reporter=spec tests/browser/*.test.mjs
run package node --test --test-reporter=spec tests/package/*.test.mjs

echo
echo "=== summary"
total_p=0; total_f=0; total_s=0
for i in "${!names[@]}"; do
  # Skipped: tests that say why they did not run (the README blocks marked
  # <!-- snippet: skip (why) -->, tests/package/snippets.test.mjs).
  extra=""; [ "${skipped[$i]}" -gt 0 ] && extra=", ${skipped[$i]} skipped"
  printf '%-14s %4d passed, %d failed%s\n' "${names[$i]}:" "${passed[$i]}" "${failed[$i]}" "$extra"
  total_p=$((total_p + passed[i])); total_f=$((total_f + failed[i])); total_s=$((total_s + skipped[i]))
done
[ "$total_s" -eq 0 ] || echo "$total_s skipped, each with its reason in its suite's log"
echo "$total_p passed, $total_f failed"
exit $status
