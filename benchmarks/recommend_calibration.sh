#!/usr/bin/env bash
# `partrain recommend --calibrate` against measurement (issue 9): the CPU gpt workload at world
# size 4 over every dp x tp x pp split of 4. Three calibration runs (dp2 x tp2, dp2 x pp2 and
# dp4, so all-reduce over 2 and 4 ranks and send/recv are measured) feed `recommend --check`
# for each split; each
# split is then run and its median step time (slowest rank per step, warm-up step left out) is
# compared with the prediction. Prints a table, the error per split and the share of the 15
# layout pairs whose predicted order matches the measured one.
set -euo pipefail
cd "$(dirname "$0")/.."
source benchmarks/recommend_bench_setup.sh

run() {  # run NAME DP TP PP: a traced launch of the gpt workload
  [[ -z $PREDICT_ONLY ]] || return 0
  "$PARTRAIN" -q launch -n 4 --workload gpt --dp "$2" --tp "$3" --pp "$4" --micro-batch "$MICRO" \
    --global-batch "$GLOBAL" --steps "$STEPS" --trace "$dir/$1.db" >/dev/null
}

run cal-tp 2 2 1
run cal-pp 2 1 2
run cal-dp 4 1 1
splits="4,1,1 1,4,1 1,1,4 2,2,1 2,1,2 1,2,2"
for split in $splits; do
  IFS=, read -r dp tp pp <<<"$split"
  run "run-$dp-$tp-$pp" "$dp" "$tp" "$pp"
  "$PARTRAIN" recommend --model builtin-gpt --gpu cpu --precision fp32 --gpus 4 --gpus-per-node 4 \
    --devices-per-node "$(nproc)" \
    --global-batch "$GLOBAL" --calibrate "$dir/cal-tp.db" --calibrate "$dir/cal-pp.db" \
    --calibrate "$dir/cal-dp.db" \
    --check "dp=$dp,tp=$tp,pp=$pp,mb=$MICRO,zero=0" --json >"$dir/pred-$dp-$tp-$pp.json"
done

python3 - "$dir" $splits <<'PY'
import itertools, json, sqlite3, statistics, sys
d, splits = sys.argv[1], sys.argv[2:]
rows = []
for split in splits:
    dp, tp, pp = split.split(",")
    name = f"{dp}-{tp}-{pp}"
    db = sqlite3.connect(f"file:{d}/run-{name}.db?mode=ro", uri=True)
    per_step = [r[0] for r in db.execute(
        "SELECT MAX(dur_ns) FROM steps WHERE step >= 1 GROUP BY step")]
    measured = statistics.median(per_step) / 1e9
    predicted = json.load(open(f"{d}/pred-{name}.json"))["candidates"][0]["step_time_s"]
    rows.append((f"dp{dp} tp{tp} pp{pp}", measured, predicted))
print(f"{'layout':<14} {'measured':>10} {'predicted':>10} {'error':>8}")
within = 0
for layout, m, p in rows:
    err = (p - m) / m * 100
    within += abs(err) <= 25
    print(f"{layout:<14} {m*1e3:>8.1f} ms {p*1e3:>8.1f} ms {err:>+7.1f}%")
pairs = list(itertools.combinations(rows, 2))
agree = sum((a[1] < b[1]) == (a[2] < b[2]) for a, b in pairs)
print(f"within 25%: {within}/{len(rows)}; ranking agreement: {agree}/{len(pairs)} pairs "
      f"({100*agree/len(pairs):.0f}%)")
PY
