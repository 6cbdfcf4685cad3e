#!/usr/bin/env python3
"""Checks a partrain trace of tests/gpu/torch_nccl_program.py against the program's own summary.

Usage: check_torch_trace.py TRACE.db EXPECTED.json

TRACE.db is what `partrain trace -o TRACE.db -- python3 -m torch.distributed.run ...
torch_nccl_program.py --json-out EXPECTED.json` wrote; EXPECTED.json is the program's summary
(world_size, steps, the explicit all_reduce's bytes and count). Reads only the documented views
(docs/trace-format.md: collectives, kernels, steps, stats, runs, ranks) and checks, per rank:

  - every explicit all_reduce is in `collectives`: op all_reduce, dtype float, exactly its bytes,
    state completed, gpu_start_ns and gpu_end_ns both set with end >= start (its GPU work was
    linked to it), a kernel of `kernels` inside that span, and one per step: as many rows of that
    size as the program made (its `steps`), carrying the steps 0 .. steps-1;
  - DDP's bucket all_reduces are there too: other all_reduce rows inside the steps;
  - `kernels` has the model's kernels by name: GEMMs (gemm, nvjet, cutlass, xmma, sm90, ...),
    LayerNorm and GELU; the 10 kernels of most total time are printed for a human to read;
  - `steps` has the program's steps 0 .. steps-1, from its NVTX "ProfilerStep#N" ranges.

  - step labels: at least 90% of the collectives issued and of the kernels run inside a step's
    span carry that step (docs/tracing.md: "everything recorded while it is open ... carries that
    step").

Prints what it found, then a line "figure: ..." (the key figures, one line) and last "PASS"
(exit 0) or "FAIL: <reasons>" (exit 1). Exit 2: bad usage or a file that cannot be read.
"""

import json
import re
import sqlite3
import statistics
import sys

GEMM = re.compile(r"gemm|nvjet|cutlass|xmma|sm90_|sm80_|s1688|s16816", re.I)
LAYER_NORM = re.compile(r"layer_?norm", re.I)
GELU = re.compile(r"gelu", re.I)
OPTIMIZER = re.compile(r"adam|multi_tensor_apply", re.I)


def short(name, width=110):
    return name if len(name) <= width else name[: width - 3] + "..."


