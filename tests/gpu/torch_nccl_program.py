#!/usr/bin/env python3
"""A small but real PyTorch training program on the NCCL backend, for partrain's GPU validation.

scripts/gpu-validate.sh runs it under `partrain trace -- python3 -m torch.distributed.run ...`
and checks the trace with tests/gpu/check_torch_trace.py (docs/gpu-validation.md, rows
"torch nccl trace" and "torch trace overhead"). Nothing of partrain is imported: it is the kind
of program a user traces.

What it does, per rank (one per GPU; NCCL refuses two ranks on one GPU):
  - init_process_group("nccl"); a model of --layers pre-norm MLP blocks (LayerNorm, Linear
    hidden -> 4 hidden, GELU, Linear 4 hidden -> hidden, residual) wrapped in
    DistributedDataParallel, AdamW, bf16 autocast (--precision);
  - --steps steps of random input, each inside the NVTX range "ProfilerStep#<step>" (the name
    PyTorch's profiler gives its steps, which `partrain trace --step-marker` matches by default),
    and in each step, after the optimizer, one explicit dist.all_reduce of a float32 tensor of
    --allreduce-elements elements (default 5,000,000 = 20,000,000 bytes: no DDP bucket can have
    that size, every parameter here being a multiple of 1024 elements). Its op is AVG: with one
    rank NCCL skips an in-place SUM altogether (nothing to add), while AVG still launches a kernel,
    so the call has GPU work to link at any world size;
  - the step time is measured on the host around each step, after torch.cuda.synchronize().

--profiler torch wraps the steps in torch.profiler.profile(activities=[CPU, CUDA]) with
prof.step() after each step (never combine it with `partrain trace`: CUPTI serves one subscriber).

At the end rank 0 prints one JSON line (and writes it to --json-out): world_size, steps, the
explicit all_reduce's bytes and count, the median step time in ms (over the steps after
--warmup), and DDP's bucket sizes when this torch reports them. Exit 0, or 1 when the
all_reduce's result is wrong.
"""

