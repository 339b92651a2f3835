#!/usr/bin/env bash
# Prints raw and gzip sizes of build outputs, so every build reports its weight.
set -euo pipefail
total_raw=0; total_gz=0
for f in "$@"; do
  raw=$(stat -c %s "$f"); gz=$(gzip -9 -c "$f" | wc -c)
  total_raw=$((total_raw + raw)); total_gz=$((total_gz + gz))
  printf 'size: %-48s %9d B raw %9d B gzip\n' "$f" "$raw" "$gz"
done
[ $# -gt 1 ] && printf 'size: %-48s %9d B raw %9d B gzip\n' "total" "$total_raw" "$total_gz"
exit 0
