#!/usr/bin/env bash
# Instructions per empty op on the naive engine, bare and with an event log attached (the
# `observe` benchmark's "independent empty ops, naive" rows), counted exactly by callgrind: three
# rounds of 10,000 ops minus one round, over 20,000.
# Usage: bench/observe_instructions.sh
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build -q --release -p dep-bench --example empty_ops
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

count() {
  valgrind --tool=callgrind --callgrind-out-file="$work/cg.out" target/release/examples/empty_ops "$@" \
    >/dev/null 2>"$work/cg.err"
  grep -o 'Collected : [0-9]*' "$work/cg.err" | grep -o '[0-9]*'
}

for observer in bare log; do
  three=$(count 3 "$observer")
  one=$(count 1 "$observer")
  echo "$observer: $(( (three - one) / 20000 )) instructions per op"
done
