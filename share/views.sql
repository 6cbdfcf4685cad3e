-- The documented query surface of a partrain trace (docs/trace-format.md): raw tables hold codes
-- and interned string ids; these views give names, ranks and text. Tools and users query these.
CREATE VIEW ranks AS
SELECT rank, local_rank, node, host, pid, device, clock_offset_ns, clock_uncertainty_ns,
       clock_drift_ppm, exit_code, exit_signal
FROM rank;

CREATE VIEW tracks AS
SELECT t.id AS track_id, t.rank, k.name AS kind, s.value AS name
FROM track t JOIN track_kind k ON k.id = t.kind JOIN string s ON s.id = t.name_id;

CREATE VIEW slices AS
SELECT sl.id AS slice_id, t.rank, k.name AS track_kind, tn.value AS track, sl.ts_ns, sl.dur_ns,
       n.value AS name, c.name AS category, sl.step, sl.micro_batch, sl.layer
FROM slice sl
JOIN track t ON t.id = sl.track_id
JOIN track_kind k ON k.id = t.kind
JOIN string tn ON tn.id = t.name_id
JOIN string n ON n.id = sl.name_id
JOIN slice_category c ON c.id = sl.category;

CREATE VIEW collectives AS
SELECT t.rank, cid.value AS comm_id, co.seq, op.value AS op, dt.value AS dtype, co.count,
       co.bytes, coalesce(co.peer, co.root) AS peer, sl.ts_ns, sl.dur_ns,
       ro.value AS reduce_op, co.root, co.comm_rank, co.group_size, gr.value AS group_ranks,
       co.enqueue_ns, co.gpu_start_ns, co.gpu_end_ns,
       CASE co.state WHEN 0 THEN 'enqueued' WHEN 1 THEN 'started' WHEN 2 THEN 'completed'
                     ELSE 'failed' END AS state,
       sl.step, sl.id AS slice_id, alg.value AS algorithm, pro.value AS protocol,
       cn.channels, CASE WHEN sl.name_id <> co.op THEN lab.value END AS label
FROM collective co
JOIN slice sl ON sl.id = co.slice_id
JOIN string lab ON lab.id = sl.name_id
JOIN track t ON t.id = sl.track_id
JOIN string cid ON cid.id = co.comm_id
JOIN string op ON op.id = co.op
JOIN string dt ON dt.id = co.dtype
LEFT JOIN string ro ON ro.id = co.reduce_op
LEFT JOIN string gr ON gr.id = co.group_ranks_id
LEFT JOIN collective_nccl cn ON cn.slice_id = co.slice_id
LEFT JOIN string alg ON alg.id = cn.algorithm
LEFT JOIN string pro ON pro.id = cn.protocol;

CREATE VIEW kernels AS
SELECT t.rank, n.value AS name, sl.ts_ns, sl.dur_ns, k.correlation_id, k.device, k.stream,
       k.grid_x, k.grid_y, k.grid_z, k.block_x, k.block_y, k.block_z, k.registers,
       k.static_shared_bytes, k.dynamic_shared_bytes, sl.id AS slice_id
FROM kernel k
JOIN slice sl ON sl.id = k.slice_id
JOIN track t ON t.id = sl.track_id
JOIN string n ON n.id = sl.name_id;

CREATE VIEW transfers AS
SELECT t.rank, n.value AS name, c.name AS category, sl.ts_ns, sl.dur_ns, x.bytes,
       CASE WHEN sl.dur_ns > 0 THEN x.bytes * 1.0 / sl.dur_ns END AS gbps,
       x.correlation_id, x.device, x.stream, sl.step, sl.id AS slice_id
FROM transfer x
JOIN slice sl ON sl.id = x.slice_id
JOIN track t ON t.id = sl.track_id
JOIN string n ON n.id = sl.name_id
JOIN slice_category c ON c.id = sl.category;

CREATE VIEW memory_events AS
SELECT m.rank, m.ts_ns, c.name AS category, m.bytes
FROM memory m JOIN memory_category c ON c.id = m.category;

CREATE VIEW counters AS
SELECT t.rank, s.value AS name, c.ts_ns, c.value
FROM counter c JOIN track t ON t.id = c.track_id JOIN string s ON s.id = t.name_id;

-- Every attempt's steps; `attempt` (since version 7) is torchrun's restarts before the attempt.
CREATE VIEW steps AS
SELECT rank, step, ts_ns, dur_ns, loss, tokens, attempt FROM step;

-- The step rows a later one of the same rank, attempt and number replaced (since version 6).
CREATE VIEW earlier_steps AS
SELECT rank, step, ts_ns, dur_ns, loss, tokens, attempt FROM earlier_step;

-- A mixture-of-experts layer's step (since version 5): routed_tokens sums the experts' arrays.
CREATE VIEW expert_layers AS
SELECT rank, step, layer, experts,
       (SELECT coalesce(sum(value), 0) FROM json_each(l.tokens)) AS routed_tokens, dropped_tokens, aux_loss
FROM expert_load l;

-- One row per (rank, step, layer, expert): the assignments the expert received (since version 5).
CREATE VIEW expert_loads AS
SELECT l.rank, l.step, l.layer, CAST(j.key AS INTEGER) AS expert, j.value AS tokens
FROM expert_load l, json_each(l.tokens) j;

CREATE VIEW stats AS
SELECT name, CASE WHEN rank < 0 THEN NULL ELSE rank END AS rank, value, severity, description
FROM stat;

CREATE VIEW runs AS
SELECT run_id, command, config, status, start_unix_ns, end_unix_ns, start_ns, end_ns,
       failing_rank, world_size
FROM run;
