#!/usr/bin/env bash
# `make mutants`: how many bugs in the Ledger's sequencing and machines the
# simulation and the core's tests catch. Not part of `make test`.
#
#   bash scripts/mutants.sh            install, deliberate bugs, cargo-mutants
#   bash scripts/mutants.sh install    cargo-mutants at its pinned version, if missing
#   bash scripts/mutants.sh bugs       the deliberate bugs alone (scripts/deliberate-bugs.mjs)
#   bash scripts/mutants.sh mutants    cargo-mutants alone
#   bash scripts/mutants.sh list       the mutants cargo-mutants would test
#
# Nothing here touches the working tree: the sources (crates/, Cargo.*,
# jobs/, dev.vars.example, tracked or not, as they are on disk) are synced
# into target/mutants/src, where the bugs are applied and the mutants made
# (cargo-mutants --in-place there), built into target/mutants/target. The
# sync copies only what changed, so a second run rebuilds only that.
#
# The build is the dev profile at opt-level 1 without debug info (set
# through the environment, no profile file): the simulation runs its 10,000
# seeds in a few seconds, and a mutant rebuilds in tens of seconds.
#
# Knobs (environment):
#   MUTANTS_FILES="a.rs b.rs"  the files to mutate (paths from the root, or
#                              globs): default the Ledger's sequence and machines
#                              ($DEFAULT_FILES below); MUTANTS_FILES=all: every
#                              file of crates/core/src/ledger and crates/core/src/job
#   MUTANTS_RE=regex           only the mutants whose name matches (cargo-mutants --re)
#   MUTANTS_SHARD=k/n          one shard of them, every n-th mutant from the k-th
#   MUTANTS_JOBS=2             mutants built and tested at once (1: in place in
#                              the scratch copy, whose build is kept)
#   MUTANTS_ARGS="--shuffle"   more options for cargo-mutants
#   MUTANTS_SEEDS=2000         the simulation's seeds for each mutant
#   MUTANTS_TIMEOUT=s          a test run's timeout (default: 5 × the baseline's, at least 20 s)
#   BUGS=a,c                   only these deliberate bugs; SEEDS=N the simulation's seeds
#   CARGO_BUILD_JOBS=1         leave a core free
#
# Prints `deliberate bugs: …` and
# `mutants: N tested, caught C, missed M, timeout T, unviable U`, how many
# the simulation caught, then the missed and timed-out mutants (file:line:
# the mutation; scripts/mutants-summary.mjs); target/mutants/mutants.out has
# every log. Fails if a deliberate bug is not caught; missed mutants are a
# report, not a failure.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
tools=${ONEJOB_TOOLS:-$HOME/.cache/onejob/tools}
export PATH="$tools/bin:$HOME/.cargo/bin:$PATH"
[ -f "$root/scripts/.env" ] && source "$root/scripts/.env"

MUTANTS_VERSION=27.1.0
work=$root/target/mutants
scratch=$work/src
export CARGO_TARGET_DIR=$work/target
export CARGO_PROFILE_DEV_OPT_LEVEL=1 CARGO_PROFILE_DEV_DEBUG=0 CARGO_TERM_COLOR=never

# The Ledger's sequence and machines in core (their #[cfg(test)] modules
# are skipped by cargo-mutants).
DEFAULT_FILES="
crates/core/src/ledger/background/delivery_machine.rs
crates/core/src/ledger/background/wake.rs
crates/core/src/ledger/background/tending.rs
crates/core/src/ledger/background/outbox.rs
crates/core/src/ledger/background/delivery.rs
crates/core/src/ledger/request/submit.rs
crates/core/src/ledger/request/admission.rs
crates/core/src/ledger/request/drive.rs
crates/core/src/job/race.rs
"

# In delivery.rs, the queue consumer's side (what it does to a message once
# the Ledger answered, which queue a batch is from) is not the Ledger's: its
# unit tests cover it, and it is left out of the default set.
CONSUMER_RE='in (Queue::|on_verdict|after_dead_letter|after_record|redelivery_delay_s)|delivery\.rs:[0-9]+:[0-9]+: replace (Queue::|on_verdict|after_dead_letter|after_record|redelivery_delay_s)'

say() { printf 'mutants: %s\n' "$*"; }

install() {
  local have=""
  if [ -x "$tools/bin/cargo-mutants" ]; then
    have=$("$tools/bin/cargo-mutants" mutants --version 2>/dev/null | grep -oE '[0-9]+\.[0-9]+\.[0-9]+' | head -1 || true)
  fi
  if [ "$have" != "$MUTANTS_VERSION" ]; then
    say "installing cargo-mutants $MUTANTS_VERSION (found: ${have:-none}); this takes a few minutes"
    cargo install --locked --quiet --root "$tools" --force "cargo-mutants@$MUTANTS_VERSION"
  fi
}

