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

sqlite3 "$db" >/dev/null <<SQL
PRAGMA journal_mode = OFF;
PRAGMA synchronous = OFF;
PRAGMA cache_size = -262144;
CREATE TEMP TABLE base AS
  SELECT (SELECT MAX(id) FROM slice) AS max_id,
         (SELECT MAX(step) + 1 FROM step) AS steps,
         (SELECT MAX(ts_ns + dur_ns) - MIN(ts_ns) FROM slice) + 1000 AS span,
         (SELECT COUNT(*) FROM slice) + (SELECT COUNT(*) FROM memory) AS events;
CREATE TEMP TABLE copies AS
  WITH RECURSIVE k(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM k
                          WHERE n < (SELECT $EVENTS / events FROM base))
  SELECT n FROM k;
BEGIN;
INSERT INTO slice (id, track_id, ts_ns, dur_ns, name_id, category, step, micro_batch, layer)
  SELECT s.id + c.n * b.max_id, s.track_id, s.ts_ns + c.n * b.span, s.dur_ns, s.name_id,
         s.category, s.step + c.n * b.steps, s.micro_batch, s.layer
  FROM copies c, base b, slice s WHERE s.id <= b.max_id ORDER BY c.n, s.id;
INSERT INTO collective
  SELECT co.slice_id + c.n * b.max_id, co.comm_id, co.seq, co.op, co.dtype, co.reduce_op,
         co.count, co.bytes, co.peer, co.root, co.comm_rank, co.group_size, co.group_ranks_id,
         co.enqueue_ns + c.n * b.span, co.gpu_start_ns + c.n * b.span,
         co.gpu_end_ns + c.n * b.span, co.state
  FROM copies c, base b, collective co WHERE co.slice_id <= b.max_id;
INSERT INTO memory (rank, ts_ns, category, bytes)
  SELECT m.rank, m.ts_ns + c.n * b.span, m.category, m.bytes
  FROM copies c, base b, (SELECT * FROM memory) m;
INSERT INTO step (rank, step, ts_ns, dur_ns, loss, tokens)
  SELECT st.rank, st.step + c.n * b.steps, st.ts_ns + c.n * b.span, st.dur_ns, st.loss, st.tokens
  FROM copies c, base b, (SELECT * FROM step) st;
COMMIT;
SQL

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
