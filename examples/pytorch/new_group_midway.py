"""A process group made in the middle of training, as pipeline or expert-parallel code does.

    torchrun --nproc-per-node 4 examples/pytorch/new_group_midway.py

Nothing of partrain is imported (docs/pytorch.md). Every step all-reduces the gradients of a
linear model over the world; from step --split-at-step on (default 3) the ranks are also paired
(new_group([0, 1]), new_group([2, 3]), ...: every rank makes every group, as c10d requires)
and each pair all-reduces a --pair-elements float32 tensor and exchanges one with send/recv.
Rank 0 prints the loss of every step and a digest of the final parameters. train() returns
the collectives its tensors imply, which partrain's tests find in the trace.
"""

import argparse

import torch
import torch.distributed as dist
import torch.distributed.nn  # noqa: F401  (before init_process_group: docs/pytorch.md)
from torch import nn


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--split-at-step", type=int, default=3)
    parser.add_argument("--hidden", type=int, default=32)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--pair-elements", type=int, default=1000)
    parser.add_argument("--backend", default="gloo")
    return parser.parse_args(argv)


def train(args):
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    model = nn.Linear(args.hidden, args.hidden)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    data = torch.Generator().manual_seed(100 + rank)
    pair = None
    for step in range(args.steps):
        if step == args.split_at_step:
            pairs = [dist.new_group([r, r + 1]) for r in range(0, world - 1, 2)]
            pair = pairs[rank // 2] if rank // 2 < len(pairs) else None
        x = torch.randn(args.batch, args.hidden, generator=data)
        loss = (model(x) - x).pow(2).mean()
        optimizer.zero_grad()
        loss.backward()
        for p in model.parameters():
            p.grad /= world
            dist.all_reduce(p.grad)
        if pair is not None:
            shared = torch.full((args.pair_elements,), float(rank))
            dist.all_reduce(shared, group=pair)
            partner = rank ^ 1
            message = torch.full((args.pair_elements,), float(step))
            if rank % 2 == 0:
                dist.send(message, partner, group=pair)
            else:
                dist.recv(message, partner, group=pair)
        optimizer.step()
        if rank == 0:
            print(f"new_group_midway: step {step} loss {loss.item():.6f}", flush=True)
    digest = sum(float(p.detach().double().abs().sum()) for p in model.parameters())
    if rank == 0:
        print(f"new_group_midway: parameters digest {digest:.6f}", flush=True)
    per_step = [{"group": "default_pg", "op": "all_reduce",
                 "bytes": p.numel() * p.element_size(), "times": 1} for p in model.parameters()]
    pair_bytes = args.pair_elements * 4
    in_pair = world % 2 == 0 or rank < world - 1
    return {
        "steps": args.steps,
        "per_step": per_step,
        "from_step": {str(args.split_at_step): [
            {"group": "undefined", "op": "all_reduce", "bytes": pair_bytes, "times": 1},
            {"group": "undefined", "op": "send" if rank % 2 == 0 else "recv",
             "bytes": pair_bytes, "times": 1},
        ] if in_pair else []},
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