def main(argv):
    if len(argv) != 3:
        print(__doc__.split("\n\n")[1], file=sys.stderr)
        return 2
    db_path, expected_path = argv[1], argv[2]
    try:
        expected = json.load(open(expected_path))
        steps = int(expected["steps"])
        world = int(expected["world_size"])
        ar_bytes = int(expected["allreduce"]["bytes"])
        ar_count = int(expected["allreduce"]["count"])
    except (OSError, ValueError, KeyError, TypeError) as e:
        why = f"no key {e} in it (not torch_nccl_program.py's --json-out?)" if isinstance(e, KeyError) else e
        print(f"check_torch_trace: cannot read the program's summary {expected_path}: {why}", file=sys.stderr)
        return 2
    try:
        db = sqlite3.connect(f"file:{db_path}?mode=ro", uri=True)
        db.execute("SELECT 1 FROM collectives LIMIT 1").fetchall()
    except sqlite3.Error as e:
        print(f"check_torch_trace: cannot read the trace {db_path}: {e}", file=sys.stderr)
        return 2

    q = lambda sql, *params: db.execute(sql, params).fetchall()  # noqa: E731
    failures = []

    run = q("SELECT status, command, world_size FROM runs")
    if run:
        print(f"run: status {run[0][0]}, world size {run[0][2]}, command {short(run[0][1] or '', 200)}")
        if run[0][0] != "completed":
            failures.append(f"run status {run[0][0]}, not completed")
    ranks = sorted(r for (r,) in q("SELECT DISTINCT rank FROM collectives"))
    print(f"ranks with collectives: {ranks or 'none'} (the program ran {world})")
    if ranks != list(range(world)):
        failures.append(f"ranks with collectives {ranks}, expected 0..{world - 1}")

    # -- the explicit all_reduces -------------------------------------------------------------
    explicit = q("""SELECT rank, dtype, reduce_op, state, step, gpu_start_ns, gpu_end_ns, ts_ns, dur_ns
                    FROM collectives WHERE op = 'all_reduce' AND bytes = ? ORDER BY rank, ts_ns""", ar_bytes)
    gpu_us, host_us, linked_kernels = [], [], {}
    for rank in range(world):
        rows = [r for r in explicit if r[0] == rank]
        if len(rows) != ar_count:
            failures.append(f"rank {rank}: {len(rows)} all_reduce rows of {ar_bytes} bytes, expected {ar_count}")
        bad = [r for r in rows if r[1] != "float"]
        if bad:
            failures.append(f"rank {rank}: {len(bad)} explicit all_reduce(s) with dtype {bad[0][1]}, not float")
        bad = [r for r in rows if r[3] != "completed"]
        if bad:
            failures.append(f"rank {rank}: {len(bad)} explicit all_reduce(s) in state {bad[0][3]}")
        no_gpu = [r for r in rows if r[5] is None or r[6] is None]
        if no_gpu:
            failures.append(f"rank {rank}: {len(no_gpu)} of {len(rows)} explicit all_reduce(s) without GPU time "
                            "(gpu_start_ns/gpu_end_ns NULL: their GPU work was not linked)")
        backwards = [r for r in rows if r[5] is not None and r[6] is not None and r[6] < r[5]]
        if backwards:
            failures.append(f"rank {rank}: {len(backwards)} explicit all_reduce(s) with gpu_end_ns < gpu_start_ns")
        step_list = sorted(r[4] for r in rows if r[4] is not None)
        if len(rows) == ar_count and step_list != list(range(steps)):
            failures.append(f"rank {rank}: the explicit all_reduces carry steps {', '.join(map(str, step_list[:4]))}"
                            f"{', ...' if len(step_list) > 4 else ''}, not one in each of 0..{steps - 1}")
        missing_kernel = 0
        for r in rows:
            host_us.append(r[8] / 1e3)
            if r[5] is None or r[6] is None or r[6] < r[5]:
                continue
            gpu_us.append((r[6] - r[5]) / 1e3)
            inside = q("""SELECT name FROM kernels WHERE rank = ? AND ts_ns >= ? AND ts_ns + dur_ns <= ?
                          ORDER BY ts_ns LIMIT 1""", rank, r[5], r[6])
            if inside:
                linked_kernels[inside[0][0]] = linked_kernels.get(inside[0][0], 0) + 1
            else:
                missing_kernel += 1
        if missing_kernel:
            failures.append(f"rank {rank}: {missing_kernel} explicit all_reduce(s) with a GPU span holding no kernel row")
    print(f"explicit all_reduce ({ar_bytes} bytes, float): {len(explicit)} rows over {world} rank(s), "
          f"{len(gpu_us)} with GPU time" +
          (f"; GPU median {statistics.median(gpu_us):.1f} us, host median {statistics.median(host_us):.1f} us"
           if gpu_us else ""))
    for name, n in sorted(linked_kernels.items(), key=lambda kv: -kv[1]):
        print(f"  linked kernel: {short(name)} ({n}x)")

    # -- DDP's bucket all_reduces ----------------------------------------------------------------
    # By time, not by the step column (checked apart below): issued inside one of the rank's steps.
    buckets = q("""SELECT c.bytes, COUNT(*), SUM(c.gpu_start_ns IS NOT NULL), MIN(c.dtype)
                   FROM collectives c WHERE c.op = 'all_reduce' AND c.bytes != ? AND EXISTS
                     (SELECT 1 FROM steps s WHERE s.rank = c.rank AND c.ts_ns BETWEEN s.ts_ns AND s.ts_ns + s.dur_ns)
                   GROUP BY c.bytes ORDER BY c.bytes DESC""", ar_bytes)
    n_buckets = sum(b[1] for b in buckets)
    print(f"other all_reduces inside the steps (DDP buckets): {n_buckets} rows, sizes "
          + (", ".join(f"{b[0]} B x{b[1]} ({b[3]}, {b[2]} with GPU time)" for b in buckets[:8]) or "none"))
    ddp = expected.get("ddp") or {}
    if ddp.get("bucket_sizes") or ddp.get("rebuilt_bucket_sizes"):
        print(f"  DDP says: bucket_sizes {ddp.get('bucket_sizes')}, rebuilt {ddp.get('rebuilt_bucket_sizes')}")
    if n_buckets < steps * world:
        failures.append(f"{n_buckets} other all_reduce rows inside the steps: DDP's bucket all_reduces "
                        f"(at least one per step and rank, {steps * world}) are missing")
    others = q("""SELECT op, COUNT(*) FROM collectives WHERE op != 'all_reduce' GROUP BY op""")
    if others:
        print("other collectives: " + ", ".join(f"{op} x{n}" for op, n in others))

    # -- kernels ----------------------------------------------------------------------------------
    top = q("""SELECT name, COUNT(*), SUM(dur_ns) FROM kernels GROUP BY name ORDER BY SUM(dur_ns) DESC""")
    total_ns = sum(t[2] for t in top) or 1
    n_kernels = sum(t[1] for t in top)
    print(f"kernels: {n_kernels} rows, {len(top)} names, {total_ns / 1e6:.1f} ms in all; top 10 by total time:")
    for name, n, ns in top[:10]:
        print(f"  {100 * ns / total_ns:5.1f}%  {ns / 1e6:8.2f} ms  {n:6d}x  {short(name)}")
    found = {}
    for label, pattern in (("GEMM", GEMM), ("LayerNorm", LAYER_NORM), ("GELU", GELU), ("optimizer", OPTIMIZER)):
        match = [t for t in top if pattern.search(t[0])]
        found[label] = match
        share = sum(t[2] for t in match) / total_ns
        print(f"  {label}: {len(match)} name(s), {sum(t[1] for t in match)} launches, {100 * share:.1f}% of kernel time"
              + (f"; e.g. {short(match[0][0], 90)}" if match else ""))
    for label in ("GEMM", "LayerNorm", "GELU"):
        if not found[label]:
            failures.append(f"no {label} kernel among the {len(top)} kernel names")

    # -- steps ------------------------------------------------------------------------------------
    for rank in range(world):
        got = [s for (s,) in q("SELECT step FROM steps WHERE rank = ? ORDER BY step", rank)]
        if got != list(range(steps)):
            failures.append(f"rank {rank}: steps {got[:5]}{'...' if len(got) > 5 else ''} "
                            f"({len(got)}), expected 0..{steps - 1} from the NVTX ProfilerStep# ranges")
    step_ms = [d / 1e6 for (d,) in q("SELECT dur_ns FROM steps WHERE rank = 0 AND dur_ns IS NOT NULL")]
    if step_ms:
        print(f"steps: rank 0 has {len(step_ms)}, median {statistics.median(step_ms):.2f} ms")

    # -- step labels: what was issued (collectives) or ran (kernels) inside a step carries it ------
    for what, sql in (("collectives", """SELECT c.step, (SELECT s.step FROM steps s WHERE s.rank = c.rank
                                            AND c.ts_ns BETWEEN s.ts_ns AND s.ts_ns + s.dur_ns)
                                         FROM collectives c"""),
                      ("kernels", """SELECT sl.step, (SELECT s.step FROM steps s WHERE s.rank = k.rank
                                       AND k.ts_ns BETWEEN s.ts_ns AND s.ts_ns + s.dur_ns)
                                     FROM kernels k JOIN slices sl ON sl.slice_id = k.slice_id""")):
        pairs = [(label, by_time) for label, by_time in q(sql) if by_time is not None]
        right = sum(1 for label, by_time in pairs if label == by_time)
        off = {}
        for label, by_time in pairs:
            if label != by_time:
                key = "NULL" if label is None else f"{label - by_time:+d}"
                off[key] = off.get(key, 0) + 1
        common = sorted(off.items(), key=lambda kv: -kv[1])
        offsets = ", ".join(f"{k} x{n}" for k, n in common[:3]) + (f", {len(common) - 3} other offsets" if len(common) > 3 else "")
        print(f"step labels: {right} of the {len(pairs)} {what} inside a step carry that step"
              + (f" (the others are labelled off by {offsets})" if off else ""))
        if pairs and right < 0.9 * len(pairs):
            failures.append(f"{right} of the {len(pairs)} {what} inside a step carry that step (off by {offsets})")

    # -- what partrain says it lost -----------------------------------------------------------------
    for name, rank, value, severity in q("SELECT name, rank, value, severity FROM stats ORDER BY name"):
        print(f"stat: {name} rank {rank} = {value} ({severity})")

    gemm_share = sum(t[2] for t in found["GEMM"]) / total_ns
    print(f"figure: all_reduce {ar_bytes} B: {len(explicit)}/{ar_count * world}, {len(gpu_us)} with GPU time"
          + (f" ({statistics.median(gpu_us):.0f} us)" if gpu_us else "")
          + f"; {n_buckets} DDP bucket all_reduces; {n_kernels} kernels, GEMM {100 * gemm_share:.0f}%"
          f"; {len(step_ms)} steps")
    if failures:
        print("FAIL: " + "; ".join(failures))
        return 1
    print("PASS")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
