#!/usr/bin/env bash
# Instructions per statement that observing costs, counted exactly by callgrind (the same count
# whatever the machine's load): issue 17's loop, `x = ones(64); for i in 0..N/2 { y = x + 1;
# x = y * 1 }` (N statements), run through `dep run` unobserved, with `--summary`, and with
# `--trace` to a JSON and a Perfetto file, minus the same script with 0 iterations, over N.
# Usage: bench/observed_statements.sh [N] [ENGINE]   (defaults: 20000, threaded)
# The threaded engine runs with 2 workers, as on the 2-core machine of bench/README.md.
# Then, per thread (where cores are spare, the run's end waits for its busiest thread): each
# observed run's instructions per statement by thread role (the interpreter, the workers, the
# recorder, a JSON trace's event log thread, a trace's encoder), with the trace files'
# threads off and on (DEP_TRACE_THREADS).
set -euo pipefail
cd "$(dirname "$0")/.."
n=${1:-20000}
engine=${2:-threaded}
cargo build -q --release -p dep
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

for statements in "$n" 0; do
  printf 'x = ones(64)\nfor i in 0..%s {\n  y = x + 1\n  x = y * 1\n}\n' $((statements / 2)) \
    >"$work/loop$statements.dep"
done

# Instructions of one command (all its threads) under callgrind.
count() {
  valgrind --tool=callgrind --callgrind-out-file="$work/cg.out" "$@" >/dev/null 2>"$work/cg.err"
  grep -o 'Collected : [0-9]*' "$work/cg.err" | grep -o '[0-9]*'
}

# Instructions per statement of `dep run` with OPTIONS...: the loop of N minus the loop of 0.
per_statement() {
  local with without
  with=$(count target/release/dep run --engine "$engine" --threads 2 "$@" "$work/loop$n.dep")
  without=$(count target/release/dep run --engine "$engine" --threads 2 "$@" "$work/loop0.dep")
  echo $(((with - without) / n))
}

echo "instructions per statement, $engine engine, N = $n"
echo "unobserved:         $(per_statement)"
echo "--summary:          $(per_statement --summary)"
echo "--trace t.json:     $(per_statement --trace "$work/t.json")"
echo "--trace t.pftrace:  $(per_statement --trace "$work/t.pftrace")"

# Instructions of one command by thread (callgrind --separate-threads), as `ROLE COUNT` lines,
# each thread named by what it runs.
count_by_thread() {
  rm -f "$work"/cgt.out*
  valgrind --tool=callgrind --separate-threads=yes --callgrind-out-file="$work/cgt.out" "$@" \
    >/dev/null 2>&1
  for part in "$work"/cgt.out-*; do
    local role=other
    if grep -q 'RunFold::push' "$part"; then
      role=recorder
    elif grep -q 'Driver::run' "$part"; then
      role=interpreter
    elif grep -q 'worker_loop' "$part"; then
      role=workers
    elif grep -q 'DepEventsWriter' "$part"; then
      role=event-log
    elif grep -q 'trace_apart::encode' "$part"; then
      role=encoder
    fi
    echo "$role $(awk '/^summary:/ { print $2; exit }' "$part")"
  done | awk '{ total[$1] += $2 } END { for (role in total) print role, total[role] }'
}

# Per statement by thread role of `dep run` with OPTIONS...: the loop of N minus the loop of 0.
per_thread() {
  local opts=("$@")
  join <(count_by_thread target/release/dep run --engine "$engine" --threads 2 "${opts[@]}" \
    "$work/loop$n.dep" | sort) \
    <(count_by_thread target/release/dep run --engine "$engine" --threads 2 "${opts[@]}" \
      "$work/loop0.dep" | sort) |
    awk -v n="$n" '$1 != "other" { printf " %s %d", $1, ($2 - $3) / n }'
  echo
}

echo "per thread (instructions per statement):"
for threads in off on; do
  export DEP_TRACE_THREADS=$threads
  echo "trace threads $threads:"
  echo "  --summary:         $(per_thread --summary)"
  echo "  --trace t.json:    $(per_thread --trace "$work/t.json")"
  echo "  --trace t.pftrace: $(per_thread --trace "$work/t.pftrace")"
done
