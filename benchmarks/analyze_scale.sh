#!/usr/bin/env bash
# `partrain analyze` at scale (issue 6: a trace of 10 million events in <= 10 s and <= 1 GiB).
# Records a real 4-rank GPT run, then grows it with SQL to EVENTS events (slices + memory samples)
# by appending copies of its steps shifted in time and renumbered (slices keep their collective
# rows, so every view sees a longer run of the same job), and times `partrain analyze` on it
# with /usr/bin/time -v: wall time and maximum resident set size. The report must name steps
# beyond the original run, so a silently truncated analysis does not pass for a fast one.
set -euo pipefail
cd "$(dirname "$0")/.."
PARTRAIN=${PARTRAIN:-build/bin/partrain}
EVENTS=${EVENTS:-10000000}
STEPS=${STEPS:-6}
KEEP=${KEEP:-}  # a directory to keep the grown trace in (it is ~1.5 GB)
dir=${KEEP:-$(mktemp -d)}
[[ -n $KEEP ]] || trap 'rm -rf "$dir"' EXIT
db=$dir/scale.db
rm -f "$db" "$db-wal" "$db-shm"

"$PARTRAIN" -q launch -n 4 --workload gpt --layers 2 --hidden 64 --heads 4 --seq 32 --vocab 128 \
  --dp 2 --tp 2 --micro-batch 2 --steps "$STEPS" --trace "$db"

benchmarks/grow_trace.sh "$db" "$EVENTS"

events=$(sqlite3 "$db" 'SELECT (SELECT COUNT(*) FROM slice) + (SELECT COUNT(*) FROM memory)')
last_step=$(sqlite3 "$db" 'SELECT MAX(step) FROM step')
echo "trace: $db, $events events (slices + memory samples), steps 0..$last_step," \
  "$(du -h "$db" | cut -f1)"

# -v: each section's finishing time (since the analysis began) on stderr, beside time's report.
/usr/bin/time -v "$PARTRAIN" -v analyze "$db" >"$dir/report.txt" 2>"$dir/time.txt" ||
  { cat "$dir/time.txt"; exit 1; }
grep -q "steps 1..$last_step (warm-up 1 skipped)" "$dir/report.txt" ||
  { echo "the report does not cover steps 1..$last_step:"; cat "$dir/report.txt"; exit 1; }
wall=$(grep 'Elapsed (wall clock)' "$dir/time.txt" | awk '{print $NF}')
user=$(grep 'User time' "$dir/time.txt" | awk '{print $NF}')
sys=$(grep 'System time' "$dir/time.txt" | awk '{print $NF}')
rss_kb=$(grep 'Maximum resident set size' "$dir/time.txt" | awk '{print $NF}')
grep -o 'analysis section .* done at .*' "$dir/time.txt" | sed 's/^/  /' || true
echo "partrain analyze: $events events in $wall (m:ss) wall, ${user} s user, ${sys} s system," \
  "max RSS $((rss_kb / 1024)) MiB (target <= 10 s wall, <= 1024 MiB)"
