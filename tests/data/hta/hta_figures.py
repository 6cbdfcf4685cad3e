"""What HolisticTraceAnalysis computes on a directory of per-rank Chrome traces, as one JSON
object on stdout (tests/integration/hta_export_torch_test.cpp compares it with `partrain
analyze --json`):

  ranks        the ranks HTA loaded
  events       per rank, the events HTA kept (after its own filters)
  gpu_events   per rank, those on a GPU stream (args.stream != -1): what its breakdowns use
  steps        HTA's profiler steps (ProfilerStep#N annotations), [] without any
  temporal     per rank: span_us (HTA's kernel_time), idle_us, compute_us, non_compute_us
  overlap      per rank: comp_comm_overlap_pctg, null where HTA gives NaN (no NCCL kernel)
  *_error      what an analysis raised instead ("IndexError: ..."), on traces it cannot take

Usage: python hta_figures.py TRACE_DIR
"""
import json
import math
import sys
import warnings


def main(trace_dir):
    warnings.simplefilter("ignore")
    from hta.trace_analysis import TraceAnalysis

    analyzer = TraceAnalysis(trace_dir=trace_dir)
    ranks = sorted(int(r) for r in analyzer.t.get_ranks())
    traces = {r: analyzer.t.get_trace(r) for r in ranks}
    out = {
        "ranks": ranks,
        "events": {str(r): int(len(df)) for r, df in traces.items()},
        "gpu_events": {str(r): int(df["stream"].ne(-1).sum()) for r, df in traces.items()},
        "steps": [int(s) for s in analyzer.get_profiler_steps()],
    }
    try:
        frame = analyzer.get_temporal_breakdown(visualize=False)
        out["temporal"] = {
            str(int(row["rank"])): {
                "span_us": float(row["kernel_time(us)"]),
                "idle_us": float(row["idle_time(us)"]),
                "compute_us": float(row["compute_time(us)"]),
                "non_compute_us": float(row["non_compute_time(us)"]),
            }
            for _, row in frame.iterrows()
        }
    except Exception as error:  # what HTA raises on a trace without GPU events
        out["temporal_error"] = f"{type(error).__name__}: {error}"
    try:
        frame = analyzer.get_comm_comp_overlap(visualize=False)
        out["overlap"] = {
            str(int(rank)): None if math.isnan(value) else float(value)
            for rank, value in zip(frame["rank"], frame["comp_comm_overlap_pctg"])
        }
    except Exception as error:
        out["overlap_error"] = f"{type(error).__name__}: {error}"
    print(json.dumps(out))


if __name__ == "__main__":
    main(sys.argv[1])
