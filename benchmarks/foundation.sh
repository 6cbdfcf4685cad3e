#!/usr/bin/env bash
# The foundation issue's two benchmarks, in one run so they share the machine's state:
#  1. all_reduce 64 MiB on 4 ranks: partrain (Gloo) beside a plain MPI_Allreduce (Open MPI),
#     alternated for ROUNDS rounds; medians and the ratio.
#  2. Launcher overhead: `partrain launch -n 4 -- true`, median wall time of 10 runs.
# Needs: a build in build/ and Open MPI (apt-get install libopenmpi-dev openmpi-bin).
set -euo pipefail
cd "$(dirname "$0")/.."
PARTRAIN=${PARTRAIN:-build/bin/partrain}
ROUNDS=${ROUNDS:-5}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

mpicc -O2 -o "$work/mpi_allreduce" benchmarks/reference/mpi_allreduce.c
median() { sort -g | awk '{v[NR]=$1} END {print (NR%2) ? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2}'; }

for round in $(seq "$ROUNDS"); do
  "$PARTRAIN" bench collectives -n 4 -b 64M -e 64M -w 5 --iters 20 --json \
    | python3 -c 'import json,sys; r=json.load(sys.stdin)["results"][0]; print(r["busbw_gbps"], r["time_us"], r["wrong"])' \
    >>"$work/partrain"
  mpirun --allow-run-as-root --oversubscribe -n 4 "$work/mpi_allreduce" $((64 << 20)) 5 20 \
    | sed -E 's/.*time=([0-9.]+) us.*busbw=([0-9.]+) GB\/s.*/\2 \1/' >>"$work/mpi"
done
p_bw=$(cut -d' ' -f1 "$work/partrain" | median); p_us=$(cut -d' ' -f2 "$work/partrain" | median)
m_bw=$(cut -d' ' -f1 "$work/mpi" | median); m_us=$(cut -d' ' -f2 "$work/mpi" | median)
echo "all_reduce 64 MiB, 4 ranks, float sum, median of $ROUNDS rounds (each 5 warm-up + 20 timed):"
echo "  partrain (gloo):  busbw $p_bw GB/s, time $p_us us   (rounds: $(cut -d' ' -f1 "$work/partrain" | tr '\n' ' '))"
echo "  MPI_Allreduce:    busbw $m_bw GB/s, time $m_us us   (rounds: $(cut -d' ' -f1 "$work/mpi" | tr '\n' ' '))"
echo "  ratio partrain / MPI busbw: $(python3 -c "print(f'{$p_bw/$m_bw:.2f}')")"

for run in $(seq 10); do
  start=$(date +%s%N)
  "$PARTRAIN" -q launch -n 4 -- true
  echo $(( ($(date +%s%N) - start) / 1000000 )) >>"$work/launch"
done
echo "launcher overhead: partrain launch -n 4 -- true, median of 10: $(median <"$work/launch") ms" \
     "(runs: $(tr '\n' ' ' <"$work/launch"))"
