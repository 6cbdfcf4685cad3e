#!/usr/bin/env bash
# Issue 38's cost check of --metrics-port: the built-in GPT on 2 ranks with and without the
# endpoint, RUNS times each, alternating so drift in machine load hits both alike. In both arms
# one curl process asks http://127.0.0.1:PORT/metrics every 100 ms (--rate 10/s; without the
# endpoint nothing listens there and each ask is refused at once), so the arms differ by the
# exporter alone, not by a scraper's process starts. Each run reports its median step time (the
# summary excludes the first step); the figure is the median over runs, and the ratio with /
# without. With the endpoint, the CPU time of its two threads (metrics-refresh, metrics-http) is
# read from /proc while the launcher runs, and the scrapes answered 200 are counted.
set -euo pipefail
cd "$(dirname "$0")/.."
PARTRAIN=${PARTRAIN:-build/bin/partrain}
RUNS=${RUNS:-5}
STEPS=${STEPS:-40}
MODEL="--workload gpt --steps $STEPS"
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT

thread_ticks() {  # $1: pid, $2: thread name -> its utime + stime in clock ticks (0 if none)
  local task fields
  for task in /proc/"$1"/task/*; do
    [[ "$(cat "$task/comm" 2>/dev/null)" == "$2" ]] || continue
    fields=($(sed 's/.*) //' "$task/stat" 2>/dev/null)) || return 0
    [[ ${#fields[@]} -gt 13 ]] && echo $((fields[11] + fields[12])) && return 0
  done
  echo 0
}

run() {  # $1: off|on, $2: index -> "median_ms [refresh_ticks http_ticks scrapes_ok]"
  local port=$((20000 + RANDOM % 20000)) extra="" refresh=0 http=0 t
  rm -f "$dir"/run.db*
  # The status codes go to stderr, unbuffered, so the count survives the kill below.
  curl -s -w '%{stderr}%{http_code}\n' --rate 10/s --max-time 2 \
    "http://127.0.0.1:$port/metrics?[1-100000]" >/dev/null 2>"$dir/codes" &
  local scraper=$!
  [[ $1 == on ]] && extra="--metrics-port $port --metrics-addr 127.0.0.1"
  "$PARTRAIN" -q launch -n 2 $MODEL --json --trace "$dir/run.db" $extra >"$dir/run.json" \
    2>"$dir/err" &
  local launcher=$!
  while kill -0 "$launcher" 2>/dev/null; do
    if [[ $1 == on ]]; then
      t=$(thread_ticks "$launcher" metrics-refresh); ((t > refresh)) && refresh=$t
      t=$(thread_ticks "$launcher" metrics-http); ((t > http)) && http=$t
    fi
    sleep 0.2
  done
  wait "$launcher"
  kill "$scraper" 2>/dev/null; wait "$scraper" 2>/dev/null || true
  local median
  median=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["step_time_ms"]["median"])' \
    "$dir/run.json")
  if [[ $1 == on ]]; then
    echo "$median $refresh $http $(grep -c '^200$' "$dir/codes" || true)"
  else
    echo "$median"
  fi
}

off=() on=() cpu=()
for i in $(seq 1 "$RUNS"); do
  off+=("$(run off "$i")")
  read -r median refresh http scrapes <<<"$(run on "$i")"
  on+=("$median")
  cpu+=("$refresh/$http/$scrapes")
done
python3 - "${off[*]}" "${on[*]}" "${cpu[*]}" "$(getconf CLK_TCK)" <<'PY'
import statistics, sys
off = [float(x) for x in sys.argv[1].split()]
on = [float(x) for x in sys.argv[2].split()]
cpu = [tuple(int(v) for v in x.split("/")) for x in sys.argv[3].split()]
tick_ms = 1000 / int(sys.argv[4])
print("without --metrics-port, run medians (ms):", " ".join(f"{x:.1f}" for x in off))
print("with it, scraped at 10/s (ms):           ", " ".join(f"{x:.1f}" for x in on))
print(f"medians {statistics.median(off):.1f} ms and {statistics.median(on):.1f} ms, "
      f"ratio {statistics.median(on) / statistics.median(off):.3f}")
print("exporter CPU per run (refresh + http threads, ms):",
      " ".join(f"{r * tick_ms:.0f}+{h * tick_ms:.0f}" for r, h, _ in cpu),
      "; scrapes answered 200 per run:", " ".join(str(s) for _, _, s in cpu))
PY