import argparse
import json
import os
import socket
import statistics
import sys
import time


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--steps", type=int, default=20, help="training steps (default 20)")
    p.add_argument("--warmup", type=int, default=3,
                   help="first steps left out of the median step time (default 3)")
    p.add_argument("--profiler", choices=("none", "torch"), default="none",
                   help="none, or torch: under torch.profiler.profile(CPU, CUDA)")
    p.add_argument("--hidden", type=int, default=1024)
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--batch", type=int, default=8192, help="rows of the random input per step")
    p.add_argument("--precision", choices=("bf16", "fp32"), default="bf16",
                   help="bf16: autocast to bfloat16 (fp32 parameters and gradients); fp32")
    p.add_argument("--allreduce-elements", type=int, default=5_000_000,
                   help="float32 elements of the explicit all_reduce of each step")
    p.add_argument("--json-out", help="also write the JSON summary to this file (rank 0)")
    p.add_argument("--torch-trace", help="with --profiler torch: export its Chrome trace here")
    args = p.parse_args()
    if args.steps < 1 or args.warmup < 0 or args.allreduce_elements < 1:
        p.error("--steps and --allreduce-elements must be positive, --warmup not negative")
    return args


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main():
    args = parse_args()
    # Under torchrun the launcher sets these; plain `python3 program.py` is one rank of one.
    if "RANK" not in os.environ:
        os.environ.update(RANK="0", WORLD_SIZE="1", LOCAL_RANK="0", LOCAL_WORLD_SIZE="1",
                          MASTER_ADDR="127.0.0.1", MASTER_PORT=str(free_port()))
    try:
        import torch
        import torch.distributed as dist
        import torch.nn as nn
        from torch.nn.parallel import DistributedDataParallel as DDP
    except ModuleNotFoundError as e:
        print(f"torch_nccl_program: no torch here ({e})", file=sys.stderr)
        return 3
    if not torch.cuda.is_available():
        print("torch_nccl_program: no usable GPU (torch.cuda.is_available() is False)", file=sys.stderr)
        return 3

    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    device = torch.device("cuda", local_rank)
    torch.cuda.set_device(device)
    dist.init_process_group("nccl")
    rank, world = dist.get_rank(), dist.get_world_size()

    torch.manual_seed(0)  # the same parameters on every rank (DDP also broadcasts rank 0's)
    torch.backends.cuda.matmul.allow_tf32 = True
    h = args.hidden

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.norm = nn.LayerNorm(h)
            self.up = nn.Linear(h, 4 * h)
            self.act = nn.GELU()
            self.down = nn.Linear(4 * h, h)

        def forward(self, x):
            return x + self.down(self.act(self.up(self.norm(x))))

    model = nn.Sequential(*[Block() for _ in range(args.layers)], nn.LayerNorm(h), nn.Linear(h, h))
    model = model.to(device)
    n_params = sum(p.numel() for p in model.parameters())
    ddp = DDP(model, device_ids=[local_rank])
    opt = torch.optim.AdamW(ddp.parameters(), lr=1e-4)
    loss_fn = nn.MSELoss()
    data = torch.Generator(device=device)
    data.manual_seed(1000 + rank)  # each rank its own batch, as data-parallel ranks have

    # The explicit all_reduce: rank r contributes r + 1 everywhere, so the average is (world + 1) / 2.
    probe = torch.empty(args.allreduce_elements, dtype=torch.float32, device=device)
    expected_value = (world + 1) / 2
    autocast = torch.autocast("cuda", dtype=torch.bfloat16, enabled=args.precision == "bf16")

    def train_step():
        x = torch.randn(args.batch, h, device=device, generator=data)
        y = torch.randn(args.batch, h, device=device, generator=data)
        with autocast:
            out = ddp(x)
        loss = loss_fn(out.float(), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()  # DDP's bucket all_reduces run here
        opt.step()
        probe.fill_(rank + 1)
        dist.all_reduce(probe, op=dist.ReduceOp.AVG)
        return loss

    step_ms = []
    loss = None

    def run_steps(prof=None):
        nonlocal loss
        for step in range(args.steps):
            torch.cuda.nvtx.range_push(f"ProfilerStep#{step}")
            begin = time.perf_counter()
            loss = train_step()
            torch.cuda.synchronize()
            step_ms.append((time.perf_counter() - begin) * 1e3)
            torch.cuda.nvtx.range_pop()
            if prof is not None:
                prof.step()

    if args.profiler == "torch":
        from torch.profiler import ProfilerActivity, profile
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            run_steps(prof)
        if args.torch_trace and rank == 0:
            prof.export_chrome_trace(args.torch_trace)
    else:
        run_steps()

    probe_ok = bool(torch.all(probe == expected_value).item())
    final_loss = float(loss.item())

    ddp_info = {"bucket_cap_mb": 25}
    try:  # a private API: best effort
        logged = ddp._get_ddp_logging_data()
        for key in ("bucket_sizes", "rebuilt_bucket_sizes", "num_buckets_reduced"):
            if key in logged:
                value = logged[key]
                if isinstance(value, str) and value:
                    value = [int(v) for v in value.replace(",", " ").split()]
                ddp_info[key] = value
    except Exception as e:  # noqa: BLE001
        ddp_info["error"] = f"{type(e).__name__}: {e}"

    timed = step_ms[args.warmup:] or step_ms
    timed_sorted = sorted(timed)
    summary = {
        "program": "torch_nccl_program",
        "world_size": world,
        "rank": rank,
        "steps": args.steps,
        "warmup": args.warmup,
        "profiler": args.profiler,
        "precision": args.precision,
        "model": {"hidden": h, "layers": args.layers, "batch": args.batch, "params": n_params},
        "allreduce": {
            "op": "all_reduce", "reduce_op": "avg", "dtype": "float",
            "elements": args.allreduce_elements, "bytes": args.allreduce_elements * 4,
            "count": args.steps, "result_ok": probe_ok,
        },
        "step_time_ms": {
            "median": statistics.median(timed),
            "p90": timed_sorted[min(len(timed_sorted) - 1, int(0.9 * len(timed_sorted)))],
            "min": timed_sorted[0],
            "all": [round(t, 3) for t in step_ms],
        },
        "final_loss": final_loss,
        "ddp": ddp_info,
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "nccl": ".".join(map(str, torch.cuda.nccl.version())),
        "gpu": torch.cuda.get_device_name(device),
    }
    dist.destroy_process_group()
    if rank == 0:
        line = json.dumps(summary)
        print(line, flush=True)
        if args.json_out:
            with open(args.json_out, "w") as f:
                f.write(line + "\n")
    if not probe_ok:
        print(f"torch_nccl_program: rank {rank}: all_reduce(AVG) result is not {expected_value}",
              file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
