#!/usr/bin/env bash
# What a machine's cores do to dep's CPU paths, in about two minutes, for a machine where no Rust
# toolchain is needed (a copy of the release binary will do): issue 16's statement against NumPy's
# (`bench/script_time.py`, when Python has NumPy), and issue 17's 2,000,000-statement observed runs
# against the unobserved one, with the trace files' threads off and on (`DEP_TRACE_THREADS`),
# alternated round by round (`bench/alternate.sh`), with each run's peak memory.
# Usage: bench/many_cores.sh [DEP_BINARY] [ROUNDS]   (defaults: target/release/dep, 5)
set -euo pipefail
cd "$(dirname "$0")/.."
dep=$(realpath "${1:-target/release/dep}")
rounds=${2:-5}
[ -x "$dep" ] || { echo "many_cores.sh: no dep binary at $dep (cargo build --release -p dep)" >&2; exit 2; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

echo "# $(date -u +%Y-%m-%dT%H:%M:%SZ) $(nproc) cores: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')"
echo "# dep: $dep"

python=${PYTHON:-python3}
if "$python" -c 'import numpy' 2>/dev/null; then
  "$python" bench/script_time.py --dep "$dep" --n 1000000 --runs "$rounds"
else
  echo "(no NumPy for $python: bench/script_time.py skipped)"
fi

printf 'x = ones(64)\nfor i in 0..1000000 {\n  y = x + 1\n  x = y * 1\n}\n' >"$work/big.dep"
cd "$work"
run="$dep run big.dep"
echo "big.dep (2,000,000 statements), threaded engine, $rounds alternated rounds, seconds:"
"$OLDPWD/bench/alternate.sh" "$rounds" \
  "plain:$run" \
  "summary:$run --summary" \
  "json-threads-off:DEP_TRACE_THREADS=off $run --trace t.json" \
  "json-threads-on:DEP_TRACE_THREADS=on $run --trace t.json" \
  "pftrace-threads-off:DEP_TRACE_THREADS=off $run --trace t.pftrace" \
  "pftrace-threads-on:DEP_TRACE_THREADS=on $run --trace t.pftrace" | tee medians
plain=$(awk -F'median ' '/^plain:/ { print $2 + 0 }' medians)
awk -F'median ' -v plain="$plain" '{ split($1, label, ":"); printf "  %-20s %.2fx the plain run (medians)\n", label[1], ($2 + 0) / plain }' medians
echo "peak memory (one run each):"
for spec in "plain:" "summary:--summary" "json-threads-off:--trace t.json" \
  "json-threads-on:--trace t.json" "pftrace-threads-off:--trace t.pftrace" \
  "pftrace-threads-on:--trace t.pftrace"; do
  label=${spec%%:*}
  threads=off
  [[ $label == *-on ]] && threads=on
  # shellcheck disable=SC2086 # the options are words
  DEP_TRACE_THREADS=$threads /usr/bin/time -f "  $label %M KB" $run ${spec#*:} 2>&1 >/dev/null | tail -1
done
