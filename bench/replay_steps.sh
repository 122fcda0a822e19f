#!/usr/bin/env bash
# How long `dep replay` takes to answer a key on a long trace, as a user steps through it: the
# trace of issue 17's loop (N iterations, 2N statements) is stepped in a tmux pane, and each key
# is timed from the moment it is sent to the moment the pane shows the step it moves to (tmux is
# polled every 10 ms, so a figure under 20 ms says "at once"). Then `dep replay --end` (the last
# step printed whole and the summary), its time and peak memory.
# Usage: bench/replay_steps.sh [DEP_BINARY] [N]   (defaults: target/release/dep, 100000)
set -euo pipefail
cd "$(dirname "$0")/.."
dep=$(realpath "${1:-target/release/dep}")
n=${2:-100000}
[ -x "$dep" ] || { echo "replay_steps.sh: no dep binary at $dep (cargo build --release -p dep)" >&2; exit 2; }
command -v tmux >/dev/null || { echo "replay_steps.sh: needs tmux" >&2; exit 2; }
work=$(mktemp -d)
session="dep-replay-steps-$$"
trap 'tmux kill-session -t "$session" 2>/dev/null || true; rm -rf "$work"' EXIT
printf 'x = ones(64)\nfor i in 0..%d {\n  y = x + 1\n  x = y * 1\n}\n' "$n" >"$work/loop.dep"
"$dep" run --trace "$work/t.json" "$work/loop.dep" 2>/dev/null
echo "# $(date -u +%Y-%m-%dT%H:%M:%SZ) dep: $dep; trace of $((2 * n)) statements: $(stat -c %s "$work/t.json") bytes"

pane() { tmux capture-pane -p -t "$session"; }
tmux new-session -d -s "$session" -x 120 -y 40 "$dep replay $work/t.json"
start=$(date +%s.%N)
until pane | grep -q '^step 0/'; do sleep 0.1; done
steps=$(pane | grep -o '^step 0/[0-9]*' | cut -d/ -f2)
echo "loaded (first screen): $(echo "$(date +%s.%N) - $start" | bc) s; $steps steps"
# key WANTED_STEP KEY: sends KEY, prints the seconds until the pane shows WANTED_STEP (or that
# it did not within a minute: a build without that key).
key() {
  local wanted=$1 name=$2 sent
  sent=$(date +%s.%N)
  tmux send-keys -t "$session" "$name"
  until pane | grep -q "^step $wanted/"; do
    if (( $(echo "$(date +%s.%N) - $sent > 60" | bc) )); then
      printf '  %-6s to step %-9s no answer in 60 s\n' "$name" "$wanted"
      return
    fi
    sleep 0.01
  done
  printf '  %-6s to step %-9s %.3f s\n' "$name" "$wanted" "$(echo "$(date +%s.%N) - $sent" | bc)"
}
key 1 Right
key 2 Right
key "$steps" End
key $((steps - 1)) Left
key $((steps - 2)) Left
key $((steps - 102)) PageUp
key $((steps - 101)) Right
key 0 Home
tmux send-keys -t "$session" q
/usr/bin/time -f "dep replay --end: %e s, peak %M KB" "$dep" replay --end "$work/t.json" 2>&1 >/dev/null | tail -1
