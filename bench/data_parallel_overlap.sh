#!/usr/bin/env bash
# The data-parallel step (samples/data_parallel.dep, 200 steps) with communication overlapped
# (each gradient's allreduce pushed as soon as the backward pass produces it, as written)
# against the same step with a `wait` before each allreduce, under simulated ranks
# (`--engine sim --ranks N`, virtual time) and under mpirun: the run's wall time on rank 0 and
# each rank's overlap line from `--summary`.
#
# MPI needs dep built with MPI (DEP=target/release/dep after `cargo build --release --features
# mpi`); without mpirun on PATH only the simulated rows are printed.
set -euo pipefail
cd "$(dirname "$0")/.."
dep=${DEP:-target/release/dep}
export OMPI_MCA_btl_vader_single_copy_mechanism=none
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cp samples/data_parallel.dep "$work/overlapped.dep"
sed -E 's/^( *)(g[A-Za-z0-9]+) = allreduce\(/\1wait\n\1\2 = allreduce(/' \
  samples/data_parallel.dep > "$work/waited.dep"
[ "$(grep -c '^ *wait$' "$work/waited.dep")" = 4 ] || { echo "no wait inserted" >&2; exit 1; }

# Prints the wall time and rank 0's overlap line of a run's summary (on stderr).
figures() {
  "$@" --summary 2>&1 >/dev/null |
    sed -nE 's/^summary: .*wall (.*)$/wall \1/p; s/^ *rank 0: (.*)$/  rank 0: \1/p' | tr -d '\n'
  echo
}

for ranks in 2 4; do
  for variant in overlapped waited; do
    printf "%-4s %-10s sim:    %s\n" "$ranks" "$variant" \
      "$(figures "$dep" run "$work/$variant.dep" --engine sim --ranks "$ranks")"
    if command -v mpirun >/dev/null; then
      printf "%-4s %-10s mpirun: %s\n" "$ranks" "$variant" \
        "$(figures mpirun --allow-run-as-root --oversubscribe -n "$ranks" "$dep" run "$work/$variant.dep")"
    fi
  done
done
