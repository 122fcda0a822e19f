#!/usr/bin/env bash
# Instructions per statement of `c = c + b` on 4 elements, counted exactly by callgrind (the same
# count whatever the machine's load): the loop run N times minus the same script run 0 times,
# divided by N. For dep through `dep run` on the naive and the threaded engine, and for NumPy
# (CPython's own loop included) when bench/.venv has it:
#   python3 -m venv bench/.venv && bench/.venv/bin/pip install numpy==1.23.5
# Then the same for a block of ten statements pushed eagerly, replayed from a recorded graph
# (memory optimisations off), replayed with the default options, and replayed in bulks of ten
# (issue 9's workload), per op, with N/10 iterations of the block; a call of a
# one-statement function against its statement inline; and a call of a function with a local.
# Usage: bench/instructions.sh [N]   (default 100000)
set -euo pipefail
cd "$(dirname "$0")/.."
n=${1:-100000}
cargo build -q --release -p dep
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

for iterations in "$n" 0; do
  printf 'b = ones(4)\nc = ones(4)\nfor i in 0..%s { c = c + b }\nprint c[0]\n' "$iterations" \
    >"$work/loop$iterations.dep"
  printf 'import numpy as np\nb = np.ones(4, dtype=np.float32)\nc = np.ones(4, dtype=np.float32)
for i in range(%s):\n    c = c + b\nprint(c[0])\n' "$iterations" >"$work/loop$iterations.py"
done

# Instructions of one command (all its threads) under callgrind.
count() {
  valgrind --tool=callgrind --callgrind-out-file="$work/cg.out" "$@" >/dev/null 2>"$work/cg.err"
  grep -o 'Collected : [0-9]*' "$work/cg.err" | grep -o '[0-9]*'
}

# Instructions per statement: COMMAND... run on loopN (FILE_SUFFIX) minus on loop0, over N.
per_statement() {
  local suffix=$1 with without
  shift
  with=$(count "$@" "$work/loop$n.$suffix")
  without=$(count "$@" "$work/loop0.$suffix")
  echo $(((with - without) / n))
}

echo "instructions per statement of c = c + b (4 elements), N = $n"
echo "dep naive:       $(per_statement dep target/release/dep run --engine naive)"
echo "dep threaded/2:  $(per_statement dep target/release/dep run --engine threaded --threads 2)"
if [ -x bench/.venv/bin/python ] && bench/.venv/bin/python -c 'import numpy' 2>/dev/null; then
  echo "numpy:           $(per_statement py bench/.venv/bin/python)"
else
  echo "numpy:           (no bench/.venv with numpy: see the comment at the top)"
fi

setup='a = ones(4)
b = ones(4)
c = ones(4)'
block='  t1 = a + b
  t2 = t1 * c
  t3 = t2 - a
  t4 = t3 / 2
  t5 = t4 + t1
  a = t5 * 0.5
  t6 = b - c
  t7 = t6 + a
  b = t7 * 0.5
  c = c + 0'
for iterations in "$((n / 10))" 0; do
  printf '%s\nfor i in 0..%s {\n%s\n}\nwait\n' "$setup" "$iterations" "$block" \
    >"$work/eager$iterations.dep"
  for options in "recycle = 0, share = 0, lazy = 0" "recycle = 0, share = 0, lazy = 0, bulk = 10" \
    "bulk = 1"; do
    name=graph
    [[ $options == *bulk\ =\ 10* ]] && name=bulk
    [[ $options == "bulk = 1" ]] && name=default
    printf '%s\ngraph block {\n%s\n}\nfor i in 0..%s { with %s { run block } }\nwait\n' \
      "$setup" "$block" "$iterations" "$options" >"$work/$name$iterations.dep"
  done
done

# Instructions of COMMAND... on script NAME run ITERATIONS times minus run 0 times, over N.
per_n() {
  local name=$1 iterations=$2 with without
  shift 2
  with=$(count "$@" "$work/$name$iterations.dep")
  without=$(count "$@" "$work/${name}0.dep")
  echo $(((with - without) / n))
}

# Instructions per op of workload NAME: its N/10 iterations of ten ops minus 0.
per_op() {
  local name=$1
  shift
  per_n "$name" "$((n / 10))" "$@"
}

echo "instructions per op of a block of ten statements, N = $n ops"
for engine in naive threaded; do
  echo "$engine: eager $(per_op eager target/release/dep run --engine "$engine")," \
    "replay $(per_op graph target/release/dep run --engine "$engine")," \
    "replay with the default options $(per_op default target/release/dep run --engine "$engine")," \
    "bulked replay $(per_op bulk target/release/dep run --engine "$engine")"
done

# A call of a one-statement function (`a = f(a)`, `def f(x) { return x + 1 }`) against the
# same statement written inline (`a = a + 1`), N times minus 0 times, over N.
for iterations in "$n" 0; do
  printf 'a = ones(4)\ndef f(x) {\n  return x + 1\n}\nfor i in 0..%s { a = f(a) }\nprint a[0]\n' \
    "$iterations" >"$work/call$iterations.dep"
  printf 'a = ones(4)\nfor i in 0..%s { a = a + 1 }\nprint a[0]\n' "$iterations" \
    >"$work/inline$iterations.dep"
done
echo "instructions per call of a one-statement function, N = $n"
for engine in naive threaded; do
  echo "$engine: call $(per_n call "$n" target/release/dep run --engine "$engine")," \
    "inline $(per_n inline "$n" target/release/dep run --engine "$engine")"
done

# A call of a function with a local (`def f(x) { y = x * 2; return y + 1 }`): the local is a
# new variable at every call, deleted when the call ends.
for iterations in "$n" 0; do
  printf 'a = ones(4)\ndef f(x) {\n  y = x * 2\n  return y + 1\n}\nfor i in 0..%s { a = f(a) }\nprint a[0]\n' \
    "$iterations" >"$work/local$iterations.dep"
done
echo "instructions per call of a function with a local, N = $n"
for engine in naive threaded; do
  echo "$engine: $(per_n local "$n" target/release/dep run --engine "$engine")"
done
