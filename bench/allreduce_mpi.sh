#!/usr/bin/env bash
# Allreduce over MPI, side by side: dep's `x = allreduce(x)` (an engine op completed by the MPI
# progress thread) against the same call from mpi4py (MPI's own cost, the floor), for 4 B, 1 MB
# and 64 MB over 2 and 4 ranks. Each times a chain of K allreduces (each waits for the one
# before) and prints microseconds per allreduce on rank 0. mpi4py runs it twice: the blocking
# `Allreduce`, and the nonblocking `Iallreduce(...).Wait()` that dep's progress thread posts
# (`MPI_Iallreduce`: Open MPI's libnbc, whose algorithms differ from the blocking call's).
#
# RANKS="2 4 8" sets the rank counts (default "2 4").
# RUNS=N runs each N times and prints the least and the median (default 1: one figure). On a
# shared machine, CHRT="chrt -r 1" runs every rank under the real-time round-robin policy so
# that other processes' builds do not preempt them (root only; the kernel still keeps 5% of the
# time for the others).
#
# Needs Open MPI (scripts/mpi-tests installs it), mpi4py and NumPy in $PYTHON (default python3),
# and dep built with MPI: DEP=target/release/dep after `cargo build --release --features mpi`.
set -euo pipefail
cd "$(dirname "$0")/.."
dep=${DEP:-target/release/dep}
python=${PYTHON:-python3}
runs=${RUNS:-1}
rank_counts=${RANKS:-2 4}
export OMPI_MCA_btl_vader_single_copy_mechanism=none
# shellcheck disable=SC2206 # CHRT is a command and its arguments
mpirun=(${CHRT:-} mpirun --allow-run-as-root --oversubscribe)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cat > "$work/allreduce.py" <<'PY'
import sys, time
import numpy as np
from mpi4py import MPI
n, k, blocking = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3] == "blocking"
comm = MPI.COMM_WORLD
x = np.ones(n, dtype=np.float32)
y = np.empty_like(x)
comm.Allreduce(x, y, op=MPI.SUM)
comm.Barrier()
start = time.perf_counter()
for _ in range(k):
    if blocking:
        comm.Allreduce(x, y, op=MPI.SUM)
    else:
        comm.Iallreduce(x, y, op=MPI.SUM).Wait()
    x, y = y, x
comm.Barrier()
if comm.rank == 0:
    print(f"{(time.perf_counter() - start) / k * 1e6:.1f}")
PY
# The least and the median of the figures on standard input ("least / median"), or the one.
stats() {
  sort -g | awk '{ v[NR] = $1 } END {
    if (NR == 1) printf "%.1f", v[1]; else printf "%.1f / %.1f", v[1], v[int((NR + 1) / 2)] }'
}
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg); runs: $runs"
printf "%-6s %-9s %20s %20s %20s\n" ranks bytes "dep µs" "mpi4py µs" "mpi4py Iallreduce µs"
for ranks in $rank_counts; do
  for size in "1 2000" "262144 200" "16777216 10"; do
    set -- $size
    n=$1 k=$2
    cat > "$work/allreduce.dep" <<DEP
x = ones($n)
x = allreduce(x)
wait
t0 = clock()
for i in 0..$k { x = allreduce(x) }
wait
with rank = 0 { print (clock() - t0) * 1000 / $k }
DEP
    : >"$work/dep" && : >"$work/blocking" && : >"$work/nonblocking"
    for _ in $(seq "$runs"); do
      "${mpirun[@]}" -n "$ranks" "$dep" run "$work/allreduce.dep" >>"$work/dep"
      for call in blocking nonblocking; do
        "${mpirun[@]}" -n "$ranks" "$python" "$work/allreduce.py" "$n" "$k" "$call" >>"$work/$call"
      done
    done
    printf "%-6s %-9s %20s %20s %20s\n" "$ranks" "$((n * 4))" "$(stats <"$work/dep")" \
      "$(stats <"$work/blocking")" "$(stats <"$work/nonblocking")"
  done
done
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)"
