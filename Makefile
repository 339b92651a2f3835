# onejob: `make dev` runs the product, `make test` runs every test.
# Both install what they need first (scripts/bootstrap.sh); nothing else is
# assumed on the machine beyond Rust (rustup), Node/npm and apt.

SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
ENV := source scripts/.env &&

.PHONY: dev dev-vars package deploy-check test bootstrap build build-edge build-edge-test build-edge-deploy build-client test-core test-core-wasm test-edge test-crash simulate mutants modgraph experiment bench bench-sdk bench-providers provider-check clean

bootstrap:
	@bash scripts/bootstrap.sh

# A recipe that fails removes the file it was making (a stamp below), so the
# next run builds again instead of taking a half-made artifact as current.
.DELETE_ON_ERROR:

## What each build is made from: make rebuilds an artifact only when one of
## these is newer than it (a clean clone has none, so everything is built).
## The core's sources are in both (its tests and examples in neither, but
## the example that writes each worker build's job-types.json);
## a folder of job types is bundled into the worker (build.rs; the folder
## too, so that a removed type is seen): jobs/ in the builds `make dev` and
## the tests run, the deployment's own (or none) in `make package`'s, below;
## crates/client/js is the SDK's JavaScript, its types and its README.
crate_files = $(shell find $(1) -type f \( -name '*.rs' -o -name Cargo.toml \))
CARGO_FILES := Cargo.toml Cargo.lock
CORE_SOURCES := $(call crate_files,crates/core/src) crates/core/Cargo.toml
EDGE_CODE := $(CARGO_FILES) $(CORE_SOURCES) $(call crate_files,crates/edge/src) crates/edge/Cargo.toml crates/edge/build.rs \
  crates/core/examples/job-types.rs
