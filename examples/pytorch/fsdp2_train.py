"""Fully sharded data parallel training with FSDP2's fully_shard, as a user writes it.

    torchrun --nproc-per-node 4 examples/pytorch/fsdp2_train.py
    partrain launch -n 4 -- python3 examples/pytorch/fsdp2_train.py

Nothing of partrain is imported (docs/pytorch.md). Each block of a small MLP and the model
itself are fully_shard units: every step gathers each unit's parameters before its forward
and again before its backward (reshard after forward) and reduce-scatters its gradients, on
the default group (gloo; --backend nccl on GPUs). Rank 0 prints the loss of every step and a
digest of the final parameters. train() returns the collectives its tensors imply, which
partrain's tests find in the trace.
"""

import argparse

import torch
import torch.distributed as dist
from torch import nn
from torch.distributed.fsdp import fully_shard


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=4)
    parser.add_argument("--hidden", type=int, default=32)
    parser.add_argument("--blocks", type=int, default=2)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--backend", default="gloo")
    return parser.parse_args(argv)


def padded_bytes(parameters, world):
    """A unit's all_gather (and reduce_scatter) size: FSDP2 shards each parameter on dim 0 in
    world chunks of ceil(dim0 / world) rows, padding the last."""
    total = 0
    for p in parameters:
        rows = -(-p.shape[0] // world)
        total += world * rows * (p.numel() // p.shape[0]) * p.element_size()
    return total


def train(args):
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    blocks = [nn.Sequential(nn.Linear(args.hidden, args.hidden), nn.GELU())
              for _ in range(args.blocks)]
    model = nn.Sequential(*blocks, nn.Linear(args.hidden, 1))
    unit_bytes = [padded_bytes(block.parameters(), world) for block in blocks]
    unit_bytes.append(padded_bytes(model[-1].parameters(), world))  # the root: what is left
    for block in blocks:
        fully_shard(block)
    fully_shard(model)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    data = torch.Generator().manual_seed(100 + rank)
    for step in range(args.steps):
        x = torch.randn(args.batch, args.hidden, generator=data)
        loss = model(x).pow(2).mean()
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        if rank == 0:
            print(f"fsdp2_train: step {step} loss {loss.item():.6f}", flush=True)
    digest = sum(float(p.full_tensor().double().abs().sum()) for p in model.parameters())
    if rank == 0:
        print(f"fsdp2_train: parameters digest {digest:.6f}", flush=True)
    per_step = []
    for index, size in enumerate(unit_bytes):
        root = index == len(unit_bytes) - 1
        # The root is not resharded after forward: it is gathered once.
        per_step.append({"group": "default_pg", "op": "all_gather", "bytes": size,
                         "times": 1 if root else 2})
        per_step.append({"group": "default_pg", "op": "reduce_scatter", "bytes": size,
                         "times": 1})
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
