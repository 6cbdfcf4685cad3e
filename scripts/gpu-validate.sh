#!/usr/bin/env bash
# The one command that validates partrain on a machine with a GPU: every GPU test executable and
# the GPU benchmarks, each under its own time limit, all within 10 minutes, then a short table.
# Runs from an extracted partrain-gpu-bundle (beside bin/) or from a build tree (docs/gpu-validation.md).
set -euo pipefail

usage() {
  cat <<'EOF'
Usage: gpu-validate.sh [--build-dir DIR] [--out DIR] [--budget SECONDS]

Runs, in this order, each with its own time limit and all within the budget:
  cuda libraries       the CUDA libraries partrain needs, found on this machine
  partrain starts      bin/partrain --version (the bundle's libraries load)
  gpu_*_test           every GPU test executable (GoogleTest; label gpu in the build)
  torch gemm ceiling   an 8192^3 bf16 matrix product through PyTorch, when python3 has torch
  partrain gemm        partrain bench gemm: the same product as the workloads issue it (bf16
                       operands and out), without and with a bias, checked; vs the ceiling
  bench nccl           partrain bench collectives --backend nccl, one rank per visible GPU
                       (8 B to 128 MiB)
  gpt cuda bf16        partrain launch --workload gpt --device cuda (hidden 4096, 8 layers,
                       seq 2048, bf16): MFU against the GPU preset's dense bf16 peak and against
                       the GEMM rate measured at start, median step time, the workload's GEMM rate
  gpt memory           that run's peak memory by category vs `partrain memory` for its layout
  gpt trace overhead   the same run traced: median step time traced / untraced
  gpt kernels          that trace's kernel time a step, by kernel (all of them in gpt-kernels.txt)
  gpt cuda bf16 mb4    the same model at micro-batch 4: MFU, step time
  gpt cuda bf16 mb8    and at micro-batch 8, on a GPU of 100 GiB or more (an H200)
  torch nccl trace     a PyTorch DDP program on NCCL (tests/torch_nccl_program.py, one rank)
                       under `partrain trace -- python3 -m torch.distributed.run`, its trace
                       checked (check_torch_trace.py): every all_reduce with its bytes and
                       GPU work, the model's kernels by name, its NVTX steps
  torch trace overhead the same program plain and under torch.profiler: median step times
                       and the ratios partrain / plain and torch.profiler / plain

and prints a table: check, result (PASS, FAIL or SKIPPED with the reason), key figure, seconds.
Without a GPU every GPU row is SKIPPED with the reason; none is ever reported as passed.

Options:
  --build-dir DIR   a build tree to take partrain and the tests from (default: the bundle this
                    script is in, else build beside scripts/)
  --out DIR         where each check's log and the table go (default: ./gpu-validate-<time>)
  --budget SECONDS  total time for all checks (default 570, under 10 minutes)
  -h, --help        this help

CUDA libraries are looked for in LD_LIBRARY_PATH, the loader's cache, /usr/local/cuda and
python3's nvidia-* wheels (pip's nvidia-nccl-cu13, ...); the directories found are added to
LD_LIBRARY_PATH for the checks.

Exit codes: 0 a GPU was visible and nothing failed; 1 a check failed; 2 bad usage; 3 no partrain
to validate here (not a bundle, no build); 4 no GPU visible: nothing failed, GPU checks SKIPPED.
EOF
}

# A bug here must not pass for a result: say where, exit 1 (a failure).
trap 'echo "gpu-validate: internal error at line $LINENO (exit $?): please report it" >&2; exit 1' ERR

usage_error() { echo "gpu-validate: $*" >&2; echo "Try 'gpu-validate.sh --help'." >&2; exit 2; }

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
build_dir=""
out_dir=""
budget=570
while [ $# -gt 0 ]; do
  case "$1" in
    --build-dir) [ $# -ge 2 ] || usage_error "--build-dir needs a directory"; build_dir=$2; shift 2 ;;
    --out) [ $# -ge 2 ] || usage_error "--out needs a directory"; out_dir=$2; shift 2 ;;
    --budget) [[ ${2:-} =~ ^[0-9]+$ ]] || usage_error "--budget needs a number of seconds"; budget=$2; shift 2 ;;
    -h | --help) usage; exit 0 ;;
    *) usage_error "unknown argument '$1'" ;;
  esac
done

# Where partrain and the tests are: this bundle, or a build tree.
if [ -z "$build_dir" ] && [ -x "$here/bin/partrain" ]; then
  layout="bundle $here"
  partrain="$here/bin/partrain"
  tests=("$here"/bin/gpu_*_test)
else
  build_dir=${build_dir:-$here/../build}
  if [ ! -x "$build_dir/bin/partrain" ]; then
    echo "gpu-validate: error: no partrain in $build_dir/bin: run this from an extracted" \
         "partrain-gpu-bundle, or build first (make build) and pass --build-dir" >&2
    exit 3
  fi
  build_dir=$(cd "$build_dir" && pwd)
  layout="build tree $build_dir"
  partrain="$build_dir/bin/partrain"
  tests=("$build_dir"/tests/gpu_*_test)
