"""Data-parallel training with DistributedDataParallel, as a user writes it.

    torchrun --nproc-per-node 4 examples/pytorch/ddp_train.py
    partrain launch -n 4 -- python3 examples/pytorch/ddp_train.py
    partrain trace -- torchrun --nproc-per-node 4 examples/pytorch/ddp_train.py

Nothing of partrain is imported: partrain records it through PyTorch's own hooks
(docs/pytorch.md). A small MLP on a synthetic regression task, SGD, --steps steps on gloo
(--backend nccl on GPUs): DDP all-reduces the gradients (one bucket) and the script the loss
(every rank logs the same). Rank 0 prints the loss of every step and a digest of the final
parameters, the same on every launcher. train() returns the collectives its tensors imply,
which partrain's tests find in the trace.
"""

import argparse
import statistics
import time

import torch
import torch.distributed as dist
import torch.distributed.nn  # noqa: F401  (before init_process_group: docs/pytorch.md)
from torch import nn
from torch.nn.parallel import DistributedDataParallel


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--hidden", type=int, default=64)
    parser.add_argument("--batch", type=int, default=16, help="rows per rank and step")
    parser.add_argument("--backend", default="gloo")
    parser.add_argument("--timing", action="store_true",
                        help="rank 0 also prints its median step time and when step 0 ended")
    parser.add_argument("--fail-at-step", type=int, default=-1,
                        help="raise at this step on the last rank (a failing rank, for tests)")
    return parser.parse_args(argv)


def model_of(hidden):
    return nn.Sequential(nn.Linear(hidden, 4 * hidden), nn.GELU(), nn.Linear(4 * hidden, hidden))


def train(args):
    """Runs in an initialised default group; returns what the trace must show."""
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    model = DistributedDataParallel(model_of(args.hidden))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    data = torch.Generator().manual_seed(100 + rank)
    step_ms, first_step_end = [], None
    for step in range(args.steps):
        begin = time.perf_counter()
        if step == args.fail_at_step and rank == world - 1:
            raise RuntimeError(f"ddp_train: rank {rank} fails at step {step} as asked")
        x = torch.randn(args.batch, args.hidden, generator=data)
        loss = (model(x) - x).pow(2).mean()
        optimizer.zero_grad()
        loss.backward()  # DDP's bucket all_reduce: the gradients fit in one 25 MB bucket
        loss = loss.detach()
        dist.all_reduce(loss, op=dist.ReduceOp.AVG)  # the loss every rank agrees on
        optimizer.step()
        step_ms.append((time.perf_counter() - begin) * 1e3)
        first_step_end = first_step_end or time.time()
        if rank == 0:
            print(f"ddp_train: step {step} loss {loss.item():.6f}", flush=True)
    digest = sum(float(p.detach().double().abs().sum()) for p in model.parameters())
    if rank == 0:
        print(f"ddp_train: parameters digest {digest:.6f}", flush=True)
    if rank == 0 and args.timing:
        timed = step_ms[1:] or step_ms  # the first step builds DDP's buckets
        print(f"ddp_train: timing median_step_ms={statistics.median(timed):.3f} "
              f"first_step_end_unix={first_step_end:.6f}", flush=True)
    gradient_bytes = sum(p.numel() * p.element_size() for p in model.parameters())
    return {
        "steps": args.steps,
        # Per step, on the default group: the gradients' bucket and the loss.
        "per_step": [{"group": "default_pg", "op": "all_reduce", "bytes": gradient_bytes,
                      "times": 1},
                     {"group": "default_pg", "op": "all_reduce", "bytes": 4, "times": 1}],
    }


def main(argv=None):
    args = parse_args(argv)
    dist.init_process_group(args.backend)
    try:
        train(args)
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
