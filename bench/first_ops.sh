#!/usr/bin/env bash
# How long the first ops on fresh worker threads take, as a trace shows them: a script of five
# tiny ops (`a = ones(4)`, ...) run ROUNDS times on the threaded engine with `--trace`, and each
# op's duration in µs, per binary (compare builds side by side: a worktree's binary, a copy).
# A first op should take about what a later one does; one that takes milliseconds pays for
# something that is not its own work (a fresh huge page zeroed whole, for one: bench/README.md).
# Usage: bench/first_ops.sh [ROUNDS] [DEP_BINARY ...]   (defaults: 3, target/release/dep)
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-3}
shift || true
[ $# -gt 0 ] || set -- target/release/dep
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
printf 'a = ones(4)\nb = ones(4)\nc = a + b\nd = ones(4)\nprint c\n' >"$work/first.dep"
for _ in $(seq "$rounds"); do
  for dep in "$@"; do
    "$dep" run --engine threaded --trace "$work/first.json" "$work/first.dep" >/dev/null 2>&1
    python3 - "$work/first.json" "$dep" <<'PY'
import json, sys
trace = json.load(open(sys.argv[1]))
events = trace["traceEvents"] if isinstance(trace, dict) else trace
slices = sorted((e for e in events if e.get("ph") == "X"), key=lambda e: e["ts"])
print(sys.argv[2] + ": " + "  ".join(f"{e['name']} {e['dur']:.0f} µs" for e in slices))
PY
  done
done