# The sources, as on disk, into $scratch: a file is copied only when it
# differs (so cargo rebuilds only what changed), and one gone is removed.
sync_scratch() {
  local list
  list=$(mktemp)
  git -C "$root" ls-files -co --exclude-standard -- Cargo.toml Cargo.lock rustfmt.toml crates jobs dev.vars.example \
    | while IFS= read -r f; do [ -f "$root/$f" ] && printf '%s\n' "$f"; done | sort > "$list"
  mkdir -p "$scratch"
  while IFS= read -r f; do
    if ! cmp -s "$root/$f" "$scratch/$f"; then
      mkdir -p "$scratch/$(dirname "$f")"
      cp "$root/$f" "$scratch/$f"
    fi
  done < "$list"
  (cd "$scratch" && find . -type f -not -path './mutants.out*' | sed 's|^\./||' | sort) | comm -23 - "$list" \
    | while IFS= read -r f; do rm -f "$scratch/$f"; done
  rm -f "$list"
}

bugs() {
  sync_scratch
  node "$root/scripts/deliberate-bugs.mjs" "$scratch"
}

mutant_args() {
  local files=${MUTANTS_FILES:-$DEFAULT_FILES}
  [ "$files" = all ] && files="crates/core/src/ledger/** crates/core/src/job/**"
  args=(--dir "$scratch" --no-config -p onejob-core --colors never)
  for f in $files; do args+=(--file "$f"); done
  [ -n "${MUTANTS_RE:-}" ] && args+=(--re "$MUTANTS_RE")
  [ -z "${MUTANTS_FILES:-}" ] && args+=(--exclude-re "$CONSUMER_RE")
  [ -n "${MUTANTS_SHARD:-}" ] && args+=(--shard "$MUTANTS_SHARD" --sharding round-robin)
  # Any other option of cargo-mutants (e.g. --shuffle).
  [ -n "${MUTANTS_ARGS:-}" ] && read -ra extra <<< "$MUTANTS_ARGS" && args+=("${extra[@]}")
  return 0
}

list() {
  sync_scratch
  mutant_args
  cargo mutants "${args[@]}" --list
}

mutants() {
  sync_scratch
  mutant_args
  # The simulation's seeds for each mutant: fewer than `make test`'s, as a
  # failing run goes through all of them (every deliberate bug above fails
  # before seed 300).
  export SEEDS=${MUTANTS_SEEDS:-2000}
  # The core's unit tests and its integration tests (the simulation among
  # them): no doctests, no examples.
  # Every test binary runs (--no-fail-fast), so each caught mutant's log
  # says whether the simulation caught it too.
  args+=(--cargo-arg=--lib --cargo-arg=--tests --cargo-test-arg=--no-fail-fast --output "$work")
  # One job: in place in the scratch copy, whose build (target/mutants/target)
  # the next run reuses. More: cargo-mutants copies the scratch once per job,
  # each built in its own copy (each builds the dependencies first).
  local jobs=${MUTANTS_JOBS:-2}
  if [ "$jobs" -le 1 ]; then
    args+=(--in-place)
  else
    args+=(--jobs "$jobs")
  fi
  if [ -n "${MUTANTS_TIMEOUT:-}" ]; then
    args+=(--timeout "$MUTANTS_TIMEOUT")
  else
    args+=(--minimum-test-timeout 20)
  fi
  local status=0
  if [ "$jobs" -le 1 ]; then
    cargo mutants "${args[@]}" || status=$?
    # A run stopped mid-build can leave the core's incremental state broken
    # (the baseline then fails to link): once more without it.
    if [ "$status" = 4 ]; then
      say "the baseline failed: again, without the core's incremental build state"
      rm -rf "$CARGO_TARGET_DIR"/debug/incremental/onejob_core-* "$CARGO_TARGET_DIR"/debug/incremental/simulation-*
      status=0
      cargo mutants "${args[@]}" || status=$?
    fi
  else
    env -u CARGO_TARGET_DIR cargo mutants "${args[@]}" || status=$?
  fi
  # 0: all caught; 2: some missed; 3: some timed out; anything else failed.
  case $status in 0|2|3) ;; *) say "cargo-mutants failed (exit $status)"; return "$status" ;; esac
  node "$root/scripts/mutants-summary.mjs" "$work/mutants.out"
}

case ${1:-all} in
  install) install ;;
  bugs) bugs ;;
  mutants) install; mutants ;;
  list) install; list ;;
  all)
    install
    bugs_status=0
    bugs || bugs_status=$?
    mutants
    exit "$bugs_status"
    ;;
  *) echo "usage: $0 [install|bugs|mutants|list]" >&2; exit 2 ;;
esac
