#!/usr/bin/env bash
# Issue 4's overhead benchmark: the same 4-rank GPT run traced (the default) and with --no-trace,
# RUNS times each, alternating so drift in machine load hits both alike. Each run reports its median
# step time (the summary excludes the first step); the figure is the median over runs of those
# medians, and the ratio traced / untraced.
set -euo pipefail
cd "$(dirname "$0")/.."
PARTRAIN=${PARTRAIN:-build/bin/partrain}
RUNS=${RUNS:-5}
STEPS=${STEPS:-8}
MODEL="--workload gpt --layers 4 --hidden 256 --heads 8 --seq 128 --vocab 512 --global-batch 8"
LAYOUT=${LAYOUT:---dp 2 --tp 2 --micro-batch 2}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT

run() {  # $1: traced|untraced, $2: run index -> the run's median step time (ms) on stdout
  local trace_flag="--no-trace"
  [[ $1 == traced ]] && trace_flag="--trace $dir/run-$2.db"
  "$PARTRAIN" -q launch -n 4 $MODEL $LAYOUT --steps "$STEPS" --json $trace_flag 2>"$dir/err" |
    python3 -c 'import json,sys; print(json.load(sys.stdin)["step_time_ms"]["median"])'
}

traced=() untraced=()
for i in $(seq 1 "$RUNS"); do
  untraced+=("$(run untraced "$i")")
  traced+=("$(run traced "$i")")
done
python3 - "${untraced[*]}" "${traced[*]}" "$dir" <<'PY'
import statistics, sys, glob, os
untraced = [float(x) for x in sys.argv[1].split()]
traced = [float(x) for x in sys.argv[2].split()]
u, t = statistics.median(untraced), statistics.median(traced)
files = glob.glob(os.path.join(sys.argv[3], "run-*.db"))
size = statistics.median(os.path.getsize(f) for f in files) if files else 0
print(f"untraced step time medians (ms): {' '.join(f'{x:.1f}' for x in untraced)}")
print(f"traced   step time medians (ms): {' '.join(f'{x:.1f}' for x in traced)}")
print(f"median untraced {u:.1f} ms, median traced {t:.1f} ms, ratio {t / u:.4f} "
      f"(target <= 1.03); trace file median {size / 1024:.0f} KiB")
PY
