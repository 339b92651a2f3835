#!/usr/bin/env bash
# Runs the core's examples as a user would and checks what they print.
set -euo pipefail
cd "$(dirname "$0")/.."
ok=0; bad=0
check() { # name expected actual
  if [ "$2" = "$3" ]; then ok=$((ok + 1)); echo "ok: $1"; else bad=$((bad + 1)); printf 'FAIL: %s\n  expected: %s\n  actual:   %s\n' "$1" "$2" "$3"; fi
}
fp() { cargo run -q -p onejob-core --example fingerprint -- "$@"; }

a=$(printf '{"b":1e0,"a":"x"}' | fp POST /v1/chat/completions)
b=$(printf '{ "a" : "\\u0078", "b" : 1.0 }' | fp POST /v1/chat/completions)
check "fingerprint prints the canonical JSON first" '{"a":"x","b":1}' "$(head -1 <<<"$a")"
check "same meaning, same fingerprint" "$(tail -1 <<<"$a")" "$(tail -1 <<<"$b")"
c=$(printf '{"b":2,"a":"x"}' | fp POST /v1/chat/completions | tail -1)
[ "$c" != "$(tail -1 <<<"$a")" ] && check "another value, another fingerprint" differ differ || check "another value, another fingerprint" differ same
err=$(printf '{"a":1,"a":2}' | fp POST /v1/x 2>&1 >/dev/null || true)
check "duplicate names are refused with the name" 'fingerprint: object has duplicate member name "a" (use --bytes for a body that is not JSON)' "$err"

jt() { cargo run -q -p onejob-core --example job-types -- "$@"; }
check "job-types: what the demo's triage needs of a deployment" 'd1 TICKETS,variable MAIL_URL,secret MAIL_SECRET' \
  "$(jt jobs | node -e 'const m = JSON.parse(require("fs").readFileSync(0, "utf8")); console.log(m.triage.needs.map((n) => `${n.kind} ${n.name}`).join())')"
check "job-types: no folder, no job types" '{}' "$(jt)"
err=$(jt no-such-folder 2>&1 >/dev/null || true)
check "job-types: a missing folder is refused by name" 'job-types: cannot read the folder no-such-folder: No such file or directory (os error 2)' "$err"

table=$(cargo run -q --release -p onejob-core --example contention)
echo "$table"
none=$(awk '$1=="none" && $2==100 {print $3}' <<<"$table")
full=$(awk '$1=="full" && $2==100 {print $3}' <<<"$table")
check "full jitter needs under half the calls of no jitter at N=100 ($full vs $none)" yes "$([ $((full * 2)) -lt "$none" ] && echo yes || echo no)"

echo "test result: $([ $bad -eq 0 ] && echo ok || echo FAILED). $ok passed; $bad failed"
[ $bad -eq 0 ]
