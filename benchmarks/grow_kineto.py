"""Grows a real Kineto trace to about SIZE bytes by repeating its steps: each copy of its events
is shifted in time by the trace's span and its ProfilerStep#N renumbered, so the importer sees a
longer profile of the same job (its collectives keep lining up across ranks). Written as
torch.profiler writes (pretty-printed, metadata first, gzip when OUT ends in .gz).

    python3 benchmarks/grow_kineto.py IN.pt.trace.json[.gz] OUT.json[.gz] SIZE_BYTES
"""
import gzip
import json
import re
import sys

STEP = re.compile(r"^ProfilerStep#(\d+)$")


def main():
    src, dst, size = sys.argv[1], sys.argv[2], int(sys.argv[3])
    opener = gzip.open if src.endswith(".gz") else open
    with opener(src, "rt") as f:
        trace = json.load(f)
    events = trace.pop("traceEvents")
    meta = [e for e in events if e.get("ph") == "M"]
    timed = [e for e in events if e.get("ph") != "M" and "ts" in e and e.get("cat") != "Trace"]
    steps = [int(STEP.match(e["name"]).group(1)) for e in timed if STEP.match(e.get("name", ""))]
    step_count = (max(steps) - min(steps) + 1) if steps else 1
    start = min(float(e["ts"]) for e in timed)
    span = max(float(e["ts"]) + float(e.get("dur", 0)) for e in timed) - start + 1000.0
    out = (gzip.open if dst.endswith(".gz") else open)(dst, "wt")
    out.write("{\n")
    for key, value in trace.items():
        if key != "traceName":
            out.write("  %s: %s,\n" % (json.dumps(key), json.dumps(value)))
    out.write('  "traceEvents": [\n')
    written = 0
    first = True

    def put(event):
        nonlocal written, first
        text = ("" if first else ",\n") + json.dumps(event, indent=2)
        first = False
        out.write(text)
        written += len(text)

    for e in meta:
        put(e)
    copy = 0
    while written < size:
        for e in timed:
            c = dict(e)
            c["ts"] = round(float(e["ts"]) + copy * span, 3)
            m = STEP.match(e.get("name", ""))
            if m:
                c["name"] = "ProfilerStep#%d" % (int(m.group(1)) + copy * step_count)
            put(c)
        copy += 1
    out.write('\n  ],\n  "traceName": %s\n}\n' % json.dumps(dst))
    out.close()
    print("%s: %d copies, %d bytes of events" % (dst, copy, written))


if __name__ == "__main__":
    main()
