#!/usr/bin/env bash
# Instructions per statement that observing costs, counted exactly by callgrind (the same count
# whatever the machine's load): issue 17's loop, `x = ones(64); for i in 0..N/2 { y = x + 1;
# x = y * 1 }` (N statements), run through `dep run` unobserved, with `--summary`, and with
# `--trace` to a JSON and a Perfetto file, minus the same script with 0 iterations, over N.
# Usage: bench/observed_statements.sh [N] [ENGINE]   (defaults: 20000, threaded)
# The threaded engine runs with 2 workers, as on the 2-core machine of bench/README.md.
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