fi
[ -e "${tests[0]}" ] || tests=()
# In a build tree with CUDA parts (the only one that builds tests/gpu), a tests/gpu/*_test.cpp
# whose executable was not built is a failure, not a skip.
unbuilt=()
if [ -n "$build_dir" ] && [ -d "$here/../tests/gpu" ]; then
  for source in "$here"/../tests/gpu/*_test.cpp; do
    [ -e "$source" ] && [ ! -x "$build_dir/tests/gpu_$(basename "$source" .cpp)" ] &&
      unbuilt+=("gpu_$(basename "$source" .cpp)")
  done
fi
export PARTRAIN_BINARY="$partrain"  # the GPU tests run this partrain (tests/integration/command_runner.h)

out_dir=${out_dir:-$PWD/gpu-validate-$(date -u +%Y%m%d-%H%M%S)}
mkdir -p "$out_dir" || { echo "gpu-validate: error: cannot create $out_dir: pass --out DIR" >&2; exit 2; }
out_dir=$(cd "$out_dir" && pwd)
start=$(date +%s)

# ---- the table ----------------------------------------------------------------------------------
row_names=() row_results=() row_figures=() row_seconds=() row_reasons=()
add_row() {  # NAME RESULT FIGURE SECONDS REASON
  row_names+=("$1") row_results+=("$2") row_figures+=("$3") row_seconds+=("$4") row_reasons+=("$5")
  printf 'gpu-validate: %-20s %-7s %s%s\n' "$1" "$2" "$3" "${5:+ ($5)}" >&2
}
print_table() {  # columns as wide as their longest entry (names, figures), reasons last
  local i name_width=5 figure_width=6
  for i in "${!row_names[@]}"; do
    [ ${#row_names[$i]} -le $name_width ] || name_width=${#row_names[$i]}
    [ ${#row_figures[$i]} -le $figure_width ] || figure_width=${#row_figures[$i]}
  done
  printf '%-*s  %-7s  %-*s  %7s  %s\n' $name_width check result $figure_width figure time reason
  for i in "${!row_names[@]}"; do
    printf '%-*s  %-7s  %-*s  %7s  %s\n' $name_width "${row_names[$i]}" "${row_results[$i]}" \
      $figure_width "${row_figures[$i]}" "${row_seconds[$i]} s" "${row_reasons[$i]}"
  done
}

# ---- running one check under the time limit -------------------------------------------------------
step_seconds=0 step_rc=0
# LIMIT LOG [--json FILE] COMMAND...: runs it with stdout and stderr in LOG (stdout in FILE with
# --json); sets step_rc, step_seconds.
run_step() {
  local limit=$1 log=$2 stdout=$2
  shift 2
  if [ "$1" = --json ]; then stdout=$2; shift 2; fi
  local t0 t1
  t0=$(date +%s.%N)
  step_rc=0
  : >"$log" >"$stdout"  # emptied, then appended to: one file can take both streams
  timeout --kill-after=10 "$limit" "$@" >>"$stdout" 2>>"$log" </dev/null || step_rc=$?
  t1=$(date +%s.%N)
  step_seconds=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", b - a }')
}
# A / B as "1.069x", or "?" when either is missing or not positive.
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a > 0 && b > 0) printf "%.3fx", a / b; else printf "?" }'; }
# Seconds A + B, as the table shows them.
add_seconds() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.1f", a + b }'; }
# NAME WANTED: sets limit to WANTED cut to what is left of the budget; with under 15 s left, adds
# NAME's SKIPPED row and fails instead (timeout 0 would mean no limit at all).
start_check() {
  local left=$((budget - ($(date +%s) - start)))
  limit=$((left < $2 ? left : $2))
  [ "$limit" -lt 15 ] || return 0
  add_row "$1" SKIPPED "-" 0.0 "the ${budget} s budget is spent"
  return 1
}
# Why a command failed: its first error line, else its last line.
failure_line() {
  { grep -m1 -i 'error' "$1" || grep -v '^[[:space:]]*$' "$1" | tail -1; } | sed 's/^ *//' | cut -c1-160
}

# JSON figures through python3 (on the GPU machines with PyTorch; here with the build).
have_python=0
command -v python3 >/dev/null && have_python=1
json_eval() {  # FILE EXPRESSION-of-d: prints the value, or nothing
  [ $have_python -eq 1 ] || return 0
  python3 -c 'import json, sys
try:
    d = json.load(open(sys.argv[1]))
    print(eval(sys.argv[2]))
except Exception:
    pass' "$1" "$2" 2>/dev/null || true
}

# ---- GPUs -----------------------------------------------------------------------------------------
gpus=0 gpu_reason="" gpu_names="" gpu0_name=""
if command -v nvidia-smi >/dev/null; then
  if smi=$(timeout 30 nvidia-smi -L 2>&1); then
    gpus=$(grep -c '^GPU [0-9]' <<<"$smi" || true)
    gpu_names=$(grep '^GPU [0-9]' <<<"$smi" | sed 's/^GPU [0-9]*: //; s/ (UUID.*//' | sort | uniq -c |
                awk '{ $1 = $1 "x"; print }' | paste -sd ',' || true)
    gpu0_name=$(grep -m1 '^GPU [0-9]' <<<"$smi" | sed 's/^GPU [0-9]*: //; s/ (UUID.*//' || true)
    [ "$gpus" -gt 0 ] || gpu_reason="no GPU visible: nvidia-smi -L lists none"
  else
    gpu_reason="no GPU visible: nvidia-smi -L failed ($(head -1 <<<"$smi" | cut -c1-100))"
  fi
elif compgen -G '/dev/nvidia[0-9]*' >/dev/null; then
  gpus=$(compgen -G '/dev/nvidia[0-9]*' | wc -l)
  gpu_names="${gpus} device(s) in /dev, no nvidia-smi"
else
  gpu_reason="no GPU visible: no nvidia-smi and no /dev/nvidia[0-9]* device"
fi
if [ "$gpus" -gt 0 ] && [ -n "${CUDA_VISIBLE_DEVICES+set}" ]; then
  visible=$(tr ',' '\n' <<<"$CUDA_VISIBLE_DEVICES" | grep -cv '^\(\|-1\|NoDevFiles\)$' || true)
  [ "$visible" -lt "$gpus" ] && gpus=$visible
  [ "$gpus" -gt 0 ] || gpu_reason="no GPU visible: CUDA_VISIBLE_DEVICES='$CUDA_VISIBLE_DEVICES' hides them"
fi

{
  echo "== partrain GPU validation: $(date -u '+%Y-%m-%d %H:%M UTC') on $(uname -n) =="
  echo "== $layout; GPUs: $gpus${gpu_names:+ ($gpu_names)}${gpu_reason:+ ($gpu_reason)}; logs in $out_dir =="
} | tee "$out_dir/header.txt" >&2

