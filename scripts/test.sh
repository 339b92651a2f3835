#!/usr/bin/env bash
# Runs every test suite of onejob and prints, per suite and in total, how many
# tests passed and failed. Called by `make test` after scripts/bootstrap.sh.
set -uo pipefail
cd "$(dirname "$0")/.."
source scripts/.env

mkdir -p target/test-logs
declare -a names=() passed=() failed=()
status=0

sum_of() { # WORD LOG: adds up "N WORD" over the log's "test result:" lines
  grep -E '^test result' "$2" | sed -E "s/.* ([0-9]+) $1.*/\\1/" | awk '{ s += $1 } END { print s + 0 }'
}

# run NAME COMMAND...: runs one suite, tees its output to a log, and sums its
# libtest-style "test result:" lines (cargo test and wasm-bindgen-test-runner
# both print them).
run() {
  local name=$1; shift
  local log="target/test-logs/$name.log"
  echo "=== $name: $*"
  "$@" 2>&1 | tee "$log" | grep -E '^(test result|running|error|failures|---- |thread |.*panicked)' || true
  local rc=${PIPESTATUS[0]}
  local p f
  p=$(sum_of passed "$log"); f=$(sum_of failed "$log")
  if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then f=1; echo "$name: exited $rc (see $log)"; fi
  [ "$rc" -eq 0 ] || status=1
  names+=("$name"); passed+=("$p"); failed+=("$f")
}

run core-native cargo test -p onejob-core --all-targets
run core-wasm32 env CARGO_TARGET_WASM32_UNKNOWN_UNKNOWN_RUNNER=wasm-bindgen-test-runner \
  cargo test -p onejob-core --target wasm32-unknown-unknown --lib --tests
run core-doc cargo test -p onejob-core --doc
run examples bash scripts/test-examples.sh

# Not tests, but proof the tool chain works end to end: the worker through
# worker-build and the client through wasm-bindgen, with their sizes.
echo "=== build: worker and client for wasm32"
make -s build-edge build-client || { echo "build: FAILED"; status=1; }

echo
echo "=== summary"
total_p=0; total_f=0
for i in "${!names[@]}"; do
  printf '%-14s %4d passed, %d failed\n' "${names[$i]}:" "${passed[$i]}" "${failed[$i]}"
  total_p=$((total_p + passed[i])); total_f=$((total_f + failed[i]))
done
echo "$total_p passed, $total_f failed"
exit $status
