#!/usr/bin/env bash
# `partrain recommend --calibrate` transfers across layouts (issue 35 item 6): the CPU gpt
# workload (4 layers, hidden 256, seq 128, global batch 8) as dp 2, tp 2 and pp 2 (1f1b), one
# rank per core and one BLAS thread, ROUNDS alternating runs of each. Calibrated from one
# layout's runs, the other two are predicted with --check and compared with their measured step
# (the median over the runs of each run's median slowest-rank step, warm-up left out); then
# calibrated from all three, each. Prints the 3 x 3 matrix of errors and the all-three row.
set -euo pipefail
cd "$(dirname "$0")/.."
source benchmarks/recommend_bench_setup.sh
ROUNDS=${ROUNDS:-5}
CPU_BIND=${CPU_BIND:-none}  # core: each rank bound to a core of its own (launch --cpu-bind)
declare -A split=([dp]="2 1 1" [tp]="1 2 1" [pp]="1 1 2")
layouts="dp tp pp"

# The machine may be shared: the load it ran under is printed with the figures.
load() { cut -d' ' -f1-3 /proc/loadavg; }
if [[ -z $PREDICT_ONLY ]]; then
  echo "ranks bound to cores: $CPU_BIND (launch --cpu-bind); load average before the runs: $(load)"
  for round in $(seq 1 "$ROUNDS"); do
    for name in $layouts; do
      read -r dp tp pp <<<"${split[$name]}"
      "$PARTRAIN" -q launch -n 2 --workload gpt --dp "$dp" --tp "$tp" --pp "$pp" \
        --pp-schedule 1f1b --micro-batch "$MICRO" --global-batch "$GLOBAL" --steps "$STEPS" \
        --blas-threads 1 --cpu-bind "$CPU_BIND" --trace "$dir/$name-$round.db" >/dev/null 2>&1
    done
  done
  echo "load average after the runs: $(load)"
fi

predict() {  # predict FROM TARGET: --check TARGET calibrated from FROM's runs (all: every run)
  local from=$1 target=$2 args=()
  read -r dp tp pp <<<"${split[$target]}"
  for db in "$dir"/*.db; do
    [[ $from == all || $(basename "$db") == "$from"-* ]] && args+=(--calibrate "$db")
  done
  "$PARTRAIN" recommend --model builtin-gpt --gpu cpu --precision fp32 --gpus 2 \
    --gpus-per-node 2 --devices-per-node "$(nproc)" --global-batch "$GLOBAL" "${args[@]}" \
    --check "dp=$dp,tp=$tp,pp=$pp,mb=$MICRO,zero=0,schedule=1f1b" --json \
    >"$dir/pred-$from-$target.json"
}
for from in $layouts all; do
  for target in $layouts; do predict "$from" "$target"; done
done

python3 - "$dir" $layouts <<'PY'
import glob, json, sqlite3, statistics, sys
d, layouts = sys.argv[1], sys.argv[2:]
measured, spread = {}, {}
for name in layouts:
    runs = []
    for db in sorted(glob.glob(f"{d}/{name}-*.db")):
        con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
        steps = [r[0] for r in con.execute(
            "SELECT MAX(dur_ns) FROM steps WHERE step >= 1 GROUP BY step")]
        runs.append(statistics.median(steps) / 1e9)
    measured[name] = statistics.median(runs)
    spread[name] = (min(runs), max(runs), len(runs))
print("measured step (median of the runs' medians; min-max over the runs):")
for name in layouts:
    lo, hi, n = spread[name]
    print(f"  {name}2: {measured[name]*1e3:.1f} ms ({lo*1e3:.1f}-{hi*1e3:.1f} ms, {n} runs)")
print("\npredicted error, (predicted - measured) / measured:")
print(f"{'calibrated from':<16}" + "".join(f"{t + '2':>18}" for t in layouts))
worst = {"one": 0.0, "all": 0.0}
for source in layouts + ["all"]:
    cells = []
    for target in layouts:
        pred = json.load(open(f"{d}/pred-{source}-{target}.json"))["candidates"][0]["step_time_s"]
        err = (pred - measured[target]) / measured[target]
        if source == "all":
            worst["all"] = max(worst["all"], abs(err))
        elif source != target:
            worst["one"] = max(worst["one"], abs(err))
        cells.append(f"{pred*1e3:8.1f} ms {100*err:+6.1f}%")
    print(f"{source + ('2' if source != 'all' else ' three'):<16}" + "".join(f"{c:>18}" for c in cells))
print(f"\nworst off-diagonal |error| {100*worst['one']:.1f}% (target 20%); "
      f"from all three {100*worst['all']:.1f}% (target 10%)")
PY