# ---- 1. the CUDA libraries, before anything loads them ---------------------------------------
has_cuda=0  # built with CUDA parts: it links libcudart
# (Outputs are read whole before grep -q: on a pipe, its early exit would end the writer with
# SIGPIPE, which pipefail reports as a failure.)
partrain_ldd=$(ldd "$partrain" 2>/dev/null || true)
if grep -q 'libcudart' <<<"$partrain_ldd"; then has_cuda=1; fi
# Those the binaries link (cudart, cuBLAS, CUPTI, NCCL: whatever ldd names).
cuda_dirs_candidates() {
  local dir
  for dir in /usr/local/cuda/lib64 /usr/local/cuda/lib /usr/local/cuda/targets/x86_64-linux/lib \
             /usr/local/cuda/extras/CUPTI/lib64 /usr/lib/x86_64-linux-gnu; do
    [ -d "$dir" ] && echo "$dir"
  done
  if [ $have_python -eq 1 ]; then
    timeout 30 python3 -c 'import nvidia, os
for p in nvidia.__path__:
    for d in sorted(os.listdir(p)):
        if os.path.isdir(os.path.join(p, d, "lib")): print(os.path.join(p, d, "lib"))' 2>/dev/null || true
  fi
  compgen -G '/opt/*/.venv/lib/python3*/site-packages/nvidia/*/lib' || true
  compgen -G '/usr/local/lib/python3*/dist-packages/nvidia/*/lib' || true
}
loader_cache=$("$(command -v ldconfig || echo /sbin/ldconfig)" -p 2>/dev/null || true)
library_known() {  # SONAME: found through LD_LIBRARY_PATH or the loader's cache?
  local dir
  IFS=: read -r -a dirs <<<"${LD_LIBRARY_PATH:-}"
  for dir in "${dirs[@]}"; do [ -n "$dir" ] && [ -e "$dir/$1" ] && return 0; done
  awk -v soname="$1" '$1 == soname { found = 1 } END { exit !found }' <<<"$loader_cache"
}
if [ $has_cuda -eq 0 ] && [ "$gpus" -gt 0 ]; then
  add_row "cuda libraries" FAIL "-" 0.0 \
    "this partrain was built without CUDA parts: rebuild with -DPARTRAIN_CUDA=ON (make gpu-bundle)"
elif [ $has_cuda -eq 0 ]; then
  add_row "cuda libraries" SKIPPED "-" 0.0 "this partrain was built without CUDA parts"
