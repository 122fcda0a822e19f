#!/usr/bin/env bash
# Runs commands one after the other, ROUNDS times over (so that a change in the machine's load
# reaches every command alike), with `sync` before each run (a run does not pay for the one
# before's file writeback), and prints each label's wall times in seconds, sorted, then their
# median. Compare builds by naming each (a worktree's binary, a copy of an earlier one).
# Usage: bench/alternate.sh ROUNDS 'LABEL:COMMAND' ['LABEL:COMMAND' ...]
# e.g.   bench/alternate.sh 9 'run:target/release/dep run big.dep' \
#          'json:target/release/dep run --trace t.json big.dep'
set -euo pipefail
rounds=$1
shift
times=$(mktemp)
trap 'rm -f "$times" "$times.one"' EXIT
for _ in $(seq "$rounds"); do
  for spec in "$@"; do
    label=${spec%%:*}
    sync
    /usr/bin/time -f "%e" -o "$times.one" bash -c "${spec#*:}" >/dev/null 2>&1
    echo "$label $(cat "$times.one")" >>"$times"
  done
done
for spec in "$@"; do
  label=${spec%%:*}
  sorted=$(awk -v label="$label" '$1 == label { print $2 }' "$times" | sort -n)
  median=$(echo "$sorted" | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }')
  echo "$label: $(echo "$sorted" | tr '\n' ' ')(median $median)"
done
