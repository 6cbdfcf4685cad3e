#!/usr/bin/env bash
# Grows a recorded trace to about EVENTS events (slices + memory samples) by appending copies of
# its steps shifted in time and renumbered; slices keep their collective rows, so every view sees
# a longer run of the same job. SEQ_STRIDE renumbers each copy's collectives by that much (0: the
# copies share the original's sequence numbers). Used by the analyze and top benchmarks.
#   benchmarks/grow_trace.sh DB EVENTS [SEQ_STRIDE]
set -euo pipefail
db=$1
events=$2
seq_stride=${3:-0}
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
                          WHERE n < (SELECT $events / events FROM base))
  SELECT n FROM k;
BEGIN;
INSERT INTO slice (id, track_id, ts_ns, dur_ns, name_id, category, step, micro_batch, layer)
  SELECT s.id + c.n * b.max_id, s.track_id, s.ts_ns + c.n * b.span, s.dur_ns, s.name_id,
         s.category, s.step + c.n * b.steps, s.micro_batch, s.layer
  FROM copies c, base b, slice s WHERE s.id <= b.max_id ORDER BY c.n, s.id;
INSERT INTO collective
  SELECT co.slice_id + c.n * b.max_id, co.comm_id, co.seq + c.n * $seq_stride, co.op, co.dtype,
         co.reduce_op, co.count, co.bytes, co.peer, co.root, co.comm_rank, co.group_size,
         co.group_ranks_id, co.enqueue_ns + c.n * b.span, co.gpu_start_ns + c.n * b.span,
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
