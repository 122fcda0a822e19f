#!/usr/bin/env bash
# Allreduce over MPI, side by side: dep's `x = allreduce(x)` (an engine op completed by the MPI
# progress thread) against the same call from mpi4py (MPI's own cost, the floor), for 4 B, 1 MB
# and 64 MB over 2 and 4 ranks. Each times a chain of K allreduces (each waits for the one
# before) and prints microseconds per allreduce on rank 0.
#
# Needs Open MPI (scripts/mpi-tests installs it), mpi4py and NumPy in $PYTHON (default python3),
# and dep built with MPI: DEP=target/release/dep after `cargo build --release --features mpi`.
set -euo pipefail
cd "$(dirname "$0")/.."
dep=${DEP:-target/release/dep}
python=${PYTHON:-python3}
export OMPI_MCA_btl_vader_single_copy_mechanism=none
mpirun=(mpirun --allow-run-as-root --oversubscribe)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cat > "$work/allreduce.py" <<'PY'
import sys, time
import numpy as np
from mpi4py import MPI
n, k = int(sys.argv[1]), int(sys.argv[2])
comm = MPI.COMM_WORLD
x = np.ones(n, dtype=np.float32)
y = np.empty_like(x)
comm.Allreduce(x, y, op=MPI.SUM)
comm.Barrier()
start = time.perf_counter()
for _ in range(k):
    comm.Allreduce(x, y, op=MPI.SUM)
    x, y = y, x
comm.Barrier()
if comm.rank == 0:
    print(f"{(time.perf_counter() - start) / k * 1e6:.1f}")
PY
printf "%-6s %-6s %12s %12s\n" ranks bytes "dep µs" "mpi4py µs"
for ranks in 2 4; do
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
    dep_us=$("${mpirun[@]}" -n "$ranks" "$dep" run "$work/allreduce.dep")
    py_us=$("${mpirun[@]}" -n "$ranks" "$python" "$work/allreduce.py" "$n" "$k")
    printf "%-6s %-6s %12s %12s\n" "$ranks" "$((n * 4))" "$dep_us" "$py_us"
  done
done
