-- partrain trace schema, version 7 (docs/trace-format.md documents every column).
-- Modelled on Perfetto's trace processor: ranks, tracks, slices and counters with integer surrogate
-- ids, strings interned once, problems recorded as rows in `stat`. Query through share/views.sql.
-- Times are nanoseconds on the run-wide timeline unless a column says otherwise; bytes are bytes.
PRAGMA user_version = 7;

CREATE TABLE meta (
  key   TEXT PRIMARY KEY,
  value TEXT NOT NULL
) WITHOUT ROWID;

-- Small fixed vocabularies: the integer codes the writer stores, with their names for the views.
CREATE TABLE track_kind (id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE);
INSERT INTO track_kind VALUES (0, 'cpu_thread'), (1, 'cuda_stream'), (2, 'comm'), (3, 'memory'),
  (4, 'counter');

CREATE TABLE slice_category (id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE);
INSERT INTO slice_category VALUES (0, 'compute'), (1, 'collective'), (2, 'p2p'), (3, 'kernel'),
  (4, 'memcpy'), (5, 'memset'), (6, 'sync'), (7, 'step'), (8, 'phase');

-- Same order as partrain::memory::Category.
CREATE TABLE memory_category (id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE);
INSERT INTO memory_category VALUES (0, 'params'), (1, 'grads'), (2, 'optimizer'),
  (3, 'activations'), (4, 'comm'), (5, 'workspace'), (6, 'other');

CREATE TABLE run (
  id             INTEGER PRIMARY KEY,
  run_id         TEXT NOT NULL,
  command        TEXT NOT NULL DEFAULT '',
  config         TEXT NOT NULL DEFAULT '{}',  -- JSON
  status         TEXT NOT NULL DEFAULT 'running'
                 CHECK (status IN ('running', 'completed', 'failed', 'killed', 'incomplete')),
  start_unix_ns  INTEGER,  -- wall clock (Unix epoch), for humans; not the timeline
  end_unix_ns    INTEGER,
  start_ns       INTEGER,  -- run-wide timeline
  end_ns         INTEGER,
  failing_rank   INTEGER,
  world_size     INTEGER
);

CREATE TABLE string (
  id    INTEGER PRIMARY KEY,
  value TEXT NOT NULL UNIQUE
);

CREATE TABLE rank (
  rank                 INTEGER PRIMARY KEY,  -- world rank
  local_rank           INTEGER,
  node                 INTEGER,
  host                 TEXT,
  pid                  INTEGER,
  device               TEXT,
  clock_offset_ns      INTEGER,  -- added to this host's monotonic clock to reach the timeline
  clock_uncertainty_ns INTEGER,
  clock_drift_ppm      REAL,     -- fitted drift of that offset over the run (ppm), 0 if unmeasured
  exit_code            INTEGER,  -- NULL while running, when unknown, or when a signal ended it
  exit_signal          INTEGER   -- the signal that ended the rank, 0 if none
);

CREATE TABLE track (
  id      INTEGER PRIMARY KEY,
  rank    INTEGER NOT NULL,
  kind    INTEGER NOT NULL REFERENCES track_kind(id),
  name_id INTEGER NOT NULL REFERENCES string(id),
  UNIQUE (rank, kind, name_id)
);

CREATE TABLE slice (
  id          INTEGER PRIMARY KEY,
  track_id    INTEGER NOT NULL REFERENCES track(id),
  ts_ns       INTEGER NOT NULL,
  dur_ns      INTEGER NOT NULL,
  name_id     INTEGER NOT NULL REFERENCES string(id),
  category    INTEGER NOT NULL REFERENCES slice_category(id),
  step        INTEGER,
  micro_batch INTEGER,
  layer       INTEGER
);
-- slice_track_ts (track_id, ts_ns) is built when the trace is closed: see the end of this file.

CREATE TABLE collective (
  slice_id          INTEGER PRIMARY KEY REFERENCES slice(id),  -- same id as its slice
  comm_id           INTEGER NOT NULL REFERENCES string(id),
  seq               INTEGER NOT NULL,
  op                INTEGER NOT NULL REFERENCES string(id),
  dtype             INTEGER NOT NULL REFERENCES string(id),
  reduce_op         INTEGER REFERENCES string(id),
  count             INTEGER NOT NULL,
  bytes             INTEGER NOT NULL,
  peer              INTEGER,  -- send/recv peer (world rank)
  root              INTEGER,  -- broadcast/reduce root
  comm_rank         INTEGER,  -- this rank within the communicator
  group_size        INTEGER NOT NULL,
  group_ranks_id    INTEGER REFERENCES string(id),  -- '0,1,2,3': world ranks, interned
  enqueue_ns        INTEGER,
  gpu_start_ns      INTEGER,
  gpu_end_ns        INTEGER,
  state             INTEGER NOT NULL  -- 0 enqueued, 1 started, 2 completed, 3 failed
);
-- collective_comm_seq (comm_id, seq) is built when the trace is closed: see the end of this file.

-- What NCCL chose for a collective, where its profiler plugin reported it (partrain's plugin,
-- docs/tracing-levels.md): one row per such collective, same id as its slice. Since version 4.
CREATE TABLE collective_nccl (
  slice_id   INTEGER PRIMARY KEY REFERENCES slice(id),
  algorithm  INTEGER REFERENCES string(id),  -- Ring, Tree, CollNetDirect, NVLS, ...
  protocol   INTEGER REFERENCES string(id),  -- LL, LL128, Simple
  channels   INTEGER                         -- channels it ran on
);

