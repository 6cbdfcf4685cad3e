"""Training under torch.profiler with a schedule, as a user profiles a job.

    torchrun --nproc-per-node 4 examples/pytorch/profiler_schedule.py

Nothing of partrain is imported (docs/pytorch.md). A linear model whose gradients are
all-reduced by hand, --steps steps inside torch.profiler.profile(schedule=...) with
prof.step() after each: PyTorch names the steps ProfilerStep#0, #1, ..., and partrain's trace
takes its steps from them. Rank 0 prints the loss of every step, a digest of the final
parameters, and at which step the profiler's trace was ready. train() returns the collectives
its tensors imply, which partrain's tests find in the trace.
"""

import argparse

import torch
import torch.distributed as dist
import torch.distributed.nn  # noqa: F401  (before init_process_group: docs/pytorch.md)
from torch import nn
from torch.profiler import ProfilerActivity, profile, schedule


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--hidden", type=int, default=32)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--backend", default="gloo")
    return parser.parse_args(argv)


def train(args):
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    model = nn.Linear(args.hidden, args.hidden)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    data = torch.Generator().manual_seed(100 + rank)
    kept = []
    with profile(activities=[ProfilerActivity.CPU],
                 schedule=schedule(wait=1, warmup=1, active=2, repeat=1),
                 on_trace_ready=lambda prof: kept.append(prof.step_num)) as prof:
        for step in range(args.steps):
            x = torch.randn(args.batch, args.hidden, generator=data)
            loss = (model(x) - x).pow(2).mean()
            optimizer.zero_grad()
            loss.backward()
            for p in model.parameters():
                p.grad /= world
                dist.all_reduce(p.grad)
            optimizer.step()
            if rank == 0:
                print(f"profiler_schedule: step {step} loss {loss.item():.6f}", flush=True)
            prof.step()
    digest = sum(float(p.detach().double().abs().sum()) for p in model.parameters())
    if rank == 0:
        print(f"profiler_schedule: parameters digest {digest:.6f}; traces ready at steps {kept}",
              flush=True)
    per_step = [{"group": "default_pg", "op": "all_reduce",
                 "bytes": p.numel() * p.element_size(), "times": 1} for p in model.parameters()]
    return {"steps": args.steps, "per_step": per_step}


def main(argv=None):
    args = parse_args(argv)
    dist.init_process_group(args.backend)
    try:
        train(args)
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
