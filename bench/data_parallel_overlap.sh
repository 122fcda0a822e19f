#!/usr/bin/env bash
# The data-parallel step (samples/data_parallel.dep, 200 steps) with communication overlapped
# (each gradient's allreduce pushed as soon as the backward pass produces it, as written)
# against the same step with a `wait` before each allreduce, under simulated ranks
# (`--engine sim --ranks N`, virtual time) and under mpirun.
#
# Under mpirun the figure is the training loop's time on rank 0's clock (`clock()` around the
# loop: MPI's start, the setup and the views are left out), the median of RUNS runs (5 by
# default), unobserved; then rank 0's overlap line from one run with `--summary`. On a machine
# with fewer cores than ranks and threads, single runs vary by several times (a rank whose MPI
# progress thread is descheduled stalls every rank's collectives): compare medians.
#
# RANKS="2 4 8" sets the rank counts (default "2 4").
#
# MPI needs dep built with MPI (DEP=target/release/dep after `cargo build --release --features
# mpi`); without mpirun on PATH only the simulated rows are printed.
set -euo pipefail
cd "$(dirname "$0")/.."
dep=${DEP:-target/release/dep}
runs=${RUNS:-5}
rank_counts=${RANKS:-2 4}
export OMPI_MCA_btl_vader_single_copy_mechanism=none
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# The training loop timed on the script's clock.
sed -e 's/^for epoch in 0\.\.5 {/wait\nt0 = clock()\nfor epoch in 0..5 {/' \
    -e 's|^print "accuracy", correct / 64|&\nwait\nprint "training ms", clock() - t0|' \
    samples/data_parallel.dep > "$work/overlapped.dep"
sed -E 's/^( *)(g[A-Za-z0-9]+) = allreduce\(/\1wait\n\1\2 = allreduce(/' \
  "$work/overlapped.dep" > "$work/waited.dep"
[ "$(grep -c '^ *wait$' "$work/waited.dep")" = 6 ] || { echo "no wait inserted" >&2; exit 1; }
grep -q '^print "training ms"' "$work/overlapped.dep" || { echo "no clock inserted" >&2; exit 1; }

# Prints the wall time and rank 0's overlap line of a run's summary (on stderr).
figures() {
  "$@" --summary 2>&1 >/dev/null |
    sed -nE 's/^summary: .*wall (.*)$/wall \1/p; s/^ *rank 0: (.*)$/  rank 0: \1/p' | tr '\n' ' '
  echo
}

# The median training time of $runs runs.
median_training_ms() {
  for _ in $(seq "$runs"); do
    "$@" 2>/dev/null | sed -nE 's/^training ms (.*)$/\1/p'
  done | sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] " ms (median of " NR ")" }'
}

mpi=(mpirun --allow-run-as-root --oversubscribe -n)
for ranks in $rank_counts; do
  for variant in overlapped waited; do
    printf "%-4s %-10s sim:    %s\n" "$ranks" "$variant" \
      "$(figures "$dep" run "$work/$variant.dep" --engine sim --ranks "$ranks")"
    if command -v mpirun >/dev/null; then
      printf "%-4s %-10s mpirun: training %s; observed: %s\n" "$ranks" "$variant" \
        "$(median_training_ms "${mpi[@]}" "$ranks" "$dep" run "$work/$variant.dep")" \
        "$(figures "${mpi[@]}" "$ranks" "$dep" run "$work/$variant.dep")"
    fi
  done
done