else
  t0=$(date +%s.%N)
  wanted=$( (echo "$partrain_ldd"; for t in "${tests[@]}"; do ldd "$t" || true; done) 2>/dev/null |
            awk '$1 ~ /^lib(cudart|cublas|cublasLt|cupti|nccl|nvrtc|nvJitLink)\.so/ { print $1 }' | sort -u)
  missing=() found_in=()
  candidates=$(cuda_dirs_candidates | awk '!seen[$0]++')
  for soname in $wanted; do
    library_known "$soname" && continue
    dir=$(while read -r d; do [ -e "$d/$soname" ] && { echo "$d"; break; }; done <<<"$candidates")
    if [ -n "$dir" ]; then
      export LD_LIBRARY_PATH="$dir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
      found_in+=("$dir ($soname)")
    elif grep -q "^[[:space:]]*$soname => /" <<<"$partrain_ldd"; then
      :  # found through the build tree's own RUNPATH
    else
      missing+=("$soname")
    fi
  done
  seconds=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
  count=$(wc -w <<<"$wanted")
  if [ ${#missing[@]} -eq 0 ]; then
    where="all through the loader's own path"
    [ ${#found_in[@]} -eq 0 ] || where="LD_LIBRARY_PATH gets $(printf '%s, ' "${found_in[@]}" | sed 's/, $//')"
    add_row "cuda libraries" PASS "$count/$count found" "$seconds" "$where"
  elif [ "$gpus" -eq 0 ]; then
    add_row "cuda libraries" SKIPPED "$((count - ${#missing[@]}))/$count found" "$seconds" \
      "$gpu_reason; missing here: ${missing[*]}"
  else
    add_row "cuda libraries" FAIL "$((count - ${#missing[@]}))/$count found" "$seconds" \
      "missing: ${missing[*]}: install the CUDA toolkit / NCCL, or put their directory in LD_LIBRARY_PATH"
  fi
fi
{
  echo "LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-}"
  echo "CUDA libraries wanted: $(paste -sd " " <<<"${wanted:-none}")"
  echo "missing: ${missing[*]:-none}"
} >"$out_dir/cuda-libraries.txt"

# ---- 2. partrain starts ---------------------------------------------------------------------
run_step 30 "$out_dir/partrain-version.log" "$partrain" --version
partrain_ok=0
if [ $step_rc -eq 0 ]; then
  partrain_ok=1
  cuda_line=$(grep -m1 'CUDA runtime' "$out_dir/partrain-version.log" | sed 's/^ *//; s/  */ /g; s/, arch.*//' || true)
  add_row "partrain starts" PASS "$(head -1 "$out_dir/partrain-version.log")${cuda_line:+; $cuda_line}" "$step_seconds" ""
else
  add_row "partrain starts" FAIL "exit $step_rc" "$step_seconds" \
    "$(failure_line "$out_dir/partrain-version.log"); MANIFEST.txt names the glibc and CUDA libraries it needs"
fi

# ---- 3. the GPU test executables ----------------------------------------------------------------
gtest_counts() {  # LOG: "passed skipped failed" from GoogleTest's summary lines
  awk '/^\[  PASSED  \] [0-9]+ test/ { p = $4 } /^\[  SKIPPED \] [0-9]+ test/ { s = $4 }
       /^\[  FAILED  \] [0-9]+ test/ { f = $4 } END { print p + 0, s + 0, f + 0 }' "$1"
}
gtest_skip_reasons() {  # LOG: the tests' own skip messages, each once
  awk '/: Skipped$/ { getline; print }' "$1" | sort -u | paste -sd ';' | sed 's/;/; /g' | cut -c1-120
}
gtest_failed_names() {
  awk '/^\[  FAILED  \] [A-Za-z_]/ && !/tests?, listed below/ { print $4 }' "$1" | sort -u | head -3 | paste -sd ' '
}
if [ $has_cuda -eq 0 ]; then
  [ ${#tests[@]} -gt 0 ] || add_row "gpu tests" SKIPPED "0 executables" 0.0 "this partrain was built without CUDA parts"
elif [ ${#unbuilt[@]} -gt 0 ]; then
  for name in "${unbuilt[@]}"; do
    add_row "$name" FAIL "-" 0.0 "not built: cmake --build $build_dir --target $name"
  done
elif [ ${#tests[@]} -eq 0 ]; then
  add_row "gpu tests" FAIL "0 executables" 0.0 "no gpu_*_test beside partrain: rebuild the bundle (make gpu-bundle)"
fi
for test in "${tests[@]}"; do
  name=$(basename "$test")
  log="$out_dir/$name.log"
  start_check "$name" 240 || continue
  run_step "$limit" "$log" "$test" --gtest_color=no
  read -r passed skipped failed < <(gtest_counts "$log")
  figure="$passed passed, $skipped skipped, $failed failed"
  if [ $step_rc -eq 124 ] || [ $step_rc -eq 137 ]; then
    add_row "$name" FAIL "$figure" "$step_seconds" "timed out after $limit s"
  elif [ "$failed" -gt 0 ]; then
    add_row "$name" FAIL "$figure" "$step_seconds" "failed: $(gtest_failed_names "$log")"
  elif [ $step_rc -ne 0 ]; then
    if [ "$gpus" -eq 0 ] && [ $step_rc -eq 127 ]; then
      add_row "$name" SKIPPED "-" "$step_seconds" "$gpu_reason; it cannot start here: $(failure_line "$log")"
    else
      add_row "$name" FAIL "exit $step_rc" "$step_seconds" "$(failure_line "$log")"
    fi
  elif [ $((passed + skipped)) -eq 0 ]; then
    add_row "$name" FAIL "$figure" "$step_seconds" "no test ran"
  elif [ "$passed" -eq 0 ] && [ "$gpus" -gt 0 ] && grep -qi 'no GPU' <<<"$(gtest_skip_reasons "$log")"; then
    add_row "$name" FAIL "$figure" "$step_seconds" \
      "$gpus GPU(s) listed, yet the test saw none: $(gtest_skip_reasons "$log") (driver vs CUDA runtime?)"
  elif [ "$passed" -eq 0 ]; then
    add_row "$name" SKIPPED "$figure" "$step_seconds" "$(gtest_skip_reasons "$log")"
  else
    reasons=""
    [ "$skipped" -eq 0 ] || reasons="skipped: $(gtest_skip_reasons "$log")"
    add_row "$name" PASS "$figure" "$step_seconds" "$reasons"
  fi
done

# ---- 4.-8. the benchmarks -----------------------------------------------------------------------
skip_reason=""  # why the GPU benchmarks cannot run here, if they cannot
if [ "$gpus" -eq 0 ]; then skip_reason=$gpu_reason
elif [ $partrain_ok -eq 0 ]; then skip_reason="partrain does not start (row 'partrain starts')"
elif [ $has_cuda -eq 0 ]; then skip_reason="this partrain was built without CUDA parts"
fi

# The device's bf16 GEMM ceiling: the same 8192^3 product through PyTorch (KINDS.md measured
# 769-798 TFLOP/s on H100/H200 this way: mean of 10 after 3 warm-ups, random data).
ceiling_tflops=""
if [ -n "$skip_reason" ]; then
  add_row "torch gemm ceiling" SKIPPED "-" 0.0 "$skip_reason"
elif [ $have_python -eq 0 ]; then
  add_row "torch gemm ceiling" SKIPPED "-" 0.0 "no python3 here; the ceiling needs PyTorch"
elif start_check "torch gemm ceiling" 90; then
  run_step "$limit" "$out_dir/torch-gemm.log" python3 -c '
try:
    import torch
except ModuleNotFoundError:
    raise SystemExit("no torch")
n = 8192
a = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
b = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
for _ in range(3): a @ b
begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
begin.record()
for _ in range(10): a @ b
end.record(); torch.cuda.synchronize()
print("tflops", 2 * n**3 * 10 / (begin.elapsed_time(end) / 1e3) / 1e12, torch.cuda.get_device_name())'
  ceiling_tflops=$(awk '/^tflops/ { printf "%.0f", $2 }' "$out_dir/torch-gemm.log")
  if [ $step_rc -eq 0 ] && [ -n "$ceiling_tflops" ]; then
    add_row "torch gemm ceiling" PASS "bf16 8192^3: $ceiling_tflops TFLOP/s" "$step_seconds" \
      "$(awk '/^tflops/ { $1 = $2 = ""; sub(/^ +/, ""); print }' "$out_dir/torch-gemm.log")"
  elif grep -qx 'no torch' "$out_dir/torch-gemm.log"; then
    add_row "torch gemm ceiling" SKIPPED "-" "$step_seconds" "python3 has no torch here; the ceiling needs PyTorch"
  else
    add_row "torch gemm ceiling" FAIL "exit $step_rc" "$step_seconds" "$(failure_line "$out_dir/torch-gemm.log")"
  fi
fi

# The same 8192^3 bf16 product as the workloads issue it: partrain's matmul_forward with bf16
# operands and out (the fp32 product rounded once), without and with the linear layers' bias,
# 16 sampled entries each checked against a host reference; its rate against the torch ceiling.
gemm_tflops() { json_eval "$1" '"%.1f" % d["results"][0]["tflops"]'; }
if [ -n "$skip_reason" ]; then
  add_row "partrain gemm" SKIPPED "-" 0.0 "$skip_reason"
elif start_check "partrain gemm" 90; then
  row_t0=$(date +%s)
  run_step "$limit" "$out_dir/bench-gemm.log" --json "$out_dir/bench-gemm.json" \
    "$partrain" bench gemm --device cuda --precision bf16 -s 8192 --json
  gemm_rc=$step_rc bias_rc=""
  left=$((limit - ($(date +%s) - row_t0)))
  if [ $gemm_rc -eq 0 ] && [ $left -ge 15 ]; then
    run_step "$left" "$out_dir/bench-gemm-bias.log" --json "$out_dir/bench-gemm-bias.json" \
      "$partrain" bench gemm --device cuda --precision bf16 -s 8192 --bias --json
    bias_rc=$step_rc
  fi
  seconds=$(( $(date +%s) - row_t0 )).0
  plain=$(gemm_tflops "$out_dir/bench-gemm.json")
  biased=""
  [ "$bias_rc" != 0 ] || biased=$(gemm_tflops "$out_dir/bench-gemm-bias.json")
  figure="bf16 8192^3: ${plain:-?} TFLOP/s"
  [ -z "$ceiling_tflops" ] || [ -z "$plain" ] ||
    figure="$figure = $(awk -v a="$plain" -v b="$ceiling_tflops" 'BEGIN { printf "%.1f", 100 * a / b }')% of torch's $ceiling_tflops"
  figure="$figure; with bias ${biased:-?} TFLOP/s"
  if [ $gemm_rc -eq 1 ] || [ "$bias_rc" = 1 ]; then
    add_row "partrain gemm" FAIL "$figure" "$seconds" "sampled entries off the reference: bench-gemm*.json"
  elif [ $gemm_rc -ne 0 ]; then
    add_row "partrain gemm" FAIL "exit $gemm_rc" "$seconds" "$(failure_line "$out_dir/bench-gemm.log")"
  elif [ -z "$bias_rc" ]; then
    add_row "partrain gemm" FAIL "$figure" "$seconds" "no time left for the run with a bias"
  elif [ "$bias_rc" -ne 0 ]; then
    add_row "partrain gemm" FAIL "$figure" "$seconds" "with --bias: exit $bias_rc: $(failure_line "$out_dir/bench-gemm-bias.log")"
  else
    add_row "partrain gemm" PASS "$figure" "$seconds" \
      "partrain bench gemm: mean of 10 back to back after 3 warm-ups, #wrong 0 of 16 sampled"
  fi
fi

# NCCL collectives at world size = visible GPUs, every op checked (#wrong); figure: all_reduce at
# the largest size (busbw is 0 by definition for one rank, so algbw is shown too). Sizes up to
# 128 MiB: with 1 GiB the row took 143 s of the 10 minutes (checking each result on the host).
bench_name="bench nccl x$gpus"
if [ -n "$skip_reason" ]; then
  add_row "bench nccl" SKIPPED "-" 0.0 "$skip_reason"
elif start_check "$bench_name" 150; then
  run_step "$limit" "$out_dir/bench-nccl.log" --json "$out_dir/bench-nccl.json" \
    "$partrain" bench collectives --backend nccl -n "$gpus" --op all -b 8 -e 128M -f 8 -w 2 --iters 10 --json
  figure=$(json_eval "$out_dir/bench-nccl.json" \
    '(lambda r: "all_reduce %s: busbw %.3g GB/s, algbw %.3g GB/s" % ((lambda b: "%g GiB" % (b / 2**30) if b >= 2**30 else "%g MiB" % (b / 2**20) if b >= 2**20 else "%g KiB" % (b / 2**10))(r["bytes"]), r["busbw_gbps"], r["algbw_gbps"]))(max((x for x in d["results"] if x["op"] == "all_reduce" and not x["in_place"]), key=lambda x: x["bytes"]))')
  wrong=$(json_eval "$out_dir/bench-nccl.json" 'sum(x["wrong"] for x in d["results"])')
  if [ $step_rc -eq 124 ] || [ $step_rc -eq 137 ]; then
    add_row "$bench_name" FAIL "${figure:--}" "$step_seconds" "timed out after $limit s"
  elif [ $step_rc -ne 0 ]; then
    add_row "$bench_name" FAIL "exit $step_rc" "$step_seconds" "$(failure_line "$out_dir/bench-nccl.log")"
  elif [ -z "$wrong" ]; then
    add_row "$bench_name" FAIL "${figure:--}" "$step_seconds" "no #wrong in bench-nccl.json: the results went unchecked"
  elif [ "$wrong" != 0 ]; then
    add_row "$bench_name" FAIL "${figure:--}" "$step_seconds" "#wrong $wrong: results differ from the reference"
  else
    add_row "$bench_name" PASS "${figure:-see bench-nccl.json}" "$step_seconds" "#wrong 0"
  fi
fi

# The gpt workload on one GPU: hidden 4096, 8 layers, seq 2048, bf16 (issue 7's benchmark).
readonly GPT_DIMS=(--layers 8 --hidden 4096 --heads 32 --seq 2048 --vocab 50304)
gpt_run() {  # NAME MICRO-BATCH FLAGS... (within $limit): sets step_rc, step_seconds; JSON in $out_dir/NAME.json
  local name=$1 micro_batch=$2
  shift 2
  run_step "$limit" "$out_dir/$name.log" --json "$out_dir/$name.json" "$partrain" launch -n 1 --workload gpt \
    --device cuda --precision bf16 "${GPT_DIMS[@]}" --micro-batch "$micro_batch" \
    --global-batch "$micro_batch" --steps 20 --json "$@"
}
# The median step time (ms) of a `launch --json` summary or of the torch program's (both step_time_ms).
median_ms() { json_eval "$1" '"%.2f" % d["step_time_ms"]["median"]'; }
# The preset in share/gpus for the GPU nvidia-smi names: MFU is measured against its dense bf16
# peak (the launcher's own MFU is against the GEMM rate it measures at start).
gpu_preset() {  # NAME: prints the preset's name, or nothing
  case "$1" in
    *H100*PCIe* | *H100*NVL*) ;;  # lower clocks and peak than the SXM part the preset describes
    *H100*) echo h100-80g ;;
    *H200*) echo h200-141g ;;
    *A100*80GB*) echo a100-80g ;;
    *A100*40GB*) echo a100-40g ;;
    *B200*) echo b200 ;;
  esac
}
presets_dir=""
for dir in "$here/share/partrain/gpus" "$here/../share/gpus" "$(dirname "$partrain")/../share/partrain/gpus"; do
  if [ -d "$dir" ]; then presets_dir=$dir; break; fi
done
# The MFU row of a gpt run's summary: sets figure and note.
mfu_figure() {  # JSON
  local json=$1 preset preset_peak="" measured mfu against
  preset=$(gpu_preset "$gpu0_name")
  if [ -n "$preset" ] && [ -n "$presets_dir" ]; then
    preset_peak=$(json_eval "$presets_dir/$preset.json" '"%.6g" % d["bf16_flops"]')
  fi
  measured='"%.1f%% of the measured %.3g TFLOP/s GEMM, step %.1f ms, GEMM %.3g TFLOP/s" % (100 * d["mfu"], d["peak_flops_per_rank"] / 1e12, d["step_time_ms"]["median"], d["gemm"]["gflops"] / 1e3)'
  if [ -n "$preset_peak" ]; then
    # MFU of the preset = the launcher's MFU x the peak it measured / the preset's peak.
    figure=$(json_eval "$json" \
      "\"MFU %.1f%% of %.3g TFLOP/s ($preset preset), \" % (100 * d['mfu'] * d['peak_flops_per_rank'] / $preset_peak, $preset_peak / 1e12) + $measured")
    mfu=$(json_eval "$json" "'%d' % (100 * d['mfu'] * d['peak_flops_per_rank'] / $preset_peak)")
    against="against the $preset preset"
  else
    figure=$(json_eval "$json" "'MFU ' + $measured")
    mfu=$(json_eval "$json" '"%d" % (100 * d["mfu"])')
    against="against the measured GEMM: no preset for '${gpu0_name:-this GPU}'"
  fi
  if [ -z "$mfu" ]; then note="no MFU in $(basename "$json")"
  elif [ "$mfu" -ge 40 ]; then note="MFU target 40% met ($against)"
  else note="MFU below the 40% target ($against)"; fi
  [ -z "$ceiling_tflops" ] || note="$note; torch GEMM ceiling $ceiling_tflops TFLOP/s"
}
gpt_ok=0 gpt_traced=0
if [ -n "$skip_reason" ]; then
  add_row "gpt cuda bf16" SKIPPED "-" 0.0 "$skip_reason"
elif start_check "gpt cuda bf16" 200; then
  gpt_run gpt-untraced 1 --no-trace
  if [ $step_rc -eq 0 ]; then
    gpt_ok=1
    mfu_figure "$out_dir/gpt-untraced.json"
    add_row "gpt cuda bf16" PASS "${figure:-see gpt-untraced.json}" "$step_seconds" "$note"
  else
    add_row "gpt cuda bf16" FAIL "exit $step_rc" "$step_seconds" "$(failure_line "$out_dir/gpt-untraced.log")"
  fi
fi

# Peak memory by category vs the estimate for the same layout, with the tolerances of
# tests/integration/memory_crosscheck_test.cpp (model states 1%, activations 15%, total 10%).
if [ $gpt_ok -eq 0 ]; then
  add_row "gpt memory" SKIPPED "-" 0.0 "${skip_reason:-needs a passing gpt cuda bf16 run}"
elif start_check "gpt memory" 30; then
  run_step "$limit" "$out_dir/memory-estimate.log" --json "$out_dir/memory-estimate.json" "$partrain" memory \
    --model builtin-gpt "${GPT_DIMS[@]}" --micro-batch 1 --precision bf16-mixed --reserve 0 --bucket-size 0 --json
  if [ $step_rc -ne 0 ]; then
    add_row "gpt memory" FAIL "exit $step_rc" "$step_seconds" "$(failure_line "$out_dir/memory-estimate.log")"
  else
    verdict=$(python3 -c 'import json, sys
m = json.load(open(sys.argv[1]))["memory_peak_bytes"]["0"]
e = json.load(open(sys.argv[2]))["per_gpu_bytes"]
off = [f"{k} {m[k] / 2**30:.2f} vs {e[k] / 2**30:.2f} GiB" for k, tol in
       (("params", .01), ("grads", .01), ("optimizer", .01), ("activations", .15), ("total", .10))
       if abs(m[k] - e[k]) > tol * e[k]]
figure = "peak %.2f GiB (workspace %.2f), estimate %.2f GiB" % (
    m["total"] / 2**30, m.get("workspace", 0) / 2**30, e["total"] / 2**30)
print("\t".join(("FAIL" if off else "PASS", figure,
                 "outside tolerance: " + "; ".join(off) if off else "every category within tolerance")))' \
      "$out_dir/gpt-untraced.json" "$out_dir/memory-estimate.json" 2>&1 || true)
    IFS=$'\t' read -r result figure reason <<<"$verdict"
    if [ "$result" = PASS ] || [ "$result" = FAIL ]; then
      add_row "gpt memory" "$result" "$figure" "$step_seconds" "$reason"
    else
      add_row "gpt memory" FAIL "-" "$step_seconds" "cannot compare: $(tail -1 <<<"$verdict" | cut -c1-120)"
    fi
  fi
fi

# Tracing's cost: the same run traced into a file, median step time traced / untraced.
if [ $gpt_ok -eq 0 ]; then
  add_row "gpt trace overhead" SKIPPED "-" 0.0 "${skip_reason:-needs a passing gpt cuda bf16 run}"
elif start_check "gpt trace overhead" 200; then
  rm -f "$out_dir"/gpt-traced.db*  # partrain refuses to overwrite a trace (an earlier --out run's)
  gpt_run gpt-traced 1 --trace "$out_dir/gpt-traced.db"
  gpt_traced=1
  if [ $step_rc -eq 0 ]; then
    traced=$(median_ms "$out_dir/gpt-traced.json") untraced=$(median_ms "$out_dir/gpt-untraced.json")
    note="median step times; target 1.03x $(awk -v a="$traced" -v b="$untraced" \
      'BEGIN { print (a > 0 && b > 0 && a <= 1.03 * b) ? "met" : "not met" }')"
    # What the trace holds: the ranks' kernels (CUPTI) and GPU counter samples (NVML).
    if [ $have_python -eq 1 ]; then
      note="$note; $(python3 -c 'import sqlite3, sys
db = sqlite3.connect(sys.argv[1])
count = lambda sql: db.execute(sql).fetchone()[0]
print("%d kernels, %d NVML samples in the trace" % (count("SELECT COUNT(*) FROM kernels"),
                                                  count("SELECT COUNT(*) FROM counters")))' \
        "$out_dir/gpt-traced.db" 2>&1 | tail -1 | cut -c1-100)"
    fi
    add_row "gpt trace overhead" PASS \
      "step ${traced:-?} ms traced / ${untraced:-?} ms = $(ratio "$traced" "$untraced")" \
      "$step_seconds" "$note"
  else
    add_row "gpt trace overhead" FAIL "exit $step_rc" "$step_seconds" "$(failure_line "$out_dir/gpt-traced.log")"
  fi
fi

# Where the traced run's GPU time went: kernel time a step by kernel (cuBLAS GEMMs as one), the
# whole list in gpt-kernels.txt, the largest in the row.
# (Only this invocation's trace: an earlier --out run's file is not this GPU's work.)
if [ $gpt_traced -eq 0 ] || [ ! -f "$out_dir/gpt-traced.db" ] || [ $have_python -eq 0 ]; then
  add_row "gpt kernels" SKIPPED "-" 0.0 "${skip_reason:-needs the trace of the traced gpt run and python3}"
else
  t0=$(date +%s)
  rm -f "$out_dir/gpt-kernels.txt"
  figure=$(python3 -c 'import re, sqlite3, sys
db = sqlite3.connect(sys.argv[1])
# Kernels inside a step only (not the GEMM rate measured at start): by name, over the steps.
in_steps = ("FROM kernel k JOIN slice sl ON sl.id = k.slice_id JOIN string n ON n.id = sl.name_id "
            "WHERE sl.step IS NOT NULL AND sl.step >= 0")
steps = max(1, db.execute("SELECT COUNT(DISTINCT sl.step) " + in_steps).fetchone()[0])
def family(name):
    if re.match(r"(nvjet|sm\d+_xmma|cutlass|ampere_|sm90_|gemm|gemv)", name):
        return "gemm (cuBLAS" + (", tf32" if "tf32" in name else "") + ")"
    name = re.sub(r"^void ", "", name.replace("(anonymous namespace)::", ""))
    name = re.split(r"[<(]", name)[0]
    return name.split("::")[-1].removesuffix("_kernel")
total, by_family = 0, {}
for name, ns, count in db.execute("SELECT n.value, SUM(sl.dur_ns), COUNT(*) " + in_steps +
                                  " GROUP BY n.value"):
    f = by_family.setdefault(family(name), [0, 0])
    f[0] += ns
    f[1] += count
    total += ns
rows = sorted(by_family.items(), key=lambda kv: -kv[1][0])
if not rows:
    sys.exit("no kernel rows in the trace: CUPTI collected nothing")
with open(sys.argv[2], "w") as out:
    out.write("kernel time a step over %d steps: %.1f ms\n" % (steps, total / steps / 1e6))
    for name, (ns, count) in rows:
        out.write("%10.2f ms  %6.1f launches  %5.1f%%  %s\n" % (ns / steps / 1e6, count / steps,
                                                          100.0 * ns / max(total, 1), name))
print("%.1f ms a step: " % (total / steps / 1e6) +
      ", ".join("%s %.1f" % (name, ns / steps / 1e6) for name, (ns, _) in rows[:5]))' \
    "$out_dir/gpt-traced.db" "$out_dir/gpt-kernels.txt" 2>&1 | tail -1 | cut -c1-200)
  if [ -s "$out_dir/gpt-kernels.txt" ]; then
    add_row "gpt kernels" PASS "$figure" "$(($(date +%s) - t0)).0" "per step, in ms; all of them in gpt-kernels.txt"
  else
    add_row "gpt kernels" FAIL "-" "$(($(date +%s) - t0)).0" "$figure"
  fi
fi

# The same model at larger micro-batches: the optimizer step and the per-step costs spread over
# more tokens, as a training run's larger batches do. Micro-batch 8 needs about 70 GiB at this
# layout: run where GPU 0 has 100 GiB or more (an H200's 141 GB, not an H100's 80).
gpu0_mib=$(timeout 30 nvidia-smi --query-gpu=memory.total --format=csv,noheader,nounits -i 0 2>/dev/null |
           tr -dc '0-9' || true)
for micro_batch in 4 8; do
  name="gpt cuda bf16 mb$micro_batch"
  if [ $gpt_ok -eq 0 ]; then
    add_row "$name" SKIPPED "-" 0.0 "${skip_reason:-needs a passing gpt cuda bf16 run}"
  elif [ "$micro_batch" -eq 8 ] && [ "${gpu0_mib:-0}" -lt 100000 ]; then
    add_row "$name" SKIPPED "-" 0.0 "needs a GPU of 100 GiB or more; GPU 0 has ${gpu0_mib:-?} MiB"
  elif start_check "$name" 200; then
    gpt_run "gpt-mb$micro_batch" "$micro_batch" --no-trace
    if [ $step_rc -eq 0 ]; then
      mfu_figure "$out_dir/gpt-mb$micro_batch.json"
      add_row "$name" PASS "${figure:-see gpt-mb$micro_batch.json}" "$step_seconds" "$note"
    else
      add_row "$name" FAIL "exit $step_rc" "$step_seconds" "$(failure_line "$out_dir/gpt-mb$micro_batch.log")"
    fi
  fi
done

# ---- 9.-10. a real PyTorch program on NCCL, traced --------------------------------------------------
# tests/gpu/torch_nccl_program.py (tests/ in the bundle): DDP + AdamW on one GPU, 50 steps, each an
# NVTX range ProfilerStep#N with one explicit all_reduce of 20,000,000 bytes; check_torch_trace.py
# reads its trace against the program's own summary (docs/gpu-validation.md).
torch_dir=""
for dir in "$here/tests" "$here/../tests/gpu"; do
  if [ -f "$dir/torch_nccl_program.py" ] && [ -f "$dir/check_torch_trace.py" ]; then
    torch_dir=$(cd "$dir" && pwd)
    break
  fi
done
torch_skip=$skip_reason torch_launch=()
if [ -z "$torch_skip" ] && [ $have_python -eq 0 ]; then
  torch_skip="no python3 here; the program needs PyTorch"
elif [ -z "$torch_skip" ] && [ -n "$torch_dir" ]; then
  torch_probe=$(timeout 60 python3 -c 'import importlib.util, sys
try:
    import torch, torch.distributed as dist
except ModuleNotFoundError:
    sys.exit("no torch")
if not dist.is_available() or not dist.is_nccl_available():
    sys.exit("no nccl")
print("torchrun" if importlib.util.find_spec("torch.distributed.run") else "plain")' 2>&1 | tail -1 || true)
  case "$torch_probe" in
    torchrun) torch_launch=(python3 -m torch.distributed.run --standalone --nproc-per-node 1) ;;
    plain) torch_launch=(python3) ;;  # the program sets RANK=0, WORLD_SIZE=1, MASTER_* itself
    "no torch") torch_skip="python3 has no torch here; the program needs PyTorch" ;;
    "no nccl") torch_skip="python3's torch has no NCCL backend" ;;
    *) torch_skip="python3 cannot import torch: ${torch_probe:-no answer in 60 s}" ;;
  esac
fi
# Why a program failed: partrain's own complaint first, else the program's exception, else its
# first error line.
torch_failure_line() {  # LOG
  local line
  line=$(grep '^partrain: ' "$1" | grep -v -e '^partrain: tracing into ' -e '^partrain: trace: ' | head -1 || true)
  [ -n "$line" ] || line=$(sed 's/^\[rank[0-9]*\]: //' "$1" | grep -m1 -E '^[A-Za-z_.]*(Error|Exception): ' || true)
  [ -n "$line" ] || line=$(failure_line "$1")
  cut -c1-200 <<<"$line"
}
# 50 steps, the first 5 left out of the median: steps of ~7 ms on an H100 vary by a millisecond or
# two, so 20 gave medians 10% apart from run to run.
torch_program_args=(--steps 50 --warmup 5)
torch_traced_ok=0
if [ -n "$torch_skip" ]; then
  add_row "torch nccl trace" SKIPPED "-" 0.0 "$torch_skip"
elif [ -z "$torch_dir" ]; then
  add_row "torch nccl trace" FAIL "-" 0.0 \
    "torch_nccl_program.py and check_torch_trace.py not found in $here/tests: rebuild the bundle (make gpu-bundle)"
elif start_check "torch nccl trace" 90; then
  row_t0=$(date +%s)
  rm -f "$out_dir"/torch-traced.db* "$out_dir/torch-traced.json"  # partrain refuses to overwrite a trace
  run_step "$limit" "$out_dir/torch-traced.log" "$partrain" trace -o "$out_dir/torch-traced.db" -- \
    "${torch_launch[@]}" "$torch_dir/torch_nccl_program.py" "${torch_program_args[@]}" \
    --json-out "$out_dir/torch-traced.json"
  seconds=$step_seconds
  if [ $step_rc -eq 124 ] || [ $step_rc -eq 137 ]; then
    add_row "torch nccl trace" FAIL "-" "$seconds" "timed out after $limit s"
  elif [ $step_rc -ne 0 ] || [ ! -s "$out_dir/torch-traced.json" ]; then
    add_row "torch nccl trace" FAIL "traced program exit $step_rc" "$seconds" \
      "$(torch_failure_line "$out_dir/torch-traced.log")"
  else
    torch_traced_ok=1
    check_limit=$((limit - ($(date +%s) - row_t0)))
    [ $check_limit -ge 10 ] || check_limit=10
    run_step "$check_limit" "$out_dir/torch-trace-check.log" \
      python3 "$torch_dir/check_torch_trace.py" "$out_dir/torch-traced.db" "$out_dir/torch-traced.json"
    seconds=$(add_seconds "$seconds" "$step_seconds")
    figure=$(sed -n 's/^figure: //p' "$out_dir/torch-trace-check.log" | tail -1)
    verdict=$(tail -1 "$out_dir/torch-trace-check.log")
    if [ $step_rc -eq 0 ] && [ "$verdict" = PASS ]; then
      add_row "torch nccl trace" PASS "${figure:--}" "$seconds" "kernels by name in torch-trace-check.log"
    elif [ $step_rc -eq 1 ] && [ "${verdict#FAIL: }" != "$verdict" ]; then
      add_row "torch nccl trace" FAIL "${figure:--}" "$seconds" "$(cut -c7-306 <<<"$verdict")"
    else
      add_row "torch nccl trace" FAIL "check exit $step_rc" "$seconds" \
        "$(failure_line "$out_dir/torch-trace-check.log")"
    fi
  fi
fi

# The program's cost of being traced, against torch.profiler (CPU and CUDA activities, prof.step()
# per step): median step times of the same 50 steps (the first 5 left out) plain and under
# torch.profiler here, under partrain from the row above.
if [ -n "$torch_skip" ]; then
  add_row "torch trace overhead" SKIPPED "-" 0.0 "$torch_skip"
elif [ -z "$torch_dir" ]; then
  add_row "torch trace overhead" SKIPPED "-" 0.0 "needs the program (row torch nccl trace)"
elif start_check "torch trace overhead" 120; then
  row_t0=$(date +%s)
  rm -f "$out_dir/torch-plain.json" "$out_dir/torch-profiler.json"
  run_step "$limit" "$out_dir/torch-plain.log" "${torch_launch[@]}" "$torch_dir/torch_nccl_program.py" \
    "${torch_program_args[@]}" --json-out "$out_dir/torch-plain.json"
  seconds=$step_seconds plain_rc=$step_rc profiler_rc=""
  left=$((limit - ($(date +%s) - row_t0)))
  if [ $plain_rc -eq 0 ] && [ $left -ge 15 ]; then
    run_step "$left" "$out_dir/torch-profiler.log" "${torch_launch[@]}" "$torch_dir/torch_nccl_program.py" \
      "${torch_program_args[@]}" --profiler torch --json-out "$out_dir/torch-profiler.json"
    seconds=$(add_seconds "$seconds" "$step_seconds")
    profiler_rc=$step_rc
  fi
  plain=$(median_ms "$out_dir/torch-plain.json") profiled=$(median_ms "$out_dir/torch-profiler.json") traced=""
  [ $torch_traced_ok -eq 0 ] || traced=$(median_ms "$out_dir/torch-traced.json")
  figure="step plain ${plain:-?} ms, partrain ${traced:--} ms"
  [ -z "$traced" ] || figure="$figure ($(ratio "$traced" "$plain"))"
  figure="$figure, torch.profiler ${profiled:--} ms"
  [ -z "$profiled" ] || figure="$figure ($(ratio "$profiled" "$plain"))"
  if [ $plain_rc -eq 124 ] || [ $plain_rc -eq 137 ] || [ "$profiler_rc" = 124 ] || [ "$profiler_rc" = 137 ]; then
    add_row "torch trace overhead" FAIL "$figure" "$seconds" "timed out ($limit s for both runs)"
  elif [ $plain_rc -ne 0 ] || [ -z "$plain" ]; then
    add_row "torch trace overhead" FAIL "plain program exit $plain_rc" "$seconds" \
      "$(torch_failure_line "$out_dir/torch-plain.log")"
  elif [ -z "$profiler_rc" ]; then
    add_row "torch trace overhead" FAIL "$figure" "$seconds" "no time left for the torch.profiler run ($limit s for both)"
  elif [ "$profiler_rc" -ne 0 ] || [ -z "$profiled" ]; then
    add_row "torch trace overhead" FAIL "$figure" "$seconds" \
      "torch.profiler run exit $profiler_rc: $(torch_failure_line "$out_dir/torch-profiler.log")"
  elif [ -z "$traced" ]; then
    add_row "torch trace overhead" SKIPPED "$figure" "$seconds" \
      "no partrain figure: the traced run did not finish (row torch nccl trace)"
  else
    verdict=$(awk -v t="$traced" -v p="$profiled" 'BEGIN { print (t <= p ? "partrain costs no more than torch.profiler" : "partrain costs more than torch.profiler") }')
    add_row "torch trace overhead" PASS "$figure" "$seconds" "median step times, the first 5 of 50 steps left out; $verdict"
  fi
fi

# ---- the table and the verdict ------------------------------------------------------------------
total=$(( $(date +%s) - start ))
{
  echo
  cat "$out_dir/header.txt"
  print_table
} | tee "$out_dir/summary.txt"
failed=0 skipped=0
for result in "${row_results[@]}"; do
  [ "$result" = FAIL ] && failed=$((failed + 1))
  [ "$result" = SKIPPED ] && skipped=$((skipped + 1))
done
echo "${#row_names[@]} checks in $total s: $((${#row_names[@]} - failed - skipped)) passed, $failed failed, $skipped skipped" |
  tee -a "$out_dir/summary.txt"
if [ $failed -gt 0 ]; then exit 1; fi
if [ "$gpus" -eq 0 ]; then
  echo "exit 4: nothing was validated ($gpu_reason)" | tee -a "$out_dir/summary.txt"
  exit 4
fi
exit 0
