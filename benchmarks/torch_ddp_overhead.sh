#!/usr/bin/env bash
# Issue 32's benchmark: a gloo DDP job (examples/pytorch/ddp_train.py, unmodified) traced by
# partrain against the same job under torchrun untraced, RUNS alternating runs each. Each run
# gives rank 0's median step time (step 0 left out: DDP builds its buckets there) and the time
# from starting the command to the end of step 0; the figures are medians over runs, and the
# step-time ratio traced / untraced (target <= 1.03).
#   MODE=launch (default): `partrain launch -n N -- python ddp_train.py`
#   MODE=trace: `partrain trace -- torchrun --nproc-per-node N ddp_train.py`
set -euo pipefail
cd "$(dirname "$0")/.."
PARTRAIN=${PARTRAIN:-build/bin/partrain}
PYTHON=${PARTRAIN_TORCH_PYTHON:-${PARTRAIN_CACHE:-$HOME/.cache/partrain}/torch-venv/bin/python}
TORCHRUN=$(dirname "$PYTHON")/torchrun
RUNS=${RUNS:-5}
NPROC=${NPROC:-2}
MODE=${MODE:-launch}
ARGS="--steps ${STEPS:-30} --hidden ${HIDDEN:-512} --batch ${BATCH:-64} --timing"
SCRIPT=examples/pytorch/ddp_train.py
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT

run() {  # $1: traced|untraced, $2: run index -> "median_step_ms time_to_first_step_s"
  local start out
  start=$(date +%s.%N)
  if [[ $1 == untraced ]]; then
    out=$("$TORCHRUN" --standalone --nproc-per-node "$NPROC" $SCRIPT $ARGS 2>"$dir/err")
  elif [[ $MODE == launch ]]; then
    out=$("$PARTRAIN" launch -n "$NPROC" --trace "$dir/run-$2.db" -- "$PYTHON" $SCRIPT $ARGS \
          2>"$dir/err")
  else
    out=$("$PARTRAIN" trace -o "$dir/run-$2.db" -- "$TORCHRUN" --standalone \
          --nproc-per-node "$NPROC" $SCRIPT $ARGS 2>"$dir/err")
  fi
  python3 - "$start" "$out" <<'PY'
import re, sys
start, out = float(sys.argv[1]), sys.argv[2]
m = re.search(r"median_step_ms=([0-9.]+) first_step_end_unix=([0-9.]+)", out)
if not m:
    sys.exit(f"no timing line in: {out[-500:]}")
print(f"{float(m.group(1)):.3f} {float(m.group(2)) - start:.3f}")
PY
}

declare -a ts tf us uf
for i in $(seq 1 "$RUNS"); do
  read -r s f < <(run untraced "$i"); us+=("$s"); uf+=("$f")
  read -r s f < <(run traced "$i"); ts+=("$s"); tf+=("$f")
done
python3 - "${us[*]}" "${uf[*]}" "${ts[*]}" "${tf[*]}" "$MODE" "$NPROC" <<'PY'
import statistics, sys
us, uf, ts, tf = ([float(x) for x in a.split()] for a in sys.argv[1:5])
mode, nproc = sys.argv[5], sys.argv[6]
traced = {"launch": "partrain launch", "trace": "partrain trace -- torchrun"}[mode]
print(f"torchrun (untraced) step ms: {' '.join(f'{x:.2f}' for x in us)}")
print(f"{traced} (traced) step ms: {' '.join(f'{x:.2f}' for x in ts)}")
print(f"torchrun time to first step s: {' '.join(f'{x:.2f}' for x in uf)}")
print(f"{traced} time to first step s: {' '.join(f'{x:.2f}' for x in tf)}")
u, t = statistics.median(us), statistics.median(ts)
print(f"{nproc} ranks: median step {u:.2f} ms untraced, {t:.2f} ms traced, ratio {t / u:.4f} "
      f"(target <= 1.03); time to first step {statistics.median(uf):.2f} s untraced, "
      f"{statistics.median(tf):.2f} s traced")
PY
