#!/usr/bin/env bash
# Every view a run writes, compared byte for byte between two builds of dep: the summary and
# both traces (`--trace t.json --trace t.pftrace`) of every sample under `--engine sim`, alone
# and with `--ranks 2`. For a change to the event log or the views that must show the same.
# BEFORE runs twice: a file that differs between its own two runs (builds before rank 0's
# summary was folded in virtual-time order printed a critical path that varied with `--ranks 2`)
# is named as unstable and not counted; the memory line ("memory: cpu peak", or "memory (the 2
# simulated ranks together): cpu peak"), which measures real allocations, is left out.
# Usage: bench/same_views.sh BEFORE_DEP AFTER_DEP   (e.g. a copy of main's target/release/dep)
set -uo pipefail
cd "$(dirname "$0")/.."
before=$1
after=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
n_files=0
n_different=0
for sample in samples/*.dep; do
  name=$(basename "$sample" .dep)
  for ranks in 1 2; do
    flags=(--engine sim)
    [ "$ranks" = 2 ] && flags+=(--ranks 2)
    for side in before again after; do
      dep=$before
      [ "$side" = after ] && dep=$after
      dir="$work/$side/$name.$ranks"
      mkdir -p "$dir"
      "$dep" run "${flags[@]}" --summary "$sample" >"$dir/summary.txt" 2>"$dir/summary.err"
      # The memory line varies from run to run with ranks (see above): left out.
      sed -i '/memory.*: cpu peak/d' "$dir/summary.err"
      "$dep" run "${flags[@]}" --trace "$dir/t.json" --trace "$dir/t.pftrace" "$sample" \
        >"$dir/trace-run.txt" 2>"$dir/trace-run.err"
      sed -i '/memory.*: cpu peak/d' "$dir/trace-run.err"
    done
    for file in "$work/before/$name.$ranks"/*; do
      if ! cmp -s "$file" "$work/again/$name.$ranks/$(basename "$file")"; then
        echo "unstable in BEFORE itself, not counted: $name (ranks $ranks) $(basename "$file")"
        continue
      fi
      n_files=$((n_files + 1))
      if ! cmp -s "$file" "$work/after/$name.$ranks/$(basename "$file")"; then
        n_different=$((n_different + 1))
        echo "different: $name (ranks $ranks) $(basename "$file")"
      fi
    done
  done
done
echo "$n_files files compared, $n_different different"
[ "$n_different" = 0 ]
