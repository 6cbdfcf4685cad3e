#!/usr/bin/env bash
# `partrain import` at scale (issue 36: 1 GB of Kineto JSON in under 1 GiB of memory). Grows the
# committed 4-rank DDP fixture (tests/data/kineto/ddp, torch 2.15, gloo) to SIZE bytes of JSON in
# all (SIZE/4 per rank, benchmarks/grow_kineto.py: its steps repeated), imports it with
# /usr/bin/time -v, and prints the input size, wall time and MB/s (input bytes / wall time), CPU
# time (user + system) and MB/s by it (the wall time of a loaded machine is mostly waiting for a
# core), and the maximum resident set size; then checks that every collective of every copy was
# matched.
# The grown files and the trace are deleted at the end unless KEEP names a directory.
#   SIZE=100000000 benchmarks/import_scale.sh      (GZIP=1: write .json.gz inputs)
set -euo pipefail
cd "$(dirname "$0")/.."
PARTRAIN=${PARTRAIN:-build/bin/partrain}
SIZE=${SIZE:-100000000}
KEEP=${KEEP:-}
dir=${KEEP:-$(mktemp -d)}
[[ -n $KEEP ]] || trap 'rm -rf "$dir"' EXIT
mkdir -p "$dir/in"
suffix=.json
[[ -n ${GZIP:-} ]] && suffix=.json.gz
for r in 0 1 2 3; do
  python3 benchmarks/grow_kineto.py "tests/data/kineto/ddp/rank$r.pt.trace.json.gz" \
    "$dir/in/rank$r.pt.trace$suffix" $((SIZE / 4)) >/dev/null
done
bytes=$(du -cb "$dir"/in/* | tail -1 | cut -f1)
rm -f "$dir/out.db"
/usr/bin/time -v "$PARTRAIN" import "$dir/in" -o "$dir/out.db" 2>"$dir/time.txt" >/dev/null ||
  { cat "$dir/time.txt"; exit 1; }
wall=$(grep 'Elapsed (wall clock)' "$dir/time.txt" | awk '{print $NF}')
seconds=$(echo "$wall" | awk -F: '{ if (NF == 3) print $1 * 3600 + $2 * 60 + $3; else print $1 * 60 + $2 }')
rss_kb=$(grep 'Maximum resident set size' "$dir/time.txt" | awk '{print $NF}')
cpu=$(awk -F': ' '/User time|System time/ { s += $2 } END { print s }' "$dir/time.txt")
unmatched=$(sqlite3 "$dir/out.db" "SELECT COUNT(*) FROM collectives WHERE comm_id LIKE 'unmatched%'")
groups=$(sqlite3 "$dir/out.db" "SELECT COUNT(*) FROM (SELECT 1 FROM collectives GROUP BY comm_id, seq HAVING COUNT(*) = 4)")
events=$(grep -o '[0-9]* events' "$dir/time.txt" | head -1)
awk -v b="$bytes" -v s="$seconds" -v c="$cpu" -v r="$rss_kb" -v e="$events" -v g="$groups" \
  -v u="$unmatched" -v db="$(du -h "$dir/out.db" | cut -f1)" -v load="$(cut -d' ' -f1 /proc/loadavg)" 'BEGIN {
    printf "input %.1f MB in 4 files, %s, trace %s: %.1f s wall (%.1f MB/s), %.1f s CPU (%.1f MB/s), peak RSS %.0f MiB, load %s; %d collectives matched on all 4 ranks, %d unmatched\n",
      b / 1e6, e, db, s, b / 1e6 / s, c, b / 1e6 / c, r / 1024, load, g, u }'
