#!/usr/bin/env bash
# Issue 3's benchmark: step time, tokens/s and GEMM efficiency of each strategy at world size 4
# for the GPT of DESIGN.md's demo size (4 layers, hidden 256, 8 heads, seq 128, vocab 512), global
# batch 8, fp32 on the CPU device, 8 steps (the first excluded from the medians).
# Prints one Markdown table row per layout; the sgemm peak is measured in the same run.
set -euo pipefail
cd "$(dirname "$0")/.."
PARTRAIN=${PARTRAIN:-build/bin/partrain}
STEPS=${STEPS:-8}
MODEL="--workload gpt --layers 4 --hidden 256 --heads 8 --seq 128 --vocab 512 --global-batch 8"

layouts=(
  "ddp (dp 4)|--strategy ddp --micro-batch 2"
  "zero1 (dp 4)|--strategy zero1 --micro-batch 2"
  "zero2 (dp 4)|--strategy zero2 --micro-batch 2"
  "fsdp (dp 4)|--strategy fsdp --micro-batch 2"
  "tp 4|--tp 4 --micro-batch 8"
  "tp 4 + sp|--tp 4 --sp --micro-batch 8"
  "pp 4 gpipe|--pp 4 --pp-schedule gpipe --micro-batch 2"
  "pp 4 1f1b|--pp 4 --pp-schedule 1f1b --micro-batch 2"
  "dp 2 x pp 2 interleaved (vpp 2)|--dp 2 --pp 2 --pp-schedule interleaved --vpp 2 --micro-batch 2"
  "dp 2 x tp 2|--dp 2 --tp 2 --micro-batch 4"
  "dp 2 x pp 2|--dp 2 --pp 2 --micro-batch 2"
  "tp 2 x pp 2|--tp 2 --pp 2 --micro-batch 2"
)

echo "| layout | step time median (ms) | p90 (ms) | tokens/s | GEMM share of rank 0 | GEMM GFLOP/s | sgemm peak GFLOP/s | MFU | final loss |"
echo "|---|---|---|---|---|---|---|---|---|"
for entry in "${layouts[@]}"; do
  name=${entry%%|*}
  flags=${entry#*|}
  if ! out=$("$PARTRAIN" -q launch -n 4 $MODEL $flags --steps "$STEPS" --json 2>/tmp/bench-err); then
    echo "| $name | failed: $(tail -1 /tmp/bench-err) |"
    continue
  fi
  python3 - "$name" "$out" <<'PY'
import json, sys
name, doc = sys.argv[1], json.loads(sys.argv[2])
step = doc["step_time_ms"]
gemm = doc["gemm"]
share = gemm["share_of_run"]
print(f'| {name} | {step["median"]:.1f} | {step["p90"]:.1f} | {doc["tokens_per_s"]:.0f} | '
      f'{100 * min(share, 1):.0f}% | {gemm["gflops"]:.1f} | {doc["peak_flops_per_rank"] / 1e9:.1f} | '
      f'{100 * doc["mfu"]:.1f}% | {doc["losses"][-1]:.4f} |')
PY
done