EDGE_SOURCES := $(EDGE_CODE) jobs $(wildcard jobs/*.json)

## Job types: build.rs bundles the *.json of the folder ONEJOB_JOB_TYPES
## names. The demo's (jobs/, the triage type) come with `make dev` and the
## tests; a deployment's build (`make package`, crates/edge/build-deploy)
## has the folder the deployment names, `make package
## ONEJOB_JOB_TYPES=path/to/folder`, or none (the default). Which folder the
## deployment's build was last asked for is kept in DEPLOY_JOB_TYPES_RECORD,
## rewritten only when another one (or none) is named, so that naming
## another rebuilds it.
DEMO_JOB_TYPES := $(CURDIR)/jobs
DEPLOY_JOB_TYPES := $(if $(strip $(ONEJOB_JOB_TYPES)),$(abspath $(strip $(ONEJOB_JOB_TYPES))))
DEPLOY_JOB_TYPES_RECORD := target/stamps/deploy-job-types
$(shell mkdir -p target/stamps && { [ -e $(DEPLOY_JOB_TYPES_RECORD) ] && [ "$$(cat $(DEPLOY_JOB_TYPES_RECORD))" = '$(DEPLOY_JOB_TYPES)' ] \
  || printf '%s\n' '$(DEPLOY_JOB_TYPES)' > $(DEPLOY_JOB_TYPES_RECORD); })
DEPLOY_SOURCES := $(EDGE_CODE) $(DEPLOY_JOB_TYPES_RECORD) $(if $(DEPLOY_JOB_TYPES),$(wildcard $(DEPLOY_JOB_TYPES) $(DEPLOY_JOB_TYPES)/*.json))
CLIENT_SOURCES := $(CARGO_FILES) $(CORE_SOURCES) $(call crate_files,crates/client/src) crates/client/Cargo.toml \
  $(shell find crates/client/js -type f) scripts/inline-entry.mjs scripts/wasm-abort-panics.mjs scripts/wasm-blank-panic-text.mjs scripts/wasm-short-names.mjs scripts/wasm-glue-loader.mjs

# Each build ends by writing its stamp, dated when the build started (so a
# source edited during the build is newer than it): a build that failed or
# was stopped leaves none, and runs again. The size reports print when a
# build runs, except under `make dev` (QUIET); the SDK's size bar always holds.
QUIET :=
# stamp_start NAME / stamp_done NAME TARGET
stamp_start = @mkdir -p target/stamps && touch target/stamps/$(1).start
stamp_done = @mv target/stamps/$(1).start $(2)

## build: the worker (worker-build) and the client's wasm, each built when
## its sources changed since its last build.
build: bootstrap build-edge build-client

# The worker, three times. build-edge is the production build with the
# demo's job types (crates/edge/build, wrangler.toml's `main`: what `make
# dev` and the tests run); build-edge-test adds the cargo feature `faults`,
# the fault injection some edge tests need (crates/edge/src/env/faults.rs),
# in crates/edge/build-test; build-edge-deploy is the production build with
# the deployment's job types (ONEJOB_JOB_TYPES, default none), in
# crates/edge/build-deploy: what `make package` packs and a deployment runs.
# Each ends with job-types.json beside the worker: what its job types need of
# a deployment, in the core's words (crates/core/examples/job-types.rs),
# which `make deploy-check` reads.
# A failed build fails the target and leaves no artifact to run: the old one
# is removed first (only when rebuilding), pipefail keeps worker-build's
# status (the filter never fails the pipe), a half-made one is removed, and
# no stamp is written.
# edge_build DIR CARGO-ARGS JOB-TYPES-FOLDER
define edge_build
	$(call stamp_start,edge-$(1))
	@rm -rf crates/edge/$(1)
	@$(ENV) cd crates/edge && ONEJOB_JOB_TYPES='$(3)' worker-build --release --out-dir $(1) $(2) 2>&1 | { grep -vE '^\s+(Compiling|Downloaded|Downloading)' || true; } \
	  && test -s $(1)/index_bg.wasm && test -s $(1)/index.js || { rm -rf $(1); echo "worker build failed"; exit 1; }
	@$(ENV) cargo run -q -p onejob-core --example job-types -- '$(3)' > crates/edge/$(1)/job-types.json \
	  || { rm -rf crates/edge/$(1); echo "worker build failed: its job types' needs (job-types.json)"; exit 1; }
endef
build-edge: crates/edge/build/.built
build-edge-test: crates/edge/build-test/.built
build-edge-deploy: crates/edge/build-deploy/.built
crates/edge/build/.built: $(EDGE_SOURCES)
	$(call edge_build,build,,$(DEMO_JOB_TYPES))
	@$(if $(QUIET),,bash scripts/size.sh crates/edge/build/index_bg.wasm crates/edge/build/index.js)
	$(call stamp_done,edge-build,$@)
crates/edge/build-test/.built: $(EDGE_SOURCES)
	$(call edge_build,build-test,--features faults,$(DEMO_JOB_TYPES))
	$(call stamp_done,edge-build-test,$@)
crates/edge/build-deploy/.built: $(DEPLOY_SOURCES)
	@$(if $(DEPLOY_JOB_TYPES),test -d '$(DEPLOY_JOB_TYPES)' || { echo "ONEJOB_JOB_TYPES=$(ONEJOB_JOB_TYPES): no such folder of job types"; exit 1; })
	$(call edge_build,build-deploy,,$(DEPLOY_JOB_TYPES))
	$(call stamp_done,edge-build-deploy,$@)

# The npm package `onejob`: wasm-pack (web target) + npm binaryen's wasm-opt,
# then the hand-written entries (browser, node, workerd) from crates/client/js.
# The demo page serves a copy from www/sdk/.
WASM_FEATURES := --enable-bulk-memory --enable-nontrapping-float-to-int --enable-sign-ext \
  --enable-mutable-globals --enable-reference-types --enable-multivalue
WASM_OPT_SDK := --low-memory-unused --flatten --rereloop -Oz -Oz
# What a browser downloads for the default entry: the wasm and the entry (glue and shell bundled in).
SDK_FILES := $(addprefix crates/client/pkg/,onejob_bg.wasm index.js)
build-client: crates/client/pkg/.built
crates/client/pkg/.built: $(CLIENT_SOURCES)
	$(call stamp_start,client)
	@rm -rf crates/client/pkg www/sdk www/onejob
	@# Shorter panic locations in the data section: file paths without the
	@# toolchain's and the registry's prefixes.
	@$(ENV) RUSTFLAGS="--remap-path-prefix=$$HOME/.cargo/registry/src/= --remap-path-prefix=/rustc/$$(rustc -vV | sed -n 's/^commit-hash: //p')/library/=" \
	  wasm-pack --quiet build crates/client --profile sdk --target web --out-dir pkg --out-name onejob --no-pack 2>&1 \
	  | { grep -v 'failed to get wasm-pack version' || true; }
	@test -s crates/client/pkg/onejob_bg.wasm || { echo "client build failed"; exit 1; }
	@# A panic traps at once (std's panic entry points become `unreachable`),
	@# so core::fmt, reached only through the panic hook, is left out.
	@$(ENV) node scripts/wasm-abort-panics.mjs crates/client/pkg/onejob_bg.wasm crates/client/pkg/onejob_bg.wasm
	@# Flattened and re-relooped before -Oz twice: 176 B gzip less than -Oz alone.
	@# --low-memory-unused (the first 1 KB of memory is never used: Rust's data
	@# starts at 1 MiB, its stack grows down from there) lets wasm-opt fold
	@# constant offsets into loads and stores (173 B gzip); the target_features
	@# section is only for linkers (122 B gzip).
	@$(ENV) "$$WASM_OPT_BIN" $(WASM_OPT_SDK) --strip-debug --strip-producers --strip-target-features $(WASM_FEATURES) \
	  crates/client/pkg/onejob_bg.wasm -o crates/client/pkg/onejob_bg.wasm
	@# The panic messages and source paths no running code reads any more,
	@# zeroed in place (checked: the build fails if live code names one).
	@$(ENV) node scripts/wasm-blank-panic-text.mjs crates/client/pkg/onejob_bg.wasm crates/client/pkg/onejob_bg.wasm
	@# The wasm's imports and exports get one- or two-letter names, in the
	@# glue and its types too (no app or shell code calls them by name).
	@$(ENV) node scripts/wasm-short-names.mjs crates/client/pkg
	@# The glue also exports its import object and its last loading step, so
	@# the browser entry instantiates the wasm itself (a few lines, not init's).
	@$(ENV) node scripts/wasm-glue-loader.mjs crates/client/pkg
	@cp crates/client/js/*.* crates/client/pkg/
	@# The shell (js/sdk.js and its modules under js/sdk/) as one module.
	@$(ENV) esbuild crates/client/js/sdk.js --bundle --format=esm --log-level=warning --outfile=crates/client/pkg/sdk.js
	@# Minified: what a page without a bundler downloads is what it runs. The
	@# public names (OneJob.name, fingerprint.name) are set by sdk.js itself,
	@# not by --keep-names, which costs 630 B gzip. The browser entry is one
	@# file (glue and shell bundled in), so such a page asks for the wasm after
	@# one round trip instead of two; the other entries import the glue and the
	@# shell. It is bundled by esbuild and minified by terser (three compress
	@# passes: 390 B gzip less than esbuild's --minify). The glue's own
	@# properties on the engine's objects (the pointer, and the two helpers
	@# that wrap and unwrap it) get short names too: nothing outside the
	@# bundle sees them (39 B gzip).
	@$(ENV) esbuild crates/client/pkg/index.js --bundle --format=esm --log-level=warning \
	  --outfile=crates/client/pkg/index.bundle.js
	@$(ENV) terser crates/client/pkg/index.bundle.js --module --ecma 2022 --compress passes=3 --mangle \
	  --mangle-props 'regex=/^(__wbg_ptr|__destroy_into_raw|__wrap)$$/' \
	  -o crates/client/pkg/index.js && rm crates/client/pkg/index.bundle.js
	@for f in onejob sdk; do $(ENV) esbuild crates/client/pkg/$$f.js --minify --format=esm --log-level=warning \
	  --outfile=crates/client/pkg/$$f.min.js && mv crates/client/pkg/$$f.min.js crates/client/pkg/$$f.js || exit 1; done
	@# wasm-bindgen declares [Symbol.dispose], which needs TypeScript's esnext
	@# lib; drop it so the types check with an ES2022 lib (free() remains).
	@sed -i '/\[Symbol\.dispose\]/d' crates/client/pkg/onejob.d.ts
	@$(ENV) node scripts/inline-entry.mjs crates/client/pkg
	@cp -r crates/client/pkg www/sdk
	@$(if $(QUIET),,$(ENV) WASM_FEATURES="$(WASM_FEATURES)" WASM_OPT_SDK="$(WASM_OPT_SDK)" bash scripts/size-report.sh 12)
	@$(if $(QUIET),,bash scripts/size.sh $(SDK_FILES))
	@$(if $(QUIET),bar=$$(bash scripts/size-bar.sh $(SDK_FILES)) || { echo "$$bar"; exit 1; },bash scripts/size-bar.sh $(SDK_FILES))
	$(call stamp_done,client,$@)

## dev: builds what changed, then serves on DEV_PORT; once the worker
## answers, its URLs and the development credentials are the last lines
## printed (scripts/dev-banner.mjs). No size reports here: `make build` has them.
DEV_PORT ?= 8787
dev: QUIET := 1
dev: build dev-vars
	@# One shell: the banner watches it ($$$$), which exec makes wrangler.
	@source scripts/.env; node scripts/dev-banner.mjs http://127.0.0.1:$(DEV_PORT) $$$$ & \
	  exec wrangler dev --ip 127.0.0.1 --port $(DEV_PORT) --persist-to .wrangler/state

## .dev.vars: the development credentials and demo switches `wrangler dev`
## reads (wrangler deploy never ships it), copied from dev.vars.example when
## missing. No prerequisite on the template: a developer's edits are kept;
## keys the template gained since are named so they can be added.
.dev.vars:
	@cp dev.vars.example .dev.vars
	@# make dev also takes keyless requests, so an official SDK pointed at it by
	@# base URL works at its defaults; the tests keep the default (refuse).
	@printf '\n# make dev: requests without an Idempotency-Key get a derived key (README, "Keyless")\nKEYLESS=window\n' >> .dev.vars
	@echo "onejob: wrote .dev.vars from dev.vars.example, with KEYLESS=window (yours to edit; git ignores it)"
dev-vars: .dev.vars
	@missing=$$(comm -23 <(sed -nE 's/^([A-Z0-9_]+)=.*/\1/p' dev.vars.example | sort) <(sed -nE 's/^([A-Z0-9_]+)=.*/\1/p' .dev.vars | sort) | xargs); \
	  [ -z "$$missing" ] || echo "onejob: .dev.vars lacks $$missing (see dev.vars.example)"

## package: what users install and operators deploy, with no Rust:
## dist/onejob-<version>.tgz (the SDK, `npm install ./dist/onejob-<version>.tgz`)
## and dist/onejob-worker-<version>/ (+ .tgz): the deployment's build of the
## worker (its job types: ONEJOB_JOB_TYPES=folder, default none), the
## production wrangler.toml (deploy/wrangler.toml) and the console.
package: bootstrap build-edge-deploy build-client
	@$(ENV) bash scripts/package.sh dist

## deploy-check: `wrangler deploy --dry-run` (offline) of CONFIG, refused if a
## credential, a demo switch, a placeholder id or an unguarded console would
## ship, or a job type of the worker would be off for a setting the
## configuration lacks (scripts/deploy-check.mjs). Default: the packaged production template,
## which fails until its ids are filled in. WRANGLER_ENV=name checks its [env.name].
deploy-check: $(if $(CONFIG),,package)
	@$(ENV) node scripts/deploy-check.mjs $(or $(CONFIG),dist/onejob-worker-$(shell sed -nE 's/^version = "([^"]+)"/\1/p' Cargo.toml | head -1)/wrangler.toml) $(if $(WRANGLER_ENV),--env $(WRANGLER_ENV))

test: bootstrap
	@bash scripts/test.sh

## The core suite natively and on wasm32 alone (fast inner loop).
test-core:
	@$(ENV) cargo test -p onejob-core
test-core-wasm:
	@$(ENV) CARGO_TARGET_WASM32_UNKNOWN_UNKNOWN_RUNNER=wasm-bindgen-test-runner \
	  cargo test -p onejob-core --target wasm32-unknown-unknown --lib --tests

## The Ledger's deterministic simulation (crates/core/tests/simulation.rs) in
## release: SEEDS seeds (default 10,000) from SIM_FIRST (default 0);
## SIM_SEED=N replays one seed with its trace on stderr.
SEEDS ?= 10000
simulate:
	@$(ENV) SEEDS=$(SEEDS) $(if $(SIM_FIRST),SIM_FIRST=$(SIM_FIRST)) $(if $(SIM_SEED),SIM_SEED=$(SIM_SEED)) \
	  cargo test -p onejob-core --release --test simulation -- --nocapture

## The simulation's teeth (not in `make test`): deliberate bugs in the
## Ledger, each of which the simulation (or the core's unit tests) must
## catch with its seed (scripts/deliberate-bugs.mjs), then cargo-mutants
## (installed at its pinned version when missing) over the Ledger's sequence
## and machines, tested by the core's unit tests and the simulation;
## MUTANTS_FILES=… changes the set, MUTANTS_SHARD=k/n runs a part of it
## (scripts/mutants.sh). Prints each bug with its seed and
## `mutants: N tested, caught C, missed M, timeout T, unviable U`, then the
## missed mutants. Works in target/mutants, never in the working tree. About
## an hour on 2 cores (360 mutants, two at a time).
mutants:
	@bash scripts/mutants.sh

## Accepted background jobs after kill -9 of the runtime, at the issue's
## larger size (make test runs 150 jobs and 3 kills): 1,000 jobs, 6 kills.
## Prints the jobs still waiting 60 s after the last restart and the queue
## messages per job (after `make build-edge`).
CRASH_JOBS ?= 1000
CRASH_KILLS ?= 6
test-crash: build-edge
	@$(ENV) CRASH_JOBS=$(CRASH_JOBS) CRASH_KILLS=$(CRASH_KILLS) node --test --test-reporter=spec tests/edge/crash-backlog.test.mjs

## The module graph of both crates: every edge, cycles, the edge's table.
modgraph:
	@$(ENV) node scripts/modgraph.mjs --graph

## The edge against workerd alone (after `make build-edge build-edge-test`).
test-edge:
	@$(ENV) node --test --test-reporter=spec tests/edge/*.test.mjs

## onejob against a pass-through Worker and a JavaScript worker doing its
## storage pattern, in one interleaved run: first calls by body size,
## replays, the 0 ms breakdown, throughput and CPU per request, the sharding
## probe, a storm, streams, and issue 19's targets met or not (bench/edge.mjs).
## BENCH_ROUNDS (default 40), BENCH_THROUGHPUT (requests per phase, 480),
## BENCH_ONEJOB_DIR (another checkout's built worker, for before/after).
BENCH_ROUNDS ?= 40
bench: build-edge
	@$(ENV) node bench/edge.mjs $(BENCH_ROUNDS)

## The browser SDK: fingerprint() against plain JavaScript (Node and
## Chromium), oj.fetch's own cost, start-up in Chromium (after build-client).
bench-sdk:
	@$(ENV) node bench/sdk.mjs 300

## Several providers: calls per intent in a primary outage, hedging's latency.
bench-providers: build-edge
	@$(ENV) node bench/providers.mjs 100

## Which providers of each route with an output contract are safe fallbacks
## (this checkout's configuration run locally, or ONEJOB_URL; see README).
provider-check: build-edge dev-vars
	@$(ENV) node scripts/provider-check.mjs

## Brooker's backoff experiment (see CONTRIBUTING.md, "Why full jitter").
experiment:
	@cargo run -q --release -p onejob-core --example contention

clean:
	cargo clean
	rm -rf crates/edge/build crates/edge/build-test crates/edge/build-deploy crates/client/pkg www/sdk .wrangler
