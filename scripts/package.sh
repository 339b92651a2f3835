#!/usr/bin/env bash
# `make package` (after the builds): what a user installs and what an
# operator deploys, without Rust. Usage: scripts/package.sh [DEST] (default dist)
#
#   DEST/onejob-<version>.tgz          the SDK: `npm pack` of crates/client/pkg
#                                      (npm install ./dist/onejob-<version>.tgz)
#   DEST/onejob-worker-<version>/      the worker as `wrangler deploy` takes it:
#     index.js, index_bg.wasm          the built worker (crates/edge/build-deploy,
#                                      the deployment's build: no fault injection,
#                                      the job types it names, default none)
#     job-types.json                   what those job types need of the deployment
#                                      (make deploy-check reads it)
#     wrangler.toml                    the production template (deploy/wrangler.toml)
#     console/                         the operator console (www/admin/, the
#                                      stylesheet and the job states' names it
#                                      shares with the demo, www/_headers), served only
#                                      if the template's [assets] is turned on
#                                      with ADMIN_KEYS
#   DEST/onejob-worker-<version>.tgz   that folder, packed
#
# It packs what the last build left, and refuses to run without one.
set -euo pipefail
cd "$(dirname "$0")/.."
dest=${1:-dist}

sdk=crates/client/pkg
edge=crates/edge/build-deploy
for file in "$sdk/package.json" "$sdk/onejob_bg.wasm" "$edge/index.js" "$edge/index_bg.wasm" "$edge/job-types.json"; do
  [ -s "$file" ] || { echo "package: $file is missing: run make build-client build-edge-deploy first" >&2; exit 1; }
done

# The production build only: the one with fault injection (make
# build-edge-test, the cargo feature `faults`) holds its knobs' names.
if grep -qaE 'QUEUE_SEND_FAULTS|QUEUE_SEND_DELAY_MS|EFFECT_HANG_AFTER' "$edge/index_bg.wasm"; then
  echo "package: $edge/index_bg.wasm is built with fault injection (the faults feature): run make build-edge-deploy" >&2
  exit 1
fi

sdk_version=$(node -p 'require("./crates/client/pkg/package.json").version')
# The worker's version is the workspace's (Cargo.toml [workspace.package]).
worker_version=$(sed -nE 's/^version = "([^"]+)"/\1/p' Cargo.toml | head -1)
mkdir -p "$dest"

rm -f "$dest/onejob-$sdk_version.tgz"
npm pack --silent --pack-destination "$dest" "./$sdk" >/dev/null
[ -s "$dest/onejob-$sdk_version.tgz" ] || { echo "package: npm pack wrote no $dest/onejob-$sdk_version.tgz" >&2; exit 1; }

bundle="$dest/onejob-worker-$worker_version"
rm -rf "$bundle" "$bundle.tgz"
mkdir -p "$bundle/console"
cp "$edge/index.js" "$edge/index_bg.wasm" "$edge/job-types.json" deploy/wrangler.toml "$bundle/"
# The console's own files only: never the demo page (index.html, app.js,
# inbox.html) or the SDK copy the demo serves.
cp -r www/admin "$bundle/console/admin"
# What it shares with the demo (its modules import ../states.js), and their
# response headers (the console's CSP, no-referrer and nosniff; theme.css's
# and states.js's nosniff): Workers static assets read _headers from the folder.
cp www/theme.css www/states.js www/_headers "$bundle/console/"
tar -czf "$bundle.tgz" -C "$dest" "onejob-worker-$worker_version"

for file in "$dest/onejob-$sdk_version.tgz" "$bundle.tgz"; do
  printf 'package: %-40s %8d B\n' "$file" "$(stat -c %s "$file")"
done
echo "package: job types in the worker: $(node -p 'Object.keys(JSON.parse(require("fs").readFileSync(process.argv[1], "utf8"))).join(", ") || "none"' "$bundle/job-types.json")"