CREATE TABLE kernel (
  slice_id         INTEGER PRIMARY KEY REFERENCES slice(id),
  correlation_id   INTEGER,
  device           INTEGER,
  stream           INTEGER,
  grid_x INTEGER, grid_y INTEGER, grid_z INTEGER,
  block_x INTEGER, block_y INTEGER, block_z INTEGER,
  registers        INTEGER,
  static_shared_bytes  INTEGER,
  dynamic_shared_bytes INTEGER
);

-- GPU copies and fills (the transfer rows of memcpy and memset slices): the bytes each moved.
-- Since version 3.
CREATE TABLE transfer (
  slice_id         INTEGER PRIMARY KEY REFERENCES slice(id),
  correlation_id   INTEGER,
  device           INTEGER,
  stream           INTEGER,
  bytes            INTEGER NOT NULL
);

-- Appended in arrival order (rowid); memory_rank_ts (rank, ts_ns, category, bytes), the covering
-- memory_events access path, is built when the trace is closed: see the end of this file. Two
-- samples of one category at the same nanosecond are both kept and read in index order.
CREATE TABLE memory (
  rank     INTEGER NOT NULL,
  ts_ns    INTEGER NOT NULL,
  category INTEGER NOT NULL REFERENCES memory_category(id),
  bytes    INTEGER NOT NULL  -- bytes in use in this category from ts_ns on
);

-- Sampled values, one track (kind 'counter') per rank and quantity, the unit in the name
-- (gpu_sm_clock_mhz): NVML's GPU utilisation, SM clock, power and throttle reasons. Since version 2.
CREATE TABLE counter (
  track_id INTEGER NOT NULL REFERENCES track(id),
  ts_ns    INTEGER NOT NULL,
  value    REAL NOT NULL
);

-- One row per rank, attempt and step number. `attempt` counts torchrun's restarts of the job
-- before the worker that ran the step (its TORCHELASTIC_RESTART_COUNT; since version 7, 0 in older
-- files): a restarted worker numbers its steps from 0 again, and each attempt keeps its own. The
-- key leads with the attempt so that the last one (MAX(attempt), what analyses read) is a seek.
-- The key's columns come first, in its order: SQLite 3.40's integrity check misreads a WITHOUT
-- ROWID table whose key columns follow others ("NULL value in step.rank").
CREATE TABLE step (
  attempt INTEGER NOT NULL DEFAULT 0,
  rank    INTEGER NOT NULL,
  step    INTEGER NOT NULL,
  ts_ns   INTEGER NOT NULL,
  dur_ns  INTEGER NOT NULL,
  loss    REAL,
  tokens  INTEGER,
  PRIMARY KEY (attempt, rank, step)
) WITHOUT ROWID;

-- A step row that a later row of the same rank, attempt and number replaced in `step`, kept as
-- it was: the job's own step counter started again (per epoch, a second loop), or, in files
-- older than version 7 (no attempt), a torchrun restart's worker ran that number again. `step`
-- holds the latest. Since version 6; `attempt` since version 7.
CREATE TABLE earlier_step (
  rank    INTEGER NOT NULL,
  step    INTEGER NOT NULL,
  ts_ns   INTEGER NOT NULL,
  dur_ns  INTEGER NOT NULL,
  loss    REAL,
  tokens  INTEGER,
  attempt INTEGER NOT NULL DEFAULT 0
);

-- How a mixture-of-experts layer routed one step's tokens (the workload's router counts over the
-- whole micro-batch, the same on every rank of the layer's group): `tokens` is a JSON array of
-- the token-to-expert assignments each routed expert received, before any capacity cut, indexed
-- by expert; dropped_tokens, those of them dropped for want of capacity. One row per array keeps a
-- 256-expert layer one row a step; the expert_loads view unnests it. Since version 5.
CREATE TABLE expert_load (
  rank           INTEGER NOT NULL,
  step           INTEGER NOT NULL,
  layer          INTEGER NOT NULL,
  experts        INTEGER NOT NULL,  -- length of tokens
  tokens         TEXT NOT NULL,     -- JSON array of integers, one per expert
  dropped_tokens INTEGER NOT NULL,
  aux_loss       REAL,              -- the load-balancing auxiliary loss; NULL when not computed
  PRIMARY KEY (rank, step, layer)
) WITHOUT ROWID;

CREATE TABLE stat (
  name        TEXT NOT NULL,
  rank        INTEGER NOT NULL,  -- -1: the whole run
  value       INTEGER NOT NULL,
  severity    TEXT NOT NULL CHECK (severity IN ('info', 'data_loss', 'error')),
  description TEXT NOT NULL DEFAULT '',
  PRIMARY KEY (name, rank)
) WITHOUT ROWID;

-- partrain:deferred-indexes
-- Indexes the writer builds when it closes the trace, in one sort, instead of one b-tree seek per
-- row while events arrive (the slice index was a third of the writer's work, the collective
-- index a twentieth, keeping memory clustered by rank and time as much as the slice index). A running trace, or one whose writer died before closing it, has none of
-- them until they are built (TraceWriter's close; create_deferred_indexes for a trace marked
-- incomplete): queries give the same answers, only slower. IF NOT EXISTS: building twice is
-- harmless.
CREATE INDEX IF NOT EXISTS slice_track_ts ON slice (track_id, ts_ns);
CREATE INDEX IF NOT EXISTS collective_comm_seq ON collective (comm_id, seq);
CREATE INDEX IF NOT EXISTS memory_rank_ts ON memory (rank, ts_ns, category, bytes);
