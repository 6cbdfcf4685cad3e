#!/usr/bin/env bash
# What partrain's PyTorch recording costs per collective: a 1-rank gloo process all-reduces one
# float N times (gloo does no communication, so the op itself is cheap and the recording's
# cost shows), RUNS alternating rounds of
#   untraced  plain python, no partrain
#   traced    under `partrain trace`: c10d hooks, the future's callback, one ctypes call into
#             libpartrain_inject.so with a packed record (what partrain does)
#   encoded   under `partrain trace`, the record encoded in Python as the collector protocol's
#             event and appended to a buffer instead of the ctypes call (the alternative's cost
#             on the training thread, before any socket write)
# Prints the median time per all_reduce (us) of each, and the differences.
set -euo pipefail
cd "$(dirname "$0")/.."
PARTRAIN=${PARTRAIN:-build/bin/partrain}
PYTHON=${PARTRAIN_TORCH_PYTHON:-${PARTRAIN_CACHE:-$HOME/.cache/partrain}/torch-venv/bin/python}
RUNS=${RUNS:-5}
N=${N:-5000}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
cat >"$dir/loop.py" <<'PY'
import gc, os, socket, statistics, struct, sys, time
with socket.socket() as s:
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
os.environ.update(RANK="0", WORLD_SIZE="1", MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
import torch
import torch.distributed as dist
dist.init_process_group("gloo")
if sys.argv[1] == "encoded":
    buffer = bytearray()
    # CollectiveRecord's fields as trace_event.cpp lays them out, roughly: the encoding work.
    layout = struct.Struct("<IBiqqqBBBQQiiiiqqqB")
    comm_id = b"default_pg:0"
    def encoded(record, size):
        f = struct.unpack_from("<iiiIQQQqqqQ", record)
        buffer.extend(layout.pack(0, 2, 0, -1, -1, -1, 1, 1, 0, f[4], f[4] * 4, -1, -1, 0, 1,
                                  f[7], f[8], f[9], 2))
        buffer.extend(struct.pack("<I", len(comm_id)) + comm_id)
        if len(buffer) > 1 << 20:
            buffer.clear()
    for obj in gc.get_objects():
        if type(obj).__name__ == "Native" and type(obj).__module__ == "partrain_torch._native":
            obj.collective = encoded
t = torch.ones(1)
def per_op_us(n):
    begin = time.perf_counter_ns()
    for _ in range(n):
        dist.all_reduce(t)
    return (time.perf_counter_ns() - begin) / n / 1e3
per_op_us(200)
print(statistics.median(per_op_us(int(sys.argv[2])) for _ in range(5)))
dist.destroy_process_group()
PY
declare -a untraced traced encoded
for i in $(seq 1 "$RUNS"); do
  untraced+=("$("$PYTHON" "$dir/loop.py" untraced "$N")")
  traced+=("$("$PARTRAIN" trace -o "$dir/t$i.db" -- "$PYTHON" "$dir/loop.py" traced "$N" 2>/dev/null)")
  encoded+=("$("$PARTRAIN" trace -o "$dir/e$i.db" -- "$PYTHON" "$dir/loop.py" encoded "$N" 2>/dev/null)")
done
python3 - "${untraced[*]}" "${traced[*]}" "${encoded[*]}" <<'PY'
import statistics, sys
u, t, e = ([float(x) for x in a.split()] for a in sys.argv[1:4])
for name, values in (("untraced", u), ("traced", t), ("encoded", e)):
    print(f"{name:9s} us per all_reduce: {' '.join(f'{x:.2f}' for x in values)}")
mu, mt, me = statistics.median(u), statistics.median(t), statistics.median(e)
print(f"median: untraced {mu:.2f} us, traced {mt:.2f} us (+{mt - mu:.2f}), "
      f"encoded in Python {me:.2f} us (+{me - mu:.2f})")
PY
