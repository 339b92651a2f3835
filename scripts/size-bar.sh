#!/usr/bin/env bash
# The SDK's size bar: what a browser downloads (the wasm and the JS glue,
# gzip -9) may not grow more than 2 KB past the figure the README states, on
# its `sdk-size:` line. A change that costs more must update that figure (and
# so say so in review); a smaller build passes and prints the new figure.
#
#   bash scripts/size-bar.sh WASM GLUE
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
slack=2048
measured=0
for f in "$@"; do measured=$((measured + $(gzip -9 -c "$f" | wc -c))); done
stated=$(sed -nE 's/.*<!-- sdk-size: ([0-9]+) B gzip -->.*/\1/p' "$root/README.md" | head -1)
if [ -z "$stated" ]; then
  echo "size bar: README.md has no '<!-- sdk-size: N B gzip -->' line"; exit 1
fi
printf 'size bar: %d B gzip measured, README states %d B (bar %d B)\n' "$measured" "$stated" $((stated + slack))
if [ "$measured" -gt $((stated + slack)) ]; then
  echo "size bar: FAILED: the SDK grew by $((measured - stated)) B (> $slack B) without the README's figure being updated"
  exit 1
fi
