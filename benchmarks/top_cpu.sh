#!/usr/bin/env bash
# What `partrain top` costs (issue 10: at most 5% of one core at the default 500 ms interval on a
# 1M-event trace). Two cases, each `partrain top` in a detached tmux session (80x24), its CPU time
# read from /proc/PID/stat (utime + stime) over SECONDS of steady state after WARMUP seconds:
#   finished: a real 4-rank GPT trace grown to EVENTS events as benchmarks/analyze_scale.sh grows
#             it (copies of its steps shifted in time), then opened by top;
#   live:     top following a 4-rank run while it writes its trace (LIVE_GROW seconds old when
#             top starts; the analyses' cost grows with the trace, the incremental reads do not).
# Prints the CPU share of one core per case and fails when one exceeds LIMIT_PCT. Checks that
# top really drew the trace (its overview names the 4 ranks), so an idle failure cannot pass.
set -euo pipefail
cd "$(dirname "$0")/.."
PARTRAIN=$(realpath "${PARTRAIN:-build/bin/partrain}")
EVENTS=${EVENTS:-1000000}
SECONDS_MEASURED=${SECONDS_MEASURED:-30}
WARMUP=${WARMUP:-5}
LIMIT_PCT=${LIMIT_PCT:-5}
LIVE_GROW=${LIVE_GROW:-2}  # seconds the live run writes before top starts (70: ~1M events here)
dir=$(mktemp -d)
socket=partrain-top-cpu-$$
launch_pid=
cleanup() {
  tmux -L "$socket" kill-server 2>/dev/null || true
  if [[ -n $launch_pid ]]; then kill -TERM -- "-$launch_pid" 2>/dev/null || true; fi
  rm -rf "$dir"
}
trap cleanup EXIT
clk_tck=$(getconf CLK_TCK)

cpu_ticks() {  # utime + stime of a pid (fields 14 and 15 of /proc/PID/stat)
  awk '{ sub(/^.*\) /, ""); print $12 + $13 }' "/proc/$1/stat"
}

# measure NAME TRACE: CPU % of one core that `partrain top TRACE` uses in steady state.
measure() {
  local name=$1 trace=$2
  tmux -u -L "$socket" -f /dev/null new-session -d -s "$name" -x 80 -y 24 \
    "sh -c 'echo \$\$ > $dir/$name.pid; exec $PARTRAIN top $trace'"
  for _ in $(seq 100); do [[ -s $dir/$name.pid ]] && break; sleep 0.1; done
  local pid; pid=$(cat "$dir/$name.pid")
  for _ in $(seq 300); do
    tmux -L "$socket" capture-pane -p -t "$name" | grep -q 'Overview: 4 of 4 ranks' && break
    sleep 0.1
  done
  tmux -L "$socket" capture-pane -p -t "$name" | grep -q 'Overview: 4 of 4 ranks' ||
    { echo "$name: top did not draw the overview" >&2; tmux -L "$socket" capture-pane -p -t "$name" >&2; exit 1; }
  local startup; startup=$(cpu_ticks "$pid")
  sleep "$WARMUP"
  local before; before=$(cpu_ticks "$pid")
  sleep "$SECONDS_MEASURED"
  local after; after=$(cpu_ticks "$pid")
  tmux -L "$socket" send-keys -t "$name" q
  local pct; pct=$(awk -v d=$((after - before)) -v hz="$clk_tck" -v s="$SECONDS_MEASURED" \
    'BEGIN { printf "%.2f", 100 * d / hz / s }')
  echo "$name: $pct% of one core over ${SECONDS_MEASURED} s at 500 ms" \
    "(startup: $(awk -v t="$startup" -v hz="$clk_tck" 'BEGIN { printf "%.2f", t / hz }') s CPU)"
  awk -v p="$pct" -v l="$LIMIT_PCT" 'BEGIN { exit !(p <= l) }' ||
    { echo "$name: over the ${LIMIT_PCT}% budget" >&2; exit 1; }
}

# Finished: a 1M-event trace.
db=$dir/finished.db
"$PARTRAIN" -q launch -n 4 --workload gpt --layers 2 --hidden 64 --heads 4 --seq 32 --vocab 128 \
  --dp 2 --tp 2 --micro-batch 2 --steps 6 --trace "$db"
benchmarks/grow_trace.sh "$db" "$EVENTS" 100000
events=$(sqlite3 "$db" 'SELECT (SELECT COUNT(*) FROM slice) + (SELECT COUNT(*) FROM memory)')
echo "finished trace: $events events (slices + memory samples), $(du -h "$db" | cut -f1)"
measure finished "$db"

# Live: top following a run that writes its trace the whole time.
live=$dir/live.db
setsid "$PARTRAIN" -q launch -n 4 --workload gpt --layers 2 --hidden 64 --heads 4 --seq 32 \
  --vocab 128 --dp 2 --tp 2 --steps 1000000 --trace "$live" >"$dir/launch.log" 2>&1 &
launch_pid=$!
for _ in $(seq 300); do [[ -s $live ]] && break; sleep 0.1; done
sleep "$LIVE_GROW"
echo "live trace when top starts: $(sqlite3 "$live" 'SELECT (SELECT COUNT(*) FROM slice) + (SELECT COUNT(*) FROM memory)') events"
measure live "$live"
echo "live trace at the end: $(sqlite3 "$live" 'SELECT (SELECT COUNT(*) FROM slice) + (SELECT COUNT(*) FROM memory)') events"
